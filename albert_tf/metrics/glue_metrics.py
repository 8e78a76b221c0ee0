"""GLUE metrics on whole evaluation sets, in NumPy.

Matthews correlation (CoLA), accuracy and F1 (MRPC, QQP), Pearson and Spearman (STS-B), accuracy
(everything else). Keys follow the official run_classifier's eval results (`eval_accuracy`,
`matthew_corr`, `pearson`), so eval_results.txt reads the same.
"""

import numpy as np


def accuracy(labels, predictions):
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  if labels.size == 0:
    return 0.0
  return float(np.mean(labels == predictions))


def _confusion(labels, predictions):
  labels = np.asarray(labels).astype(bool)
  predictions = np.asarray(predictions).astype(bool)
  tp = float(np.sum(labels & predictions))
  tn = float(np.sum(~labels & ~predictions))
  fp = float(np.sum(~labels & predictions))
  fn = float(np.sum(labels & ~predictions))
  return tp, tn, fp, fn


def f1_score(labels, predictions):
  """F1 of the positive class (label 1). 0 when there is no positive label or prediction."""
  tp, _, fp, fn = _confusion(labels, predictions)
  denominator = 2 * tp + fp + fn
  return 2 * tp / denominator if denominator else 0.0


def matthews_corrcoef(labels, predictions):
  """Binary Matthews correlation; 0 when any marginal is empty (as the official div_no_nan)."""
  tp, tn, fp, fn = _confusion(labels, predictions)
  denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
  return float((tp * tn - fp * fn) / denominator) if denominator else 0.0


def pearson_corrcoef(x, y):
  x = np.asarray(x, dtype=np.float64)
  y = np.asarray(y, dtype=np.float64)
  xc, yc = x - x.mean(), y - y.mean()
  denominator = np.sqrt(np.sum(xc * xc) * np.sum(yc * yc))
  return float(np.sum(xc * yc) / denominator) if denominator else 0.0


def _average_ranks(values):
  """Ranks 1..n with ties given their average rank (what Spearman needs)."""
  values = np.asarray(values, dtype=np.float64)
  order = np.argsort(values, kind="mergesort")
  sorted_values = values[order]
  ranks = np.empty(len(values), dtype=np.float64)
  start = 0
  while start < len(values):
    end = start
    while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
      end += 1
    ranks[order[start:end + 1]] = (start + end) / 2.0 + 1.0
    start = end + 1
  return ranks


def spearman_corrcoef(x, y):
  return pearson_corrcoef(_average_ranks(x), _average_ranks(y))


def task_metrics(task_name, labels, predictions):
  """The metrics the GLUE leaderboard reports for `task_name` (official task names).

  Args:
    labels: gold class indices [N] (or scores for sts-b).
    predictions: predicted class indices [N] (or scores for sts-b).
  Returns:
    dict of floats; classification tasks always include eval_accuracy.
  """
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  if task_name == "sts-b":
    return {"pearson": pearson_corrcoef(predictions, labels),
            "spearman": spearman_corrcoef(predictions, labels),
            "MSE": float(np.mean((predictions.astype(np.float64) - labels) ** 2))
                   if labels.size else 0.0}
  result = {"eval_accuracy": accuracy(labels, predictions)}
  if task_name == "cola":
    result["matthew_corr"] = matthews_corrcoef(labels, predictions)
  if task_name in ("mrpc", "qqp"):
    result["f1"] = f1_score(labels, predictions)
    result["accuracy_and_f1"] = (result["eval_accuracy"] + result["f1"]) / 2
  return result
