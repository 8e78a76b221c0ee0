"""Evaluation metrics computed on whole evaluation sets (NumPy)."""

from albert_tf.metrics.glue_metrics import (accuracy, f1_score, matthews_corrcoef,
                                            pearson_corrcoef, spearman_corrcoef,
                                            task_metrics)
