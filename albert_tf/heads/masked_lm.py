"""The masked-LM head (`cls/predictions`), decoder tied to the word embeddings."""

import tensorflow as tf
import tf_keras

from albert_tf.layers import activations
from albert_tf.layers import initializers


def gather_positions(sequence, positions):
  """Gathers vectors at given positions of each sequence.

  Args:
    sequence: [batch, seq_len, width].
    positions: int [batch, num_positions].
  Returns:
    [batch, num_positions, width].
  """
  return tf.gather(sequence, tf.cast(positions, tf.int32), batch_dims=1)


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class MaskedLMHead(tf_keras.layers.Layer):
  """Dense H->E with the activation, LayerNorm, then logits against the word embeddings + bias.

  The masked positions are gathered *before* the transform, so the head costs
  O(num_predictions), not O(seq_len). The decoder matrix is the encoder's word-embedding table,
  passed at call time (it is owned by the embedding layer, as in the official model).

  Call args:
    sequence_output: [batch, seq_len, hidden].
    embedding_table: [vocab, embedding_size].
    positions: int [batch, num_predictions], or None for every position.
  Returns:
    float32 logits [batch, num_predictions (or seq_len), vocab].
  """

  def __init__(self, vocab_size, embedding_size, hidden_size, hidden_act="gelu",
               initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.embedding_size = embedding_size
    self.hidden_size = hidden_size
    self.hidden_act = hidden_act
    self.initializer_range = initializer_range
    self.transform = tf_keras.layers.Dense(
        embedding_size, activation=activations.get_activation(hidden_act),
        kernel_initializer=initializers.truncated_normal(initializer_range), name="transform")
    self.layer_norm = initializers.layer_norm("LayerNorm")

  def build(self, input_shape=None):
    self.transform.build([None, self.hidden_size])
    self.layer_norm.build([None, None, self.embedding_size])
    self.output_bias = self.add_weight("output_bias", shape=[self.vocab_size],
                                       initializer="zeros")
    super().build(input_shape)

  def call(self, sequence_output, embedding_table, positions=None):
    hidden = sequence_output
    if positions is not None:
      hidden = gather_positions(hidden, positions)
    hidden = self.layer_norm(self.transform(hidden))
    logits = tf.matmul(hidden, tf.cast(embedding_table, hidden.dtype), transpose_b=True)
    # Logits leave the head in float32 so softmax/loss are exact under mixed precision.
    return tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                  hidden_size=self.hidden_size, hidden_act=self.hidden_act,
                  initializer_range=self.initializer_range)
    return config
