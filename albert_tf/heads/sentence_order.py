"""The sentence-order head (`cls/seq_relationship`): 2 classes on the pooled output."""

import tensorflow as tf
import tf_keras

from albert_tf.layers import initializers


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class SentenceOrderHead(tf_keras.layers.Layer):
  """logits = pooled_output @ output_weights^T + output_bias (class 1 = segments swapped).

  The weights are stored [num_classes, hidden] as the official checkpoint stores them.

  Call args:
    pooled_output: [batch, hidden].
  Returns:
    float32 [batch, num_classes].
  """

  def __init__(self, hidden_size, num_classes=2, initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.num_classes = num_classes
    self.initializer_range = initializer_range

  def build(self, input_shape=None):
    self.output_weights = self.add_weight(
        "output_weights", shape=[self.num_classes, self.hidden_size],
        initializer=initializers.truncated_normal(self.initializer_range))
    self.output_bias = self.add_weight("output_bias", shape=[self.num_classes],
                                       initializer="zeros")
    super().build(input_shape)

  def call(self, pooled_output):
    logits = tf.matmul(pooled_output, tf.cast(self.output_weights, pooled_output.dtype),
                       transpose_b=True)
    return tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_classes=self.num_classes,
                  initializer_range=self.initializer_range)
    return config
