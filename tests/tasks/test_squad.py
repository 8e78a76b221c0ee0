"""The SQuAD Task's losses against NumPy."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tasks.squad import SquadConfig, SquadTask
from tests.helpers import squad as squad_helpers
from tests.helpers.tiny_config import tiny_albert_config


# The tiny config with a 100-piece vocabulary.
CONFIG_OVERRIDES = dict(vocab_size=100, **squad_helpers.TINY_CONFIG_OVERRIDES)


def _log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


@pytest.mark.parametrize("v2", [False, True])
def test_losses_match_numpy(v2):
  rng = np.random.RandomState(1)
  labels = {"start_positions": np.array([3, 0, 5]), "end_positions": np.array([4, 0, 7]),
            "is_impossible": np.array([0, 1, 0])}
  logits_s, logits_e = rng.normal(size=(3, 9)), rng.normal(size=(3, 9))
  cls = rng.normal(size=3)
  if v2:
    outputs = {"start_log_probs": _log_softmax(logits_s), "end_log_probs": _log_softmax(logits_e),
               "cls_logits": cls}
  else:
    outputs = {"start_logits": logits_s, "end_logits": logits_e}
  outputs = {k: tf.constant(v, tf.float32) for k, v in outputs.items()}
  task = SquadTask(SquadConfig(tiny_albert_config(**CONFIG_OVERRIDES),
                               version_2_with_negative=v2, max_seq_length=9,
                               max_query_length=4))
  loss, aux = task.build_losses({k: tf.constant(v) for k, v in labels.items()}, outputs,
                                global_batch_size=4)
  rows = np.arange(3)
  start_ce = -_log_softmax(logits_s)[rows, labels["start_positions"]]
  end_ce = -_log_softmax(logits_e)[rows, labels["end_positions"]]
  per_example = (start_ce + end_ce) / 2
  if v2:
    y = labels["is_impossible"]
    sigmoid_ce = np.maximum(cls, 0) - cls * y + np.log1p(np.exp(-np.abs(cls)))
    per_example = per_example + 0.5 * sigmoid_ce
    np.testing.assert_allclose(aux["cls_loss"], sigmoid_ce.sum() / 4, rtol=1e-5)
  # Averaged over the global batch (4), not the local one (3).
  np.testing.assert_allclose(loss, per_example.sum() / 4, rtol=1e-5)
  np.testing.assert_allclose(aux["start_loss"], start_ce.sum() / 4, rtol=1e-5)
