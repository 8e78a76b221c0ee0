"""--masked_lm_budget's online masking: fresh masks each read, labels are the original ids,
deterministic per seed."""

import numpy as np
import pytest

from tests.helpers import training as training_helpers
from tests.helpers.tiny_config import write_tiny_config


# ------------------------------------------------------------------------------ pretraining
@pytest.fixture(scope="module")
def pretraining_data(tmp_path_factory):
  root = tmp_path_factory.mktemp("pretraining")
  return dict(data=training_helpers.make_pretraining_data(root / "data"),
              config=write_tiny_config(root / "albert_config.json"))


def test_online_masks_are_fresh_and_consistent(pretraining_data):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.data.pretraining import dataset as pretraining_dataset  # pylint: disable=g-import-not-at-top
  from albert_tf.data.pretraining import online_masking  # pylint: disable=g-import-not-at-top
  records = pretraining_dataset.pretraining_dataset(
      pretraining_data["data"], training_helpers.TINY_SEQ, training_helpers.TINY_PREDS, 8,
      is_training=False)
  budget = 0.25
  offline = next(iter(records))
  online = next(iter(online_masking.apply_online_masking(
      records, budget, training_helpers.TINY_PREDS, 1000, seed=4)))
  offline = {k: v.numpy() for k, v in offline.items()}
  online = {k: v.numpy() for k, v in online.items()}
  changed = 0
  for row in range(8):
    original = offline["input_ids"][row].copy()
    real = offline["masked_lm_weights"][row] > 0
    original[offline["masked_lm_positions"][row][real]] = offline["masked_lm_ids"][row][real]
    weights = online["masked_lm_weights"][row] > 0
    positions = online["masked_lm_positions"][row][weights]
    length = int(offline["input_mask"][row].sum())
    assert 0 < weights.sum() <= training_helpers.TINY_PREDS
    # Labels are the original ids; only masked positions differ from the original text.
    np.testing.assert_array_equal(online["masked_lm_ids"][row][weights], original[positions])
    differs = np.nonzero(online["input_ids"][row] != original)[0]
    assert set(differs) <= set(positions)
    assert all(p < length and original[p] not in (2, 3) for p in positions)
    # Mostly [MASK] (id 4).
    changed += int((online["input_ids"][row][positions] == 4).sum())
    np.testing.assert_array_equal(online["segment_ids"][row], offline["segment_ids"][row])
  assert changed >= 0.5 * online["masked_lm_weights"].sum()
  assert not np.array_equal(online["masked_lm_positions"], offline["masked_lm_positions"])
  # Same seed, same masks.
  again = next(iter(online_masking.apply_online_masking(
      records, budget, training_helpers.TINY_PREDS, 1000, seed=4)))
  np.testing.assert_array_equal(again["input_ids"].numpy(), online["input_ids"])
  del tf
