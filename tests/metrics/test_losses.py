"""The NumPy softmax cross-entropy used by GLUE and RACE evaluation."""

import numpy as np
import tensorflow as tf


def test_numpy_softmax_cross_entropy_matches_tensorflow():
  from albert_tf.metrics.losses import softmax_cross_entropy  # pylint: disable=g-import-not-at-top
  rng = np.random.RandomState(0)
  logits = rng.standard_normal((7, 4)) * 5
  labels = rng.randint(0, 4, 7)
  want = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits).numpy()
  np.testing.assert_allclose(softmax_cross_entropy(logits, labels), want, rtol=1e-6)
