"""GLUE metrics on whole evaluation sets, in NumPy.

Matthews correlation (CoLA), accuracy and F1 (MRPC, QQP), Pearson and Spearman (STS-B), accuracy
(everything else); for tasks on your own data, the same chosen by the label type
(`classification_metrics`, `regression_metrics`). Keys follow the official run_classifier's eval
results (`eval_accuracy`, `matthew_corr`, `pearson`), so eval_results.txt reads the same.
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
  """Matthews correlation of class indices, binary or multi-class (Gorodkin's R_K, which is the
  binary coefficient for two classes); 0 when a marginal is degenerate (as the official
  div_no_nan)."""
  labels = np.asarray(labels, dtype=np.int64).ravel()
  predictions = np.asarray(predictions, dtype=np.int64).ravel()
  if labels.size == 0:
    return 0.0
  num_classes = int(max(labels.max(), predictions.max())) + 1
  true_counts = np.bincount(labels, minlength=num_classes).astype(np.float64)
  predicted_counts = np.bincount(predictions, minlength=num_classes).astype(np.float64)
  correct = float(np.sum(labels == predictions))
  total = float(labels.size)
  covariance = correct * total - np.dot(true_counts, predicted_counts)
  denominator = np.sqrt((total ** 2 - np.dot(predicted_counts, predicted_counts))
                        * (total ** 2 - np.dot(true_counts, true_counts)))
  return float(covariance / denominator) if denominator else 0.0


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


def classification_metrics(labels, predictions, num_labels):
  """Accuracy and Matthews correlation of class indices [N], and for two labels the F1 of the
  second (index 1)."""
  result = {"eval_accuracy": accuracy(labels, predictions),
            "matthew_corr": matthews_corrcoef(labels, predictions)}
  if num_labels == 2:
    result["f1"] = f1_score(labels, predictions)
  return result


def regression_metrics(labels, predictions):
  """Pearson, Spearman and mean squared error of scores [N]."""
  labels = np.asarray(labels, dtype=np.float64)
  predictions = np.asarray(predictions, dtype=np.float64)
  return {"pearson": pearson_corrcoef(predictions, labels),
          "spearman": spearman_corrcoef(predictions, labels),
          "MSE": float(np.mean((predictions - labels) ** 2)) if labels.size else 0.0}


def task_metrics(task_name, labels, predictions):
  """The metrics the GLUE leaderboard reports for `task_name` (official task names).

  Args:
    labels: gold class indices [N] (or scores for sts-b).
    predictions: predicted class indices [N] (or scores for sts-b).
  Returns:
    dict of floats; classification tasks always include eval_accuracy.
  """
  if task_name == "sts-b":
    return regression_metrics(labels, predictions)
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  result = {"eval_accuracy": accuracy(labels, predictions)}
  if task_name == "cola":
    result["matthew_corr"] = matthews_corrcoef(labels, predictions)
  if task_name in ("mrpc", "qqp"):
    result["f1"] = f1_score(labels, predictions)
    result["accuracy_and_f1"] = (result["eval_accuracy"] + result["f1"]) / 2
  return result
