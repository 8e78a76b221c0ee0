"""The attention half of an ALBERT transformer layer (`attention_1` + `LayerNorm`)."""

import math

import tensorflow as tf
import tf_keras

from albert_tf.layers import dropout as dropout_lib
from albert_tf.layers import initializers


def attention_mask_adder(input_mask, dtype):
  """Turns an input mask into the additive bias the official code adds to attention scores.

  Args:
    input_mask: int or float [batch, seq_len], 1 for real tokens, 0 for padding (keys only).
    dtype: the compute dtype of the scores.
  Returns:
    [batch, 1, 1, seq_len]: 0 where attended, -10000 where masked.
  """
  mask = tf.cast(input_mask, dtype)[:, tf.newaxis, tf.newaxis, :]
  return (1.0 - mask) * tf.cast(-10000.0, dtype)


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertAttentionBlock(tf_keras.layers.Layer):
  """Multi-head self-attention, output projection, dropout, residual and post-LayerNorm.

  Variables mirror the official `attention_1/self/{query,key,value}`, `attention_1/output/dense`
  and the `LayerNorm` that follows (all kernels [H, H]).

  Call args:
    hidden_states: [batch, seq_len, hidden].
    mask_adder: [batch, 1, 1, seq_len] from `attention_mask_adder`.
    first_token_only: attend from the first position only (keys and values still cover every
      position). Exact for that row; used in the last layer when only the pooled output is needed.
    dropout_seeds: optional int32 [2, 2], the seeds of the probabilities' and the output's
      dropout masks (stateless, so a recomputation drops the same units); None uses the Keras
      dropout layers.
  Returns:
    [batch, seq_len, hidden], or [batch, 1, hidden] with first_token_only.
  """

  def __init__(self, hidden_size, num_attention_heads, attention_probs_dropout_prob=0.0,
               hidden_dropout_prob=0.0, initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    if hidden_size % num_attention_heads:
      raise ValueError(f"hidden_size={hidden_size} is not a multiple of "
                       f"num_attention_heads={num_attention_heads}")
    self.hidden_size = hidden_size
    self.num_attention_heads = num_attention_heads
    self.head_size = hidden_size // num_attention_heads
    self.attention_probs_dropout_prob = attention_probs_dropout_prob
    self.hidden_dropout_prob = hidden_dropout_prob
    self.initializer_range = initializer_range

    def dense(name):
      # A fresh initializer per weight: tf_keras repeats an unseeded instance's values.
      return tf_keras.layers.Dense(
          hidden_size, kernel_initializer=initializers.truncated_normal(initializer_range),
          name=name)

    self.query = dense("query")
    self.key = dense("key")
    self.value = dense("value")
    self.output_dense = dense("output_dense")
    self.layer_norm = initializers.layer_norm("LayerNorm")
    self.probs_dropout = tf_keras.layers.Dropout(attention_probs_dropout_prob)
    self.output_dropout = tf_keras.layers.Dropout(hidden_dropout_prob)

  def build(self, input_shape=None):
    for layer in (self.query, self.key, self.value, self.output_dense):
      layer.build([None, self.hidden_size])
    self.layer_norm.build([None, self.hidden_size])
    super().build(input_shape)

  def _split_heads(self, x, batch, seq_len):
    # [B, S, H] -> [B, N, S, D]
    x = tf.reshape(x, [batch, seq_len, self.num_attention_heads, self.head_size])
    return tf.transpose(x, [0, 2, 1, 3])

  def call(self, hidden_states, mask_adder, training=None, first_token_only=False,
           dropout_seeds=None):
    # Batch and length come from the mask, which every layer shares: their shape ops are then one
    # common subexpression for the whole stack instead of one set per layer.
    mask_shape = tf.shape(mask_adder)
    batch, seq_len = mask_shape[0], mask_shape[3]
    queries_from = hidden_states[:, :1] if first_token_only else hidden_states
    query_len = 1 if first_token_only else seq_len
    # The dense layers see 2-D [batch * seq_len, hidden] inputs: a rank-3 Dense is a tensordot
    # (reshape, MatMul, reshape, BiasAdd), which keeps grappler from fusing the bias into the
    # MatMul on oneDNN CPUs.
    flat = tf.reshape(hidden_states, [-1, self.hidden_size])
    queries_flat = tf.reshape(queries_from, [-1, self.hidden_size])
    # Scaling the queries before the product (rather than the [B, N, Q, S] scores after it)
    # is the same function with S/D times fewer multiplies.
    scale = tf.cast(1.0 / math.sqrt(self.head_size), hidden_states.dtype)
    q = self._split_heads(self.query(queries_flat) * scale, batch, query_len)
    k = self._split_heads(self.key(flat), batch, seq_len)
    v = self._split_heads(self.value(flat), batch, seq_len)
    scores = tf.matmul(q, k, transpose_b=True) + tf.cast(mask_adder, q.dtype)  # [B, N, Q, S]
    probs = tf.nn.softmax(scores, axis=-1)
    if dropout_seeds is not None and training:
      probs = dropout_lib.seeded_dropout(probs, self.attention_probs_dropout_prob,
                                         dropout_seeds[0])
    else:
      probs = self.probs_dropout(probs, training=training)
    context = tf.matmul(probs, v)  # [B, N, Q, D]
    context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, self.hidden_size])
    attention_output = self.output_dense(context)
    if dropout_seeds is not None and training:
      attention_output = dropout_lib.seeded_dropout(attention_output, self.hidden_dropout_prob,
                                                    dropout_seeds[1])
    else:
      attention_output = self.output_dropout(attention_output, training=training)
    output = self.layer_norm(attention_output + queries_flat)
    return tf.reshape(output, [batch, query_len, self.hidden_size])

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_attention_heads=self.num_attention_heads,
                  attention_probs_dropout_prob=self.attention_probs_dropout_prob,
                  hidden_dropout_prob=self.hidden_dropout_prob,
                  initializer_range=self.initializer_range)
    return config
