"""The fine-tuning classification head: dropout + one dense layer on the pooled output."""

import tensorflow as tf
import tf_keras

from albert_tf.layers import initializers


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class ClassificationHead(tf_keras.layers.Layer):
  """logits = dropout(pooled_output) @ output_weights^T + output_bias (official run_classifier).

  The weights are stored [num_classes, hidden] under the official names, so a classifier
  fine-tuned by the official code converts variable for variable. For regression (STS-B)
  num_classes is 1 and the logit is the score.

  Call args:
    pooled_output: [batch, hidden].
    training: applies dropout (0.1 in the official fine-tuning) when True.
  Returns:
    float32 [batch, num_classes].
  """

  def __init__(self, hidden_size, num_classes, dropout_rate=0.1, initializer_range=0.02,
               **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.num_classes = num_classes
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.dropout = tf_keras.layers.Dropout(dropout_rate)

  def build(self, input_shape=None):
    self.output_weights = self.add_weight(
        "output_weights", shape=[self.num_classes, self.hidden_size],
        initializer=initializers.truncated_normal(self.initializer_range))
    self.output_bias = self.add_weight("output_bias", shape=[self.num_classes],
                                       initializer="zeros")
    super().build(input_shape)

  def call(self, pooled_output, training=None):
    pooled_output = self.dropout(pooled_output, training=training)
    logits = tf.matmul(pooled_output, tf.cast(self.output_weights, pooled_output.dtype),
                       transpose_b=True)
    # Logits leave the head in float32 even under mixed precision (stable softmax / loss).
    return tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_classes=self.num_classes,
                  dropout_rate=self.dropout_rate, initializer_range=self.initializer_range)
    return config
