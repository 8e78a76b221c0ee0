"""AlbertFeedForwardBlock against a NumPy reference of the official ffn_1 + LayerNorm_1."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers import AlbertFeedForwardBlock
from tests.helpers import albert_numpy


# Random weights (not the initializer's); the NumPy blocks are those the whole-model reference
# (tests/helpers/albert_numpy.forward) is built from, in float64.
@pytest.mark.parametrize("act", ["gelu", "relu"])
def test_feed_forward_block_matches_numpy(act):
  rng = np.random.default_rng(2)
  layer = AlbertFeedForwardBlock(hidden_size=8, intermediate_size=24, hidden_act=act)
  layer.build()
  w_in, b_in, w_out, b_out = (albert_numpy.random_array(rng, 8, 24), albert_numpy.random_array(rng, 24), albert_numpy.random_array(rng, 24, 8),
                              albert_numpy.random_array(rng, 8))
  gamma, beta = 1.0 + albert_numpy.random_array(rng, 8), albert_numpy.random_array(rng, 8)
  for variable, value in [(layer.intermediate.kernel, w_in), (layer.intermediate.bias, b_in),
                          (layer.output_dense.kernel, w_out), (layer.output_dense.bias, b_out),
                          (layer.layer_norm.gamma, gamma), (layer.layer_norm.beta, beta)]:
    variable.assign(value)
  x = albert_numpy.random_array(rng, 2, 5, 8)
  got = layer(tf.constant(x)).numpy()
  want = albert_numpy.feed_forward_block(x.astype(np.float64), w_in, b_in, w_out, b_out, gamma,
                                         beta, albert_numpy.ACTS[act])
  np.testing.assert_allclose(got, want, atol=5e-5)


@pytest.mark.parametrize("dtype_policy,training,expected", [
    ("mixed_bfloat16", True, 1), ("mixed_bfloat16", False, 0), ("float32", True, 0)])
def test_low_precision_training_uses_the_float32_inside_gelu(monkeypatch, dtype_policy, training,
                                                              expected):
  """Only a bfloat16/float16 train step swaps the GELU; serving keeps the fusable form."""
  from albert_tf.layers import activations  # pylint: disable=g-import-not-at-top
  calls = []
  original = activations.gelu_float32_inside
  monkeypatch.setattr(activations, "gelu_float32_inside",
                      lambda x: calls.append(x.dtype) or original(x))
  import tf_keras  # pylint: disable=g-import-not-at-top
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy(dtype_policy)  # as the Trainer builds its model
  try:
    block = AlbertFeedForwardBlock(16, 32)
    out = block(tf.cast(tf.random.normal([2, 3, 16]), block.compute_dtype), training=training)
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)
  assert out.shape == (2, 3, 16)
  assert len(calls) == expected and all(d == tf.bfloat16 for d in calls)
