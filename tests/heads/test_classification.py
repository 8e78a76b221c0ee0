"""ClassificationHead against NumPy; dropout only in training."""

import numpy as np
import tensorflow as tf

from albert_tf.heads.classification import ClassificationHead


def test_classification_head_matches_numpy_and_dropout_only_in_training():
  head = ClassificationHead(hidden_size=8, num_classes=3, dropout_rate=0.1)
  pooled = tf.constant(np.random.default_rng(0).normal(size=(4, 8)), tf.float32)
  logits = head(pooled, training=False).numpy()
  w, b = head.output_weights.numpy(), head.output_bias.numpy()
  assert w.shape == (3, 8)  # official layout [num_labels, hidden]
  np.testing.assert_allclose(logits, pooled.numpy() @ w.T + b, rtol=1e-5, atol=1e-6)
  tf.random.set_seed(1)
  trained = head(tf.ones([64, 8]), training=True).numpy()
  assert not np.allclose(trained, head(tf.ones([64, 8]), training=False).numpy())
  clone = ClassificationHead.from_config(head.get_config())
  assert clone.get_config() == head.get_config() and clone.dropout_rate == 0.1
