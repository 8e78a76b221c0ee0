"""GLUE metrics against hand-computed values and NumPy."""

import numpy as np
import pytest

from albert_tf.metrics import glue_metrics as gm


# ---------------------------------------------------------------------------- metrics
def test_metrics_against_hand_computed_values():
  labels = [1, 1, 1, 0, 0, 0, 0, 1]
  preds = [1, 1, 0, 0, 0, 1, 0, 1]
  # tp=3 tn=3 fp=1 fn=1
  assert gm.accuracy(labels, preds) == 6 / 8
  assert gm.f1_score(labels, preds) == pytest.approx(2 * 3 / (2 * 3 + 1 + 1))
  assert gm.matthews_corrcoef(labels, preds) == pytest.approx((9 - 1) / np.sqrt(4 * 4 * 4 * 4))
  assert gm.matthews_corrcoef([1, 1, 0], [1, 1, 1]) == 0.0  # empty marginal -> 0 (div_no_nan)
  assert gm.f1_score([0, 0], [0, 0]) == 0.0


def test_correlations_against_numpy_and_ties():
  rng = np.random.default_rng(0)
  x, y = rng.normal(size=50), rng.normal(size=50)
  assert gm.pearson_corrcoef(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1])
  # Spearman with ties: average ranks [1, 2.5, 2.5, 4] vs [1, 2, 3, 4].
  ranks = np.array([1, 2.5, 2.5, 4])
  assert gm.spearman_corrcoef([1, 2, 2, 3], [10, 20, 30, 40]) == pytest.approx(
      np.corrcoef(ranks, [1, 2, 3, 4])[0, 1])
  assert gm.spearman_corrcoef([3, 1, 2], [30, 10, 20]) == pytest.approx(1.0)


def test_task_metrics_keys():
  assert set(gm.task_metrics("cola", [0, 1], [0, 1])) == {"eval_accuracy", "matthew_corr"}
  assert set(gm.task_metrics("qqp", [0, 1], [0, 1])) == {"eval_accuracy", "f1",
                                                         "accuracy_and_f1"}
  stsb = gm.task_metrics("sts-b", [0.0, 1.0, 3.0], [0.5, 1.0, 2.0])
  assert stsb["MSE"] == pytest.approx((0.25 + 0 + 1) / 3)
  assert set(stsb) == {"pearson", "spearman", "MSE"}
