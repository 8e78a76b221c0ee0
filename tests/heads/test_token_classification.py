"""The token-classification head: the classification head at every position, dropout only when
training."""

import numpy as np
import tensorflow as tf

from albert_tf.heads import TokenClassificationHead


def test_logits_at_every_position_and_dropout_only_in_training():
  head = TokenClassificationHead(hidden_size=8, num_classes=5, dropout_rate=0.5)
  head.build(None)
  rng = np.random.default_rng(0)
  head.output_weights.assign(rng.normal(size=(5, 8)).astype(np.float32))
  head.output_bias.assign(rng.normal(size=(5,)).astype(np.float32))
  sequence = rng.normal(size=(2, 3, 8)).astype(np.float32)
  logits = head(tf.constant(sequence), training=False).numpy()
  want = sequence @ head.output_weights.numpy().T + head.output_bias.numpy()
  assert logits.shape == (2, 3, 5)
  np.testing.assert_allclose(logits, want, rtol=1e-5, atol=1e-5)
  trained = head(tf.constant(sequence), training=True).numpy()
  assert not np.allclose(trained, want)
  assert TokenClassificationHead.from_config(head.get_config()).get_config() == head.get_config()
