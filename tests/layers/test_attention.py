"""AlbertAttentionBlock against a NumPy reference of the official attention layer (padding masked,
all positions and [CLS] only)."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers import AlbertAttentionBlock, attention_mask_adder
from tests.helpers import albert_numpy


# Random weights (not the initializer's); the NumPy blocks are those the whole-model reference
# (tests/helpers/albert_numpy.forward) is built from, in float64.
@pytest.mark.parametrize("first_token_only", [False, True])
def test_attention_block_matches_numpy(first_token_only):
  rng = np.random.default_rng(1)
  hidden, heads = 16, 4
  layer = AlbertAttentionBlock(hidden_size=hidden, num_attention_heads=heads)
  layer.build()
  weights = {name: albert_numpy.random_array(rng, hidden, hidden) if name.startswith("w") else albert_numpy.random_array(rng, hidden)
             for name in ("wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo")}
  gamma, beta = 1.0 + albert_numpy.random_array(rng, hidden), albert_numpy.random_array(rng, hidden)
  for dense, (kernel, bias) in [(layer.query, ("wq", "bq")), (layer.key, ("wk", "bk")),
                                (layer.value, ("wv", "bv")), (layer.output_dense, ("wo", "bo"))]:
    dense.kernel.assign(weights[kernel])
    dense.bias.assign(weights[bias])
  layer.layer_norm.gamma.assign(gamma)
  layer.layer_norm.beta.assign(beta)
  x = albert_numpy.random_array(rng, 3, 6, hidden)
  mask = np.ones((3, 6), np.int32)
  mask[1, 4:] = 0
  mask[2, 1:] = 0
  adder = attention_mask_adder(tf.constant(mask), tf.float32)
  got = layer(tf.constant(x), adder, first_token_only=first_token_only).numpy()
  numpy_adder = (1.0 - mask.astype(np.float64))[:, None, None, :] * -10000.0
  want = albert_numpy.attention_block(x.astype(np.float64), numpy_adder, gamma=gamma, beta=beta,
                                      num_heads=heads, **weights)
  if first_token_only:
    want = want[:, :1]  # only [CLS] asks; it still attends to every real token
  assert got.shape == want.shape
  np.testing.assert_allclose(got, want, atol=5e-5)
