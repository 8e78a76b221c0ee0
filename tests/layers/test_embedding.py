"""AlbertEmbeddings against a NumPy reference of the official embedding lookup + LayerNorm."""

import numpy as np
import tensorflow as tf

from albert_tf.layers import AlbertEmbeddings
from tests.helpers import albert_numpy


# Random weights (not the initializer's); the NumPy blocks are those the whole-model reference
# (tests/helpers/albert_numpy.forward) is built from, in float64.
def test_embeddings_match_numpy():
  rng = np.random.default_rng(0)
  layer = AlbertEmbeddings(vocab_size=30, embedding_size=8, max_position_embeddings=16,
                           type_vocab_size=2)
  layer.build()
  word, position, token_type = albert_numpy.random_array(rng, 30, 8), albert_numpy.random_array(rng, 16, 8), albert_numpy.random_array(rng, 2, 8)
  gamma, beta = 1.0 + albert_numpy.random_array(rng, 8), albert_numpy.random_array(rng, 8)
  for variable, value in [(layer.word_embeddings, word), (layer.position_embeddings, position),
                          (layer.token_type_embeddings, token_type),
                          (layer.layer_norm.gamma, gamma), (layer.layer_norm.beta, beta)]:
    variable.assign(value)
  ids = rng.integers(0, 30, size=(2, 7)).astype(np.int32)
  segments = (np.arange(7) >= 4).astype(np.int32)[None].repeat(2, 0)
  got = layer(tf.constant(ids), tf.constant(segments)).numpy()
  want = albert_numpy.embeddings(ids, segments, word, position, token_type, gamma, beta)
  np.testing.assert_allclose(got, want, atol=2e-5)
