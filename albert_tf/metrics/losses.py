"""Per-example losses on whole evaluation sets (NumPy, float64)."""

import numpy as np


def softmax_cross_entropy(logits, label_ids):
  """Cross-entropy of integer labels under softmax(logits).

  Args:
    logits: [num_examples, num_classes].
    label_ids: int [num_examples].
  Returns:
    float64 [num_examples].
  """
  logits = np.asarray(logits, np.float64)
  label_ids = np.asarray(label_ids).astype(np.int64)
  shifted = logits - logits.max(axis=-1, keepdims=True)
  log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
  return -log_probs[np.arange(len(label_ids)), label_ids]
