"""The fine-tuning classification head: dropout + one dense layer on the pooled output."""

import tf_keras

from albert_tf.heads.sentence_order import SentenceOrderHead


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class ClassificationHead(SentenceOrderHead):
  """logits = dropout(pooled_output) @ output_weights^T + output_bias (official run_classifier).

  The sentence-order head with any number of classes and dropout in front: the weights are stored
  [num_classes, hidden] under the official names, so a classifier fine-tuned by the official code
  converts variable for variable. For regression (STS-B) num_classes is 1 and the logit is the
  score.

  Call args:
    pooled_output: [batch, hidden].
    training: applies dropout (0.1 in the official fine-tuning) when True.
  Returns:
    float32 [batch, num_classes].
  """

  def __init__(self, hidden_size, num_classes, dropout_rate=0.1, initializer_range=0.02,
               **kwargs):
    super().__init__(hidden_size, num_classes=num_classes,
                     initializer_range=initializer_range, **kwargs)
    self.dropout_rate = dropout_rate
    self.dropout = tf_keras.layers.Dropout(dropout_rate)

  def call(self, pooled_output, training=None):
    return super().call(self.dropout(pooled_output, training=training))

  def get_config(self):
    config = super().get_config()
    config.update(dropout_rate=self.dropout_rate)
    return config
