"""The feed-forward half of an ALBERT transformer layer (`ffn_1` + `LayerNorm_1`)."""

import tensorflow as tf
import tf_keras

from albert_tf.layers import activations
from albert_tf.layers import dropout as dropout_lib
from albert_tf.layers import initializers
from albert_tf.layers import kernel_layout


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertFeedForwardBlock(tf_keras.layers.Layer):
  """Dense H->I with the activation, dense I->H, dropout, residual and post-LayerNorm.

  Variables mirror the official `ffn_1/intermediate/dense` [H, I],
  `ffn_1/intermediate/output/dense` [I, H] and `LayerNorm_1`.

  Call args:
    hidden_states: [batch, seq_len, hidden].
    dropout_seed: optional int32 [2], the seed of the output dropout mask (stateless, so a
      recomputation drops the same units); None uses the Keras dropout layer.
  Returns:
    [batch, seq_len, hidden].
  """

  def __init__(self, hidden_size, intermediate_size, hidden_act="gelu", hidden_dropout_prob=0.0,
               initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.intermediate_size = intermediate_size
    self.hidden_act = hidden_act
    self.hidden_dropout_prob = hidden_dropout_prob
    self.initializer_range = initializer_range
    self.intermediate = tf_keras.layers.Dense(
        intermediate_size, activation=activations.get_activation(hidden_act),
        kernel_initializer=initializers.truncated_normal(initializer_range),
        name="intermediate")
    self.output_dense = tf_keras.layers.Dense(
        hidden_size, kernel_initializer=initializers.truncated_normal(initializer_range),
        name="output_dense")
    self.layer_norm = initializers.layer_norm("LayerNorm_1")
    self.output_dropout = tf_keras.layers.Dropout(hidden_dropout_prob)

  def build(self, input_shape=None):
    self.intermediate.build([None, self.hidden_size])
    self.output_dense.build([None, self.intermediate_size])
    self.layer_norm.build([None, self.hidden_size])
    super().build(input_shape)

  def call(self, hidden_states, training=None, dropout_seed=None):
    # 2-D [batch * seq_len, hidden] for the dense layers, so that grappler can fuse MatMul,
    # BiasAdd and the activation on oneDNN CPUs (a rank-3 Dense is a tensordot).
    flat = tf.reshape(hidden_states, [-1, self.hidden_size])
    # kernel_layout.dense: under the TFLite converter's scope, the kernels as [out, in] copies
    # (xxlarge's [4096, 16384] would otherwise stay float32 in an int8 file).
    ffn_output = kernel_layout.dense(self.output_dense, self._intermediate(flat, training))
    if dropout_seed is not None and training:
      ffn_output = dropout_lib.seeded_dropout(ffn_output, self.hidden_dropout_prob, dropout_seed)
    else:
      ffn_output = self.output_dropout(ffn_output, training=training)
    output = self.layer_norm(ffn_output + flat)
    return tf.reshape(output, tf.shape(hidden_states))

  def _intermediate(self, flat, training):
    """The dense H->I layer and its activation: [batch * seq_len, hidden] -> [..., intermediate].

    A bfloat16/float16 train step with GELU computes the GELU in float32 with its derivative
    written out (activations.gelu_float32_inside: the same function, 12 % faster ALBERT-base
    bf16 step). Everything else calls the Dense with its activation inside, the op sequence
    grappler fuses into one oneDNN MatMul + BiasAdd + GELU (applying the activation after the
    layer call loses that fusion).
    """
    dense = self.intermediate
    if not (training and dense.activation is activations.gelu
            and flat.dtype in (tf.bfloat16, tf.float16)):
      return kernel_layout.dense(dense, flat)
    # Inside this layer's call the kernel and bias read as the compute dtype (autocast).
    pre_activation = tf.nn.bias_add(tf.matmul(flat, dense.kernel), dense.bias)
    return activations.gelu_float32_inside(pre_activation)

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
                  hidden_act=self.hidden_act, hidden_dropout_prob=self.hidden_dropout_prob,
                  initializer_range=self.initializer_range)
    return config
