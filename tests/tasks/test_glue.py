"""The GLUE ClassificationTask: losses (classification and STS-B regression) against NumPy."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tasks.glue import ClassificationTask, GlueConfig
from tests.helpers.tiny_config import tiny_albert_config


def test_task_losses_against_numpy(tmp_path):
  task = ClassificationTask(GlueConfig(tiny_albert_config(), str(tmp_path), task_name="mrpc",
                                       max_seq_length=16, cached_dir=str(tmp_path)),
                            tokenizer=object())
  logits = np.array([[2.0, -1.0], [0.5, 0.5], [-1.0, 3.0]], np.float32)
  labels = {"label_ids": tf.constant([0, 1, 0]), "is_real_example": tf.constant([1., 1., 0.])}
  loss, _ = task.build_losses(labels, {"logits": tf.constant(logits)}, global_batch_size=4)
  log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  expected = -(log_probs[0, 0] + log_probs[1, 1]) / 4  # padding example weighted 0
  assert float(loss) == pytest.approx(expected, rel=1e-5)
  state = task.aggregate_outputs(None, None, {k: v.numpy() for k, v in labels.items()},
                                 {"logits": logits, "probabilities": logits})
  result, _ = task.reduce_outputs(state, "eval")
  assert result["eval_accuracy"] == 0.5 and result["num_examples"] == 2
  assert result["eval_loss"] == pytest.approx(-(log_probs[0, 0] + log_probs[1, 1]) / 2, rel=1e-5)
  stsb = ClassificationTask(GlueConfig(tiny_albert_config(), str(tmp_path), task_name="sts-b",
                                       max_seq_length=16, cached_dir=str(tmp_path)),
                            tokenizer=object())
  loss, _ = stsb.build_losses({"label_ids": tf.constant([1.0, 3.0])},
                              {"logits": tf.constant([[1.5], [2.0]])}, global_batch_size=2)
  assert float(loss) == pytest.approx((0.25 + 1.0) / 2)
