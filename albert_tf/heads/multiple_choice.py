"""The multiple-choice head (RACE): one score per choice, softmax over the choices."""

import tensorflow as tf
import tf_keras

from albert_tf.heads.classification import ClassificationHead


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class MultipleChoiceHead(tf_keras.layers.Layer):
  """Scores each [CLS] context [SEP] choice [SEP] with a one-unit dense layer (official RACE).

  Call args:
    pooled_output: [batch * num_choices, hidden], choices of one question contiguous.
    training: dropout (official --dropout_prob, 0.1) when True.
  Returns:
    float32 logits [batch, num_choices]; softmax over the last axis gives choice probabilities.
  """

  def __init__(self, hidden_size, num_choices=4, dropout_rate=0.1, initializer_range=0.02,
               **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.num_choices = num_choices
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    # Same variables as the official race head: output_weights [1, hidden], output_bias [1].
    self.scorer = ClassificationHead(hidden_size, 1, dropout_rate=dropout_rate,
                                     initializer_range=initializer_range, name="scorer")

  def build(self, input_shape=None):
    self.scorer.build(input_shape)
    super().build(input_shape)

  def call(self, pooled_output, training=None):
    scores = self.scorer(pooled_output, training=training)  # [batch * choices, 1]
    return tf.reshape(scores, [-1, self.num_choices])

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_choices=self.num_choices,
                  dropout_rate=self.dropout_rate, initializer_range=self.initializer_range)
    return config
