"""MultipleChoiceHead: one score per choice, softmax over the choices."""

import numpy as np
import tensorflow as tf

from albert_tf.heads.multiple_choice import MultipleChoiceHead


def test_multiple_choice_head_softmax_over_choices():
  head = MultipleChoiceHead(hidden_size=8, num_choices=4)
  pooled = tf.constant(np.random.default_rng(2).normal(size=(8, 8)), tf.float32)
  logits = head(pooled, training=False).numpy()
  scorer = head.scorer
  scores = pooled.numpy() @ scorer.output_weights.numpy().T + scorer.output_bias.numpy()
  np.testing.assert_allclose(logits, scores.reshape(2, 4), rtol=1e-5, atol=1e-6)
  assert MultipleChoiceHead.from_config(head.get_config()).get_config() == head.get_config()
