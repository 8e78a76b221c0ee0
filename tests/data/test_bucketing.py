"""Length bucketing: the boundaries, the batches it makes (shapes, every example once, order
restored) and that a model's outputs through it equal those of padding to the maximum."""

import os
import subprocess
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import bucketing, classifier_features, squad
from albert_tf.errors import AlbertError
from albert_tf.models import AlbertClassifier, AlbertSquadModel
from albert_tf.tasks.finetuning_data import in_example_order
from tests.helpers.model_inputs import randomize_weights
from tests.helpers.paths import REPO
from tests.helpers.tiny_config import tiny_albert_config

SEQ = 64


def test_auto_boundaries_and_explicit_lists():
  assert bucketing.default_bucket_boundaries(128) == (32, 64, 96, 128)
  assert bucketing.default_bucket_boundaries(512) == (32, 64, 96, 128, 192, 256, 384, 512)
  assert bucketing.default_bucket_boundaries(24) == (24,)
  assert bucketing.parse_bucket_boundaries("auto", 384) == (32, 64, 96, 128, 192, 256, 384)
  assert bucketing.parse_bucket_boundaries("16,48", 64) == (16, 48, 64)
  assert bucketing.parse_bucket_boundaries("16, 64", 64) == (16, 64)
  for off in ("none", "off", "NONE"):
    assert bucketing.parse_bucket_boundaries(off, 64) is None
  # TPU programs need one static input shape: auto is off there.
  assert bucketing.parse_bucket_boundaries("auto", 128, on_tpu=True) is None


@pytest.mark.parametrize("value, on_tpu, message", [
    ("64,x", False, "--bucket_boundaries=64,x is invalid: expected auto, none or"),
    ("64,32", False, "--bucket_boundaries=64,32 is invalid: expected increasing positive"),
    ("0,32", False, "expected increasing positive lengths"),
    ("32,256", False, "--bucket_boundaries=32,256 is invalid: 256 exceeds --max_seq_length=128"),
    ("32,64", True, "--bucket_boundaries=32,64 is not supported on TPU"),
])
def test_bad_boundaries_are_one_line_errors(value, on_tpu, message):
  with pytest.raises(AlbertError, match=None) as raised:
    bucketing.parse_bucket_boundaries(value, 128, on_tpu=on_tpu)
  assert message in str(raised.value) and "\n" not in str(raised.value)


def _write_features(path, lengths, num_choices=None, seed=0):
  """Classifier (or RACE-shaped) feature records with the given real lengths (per example; for
  choices, choice c is `length - 2 * c` long). Returns the padded input_ids [n, (choices,) SEQ]."""
  rng = np.random.default_rng(seed)
  rows, all_ids = [], []
  for i, length in enumerate(lengths):
    choice_lengths = ([length - 2 * c for c in range(num_choices)] if num_choices
                      else [length])
    ids, mask, segments = [], [], []
    for n in choice_lengths:
      ids += [2] + rng.integers(5, 1000, size=n - 2).tolist() + [3] + [0] * (SEQ - n)
      mask += [1] * n + [0] * (SEQ - n)
      segments += [0] * (n // 2) + [1] * (n - n // 2) + [0] * (SEQ - n)
    rows.append({"input_ids": ids, "input_mask": mask, "segment_ids": segments,
                 "label_ids": i % 2, "is_real_example": 1})
    all_ids.append(np.reshape(ids, [num_choices, SEQ] if num_choices else [SEQ]))
  classifier_features.write_tfrecord(rows, path)
  return np.stack(all_ids)


LENGTHS = [60, 9, 33, 12, 17, 64, 5, 40, 8, 31, 16, 50, 7]


def test_eval_batches_are_sorted_trimmed_and_cover_every_example_once(tmp_path):
  path = str(tmp_path / "eval.tf_record")
  ids = _write_features(path, LENGTHS)
  boundaries = (16, 32, SEQ)
  dataset = classifier_features.make_dataset(path, SEQ, "eval", 4, num_labels=2,
                                             bucket_boundaries=boundaries)
  seen, widths = [], []
  for features, labels in dataset:
    width = features["input_ids"].shape[-1]
    widths.append(width)
    index = features["example_index"].numpy()
    lengths = features["input_mask"].numpy().sum(-1)
    # The smallest boundary that holds the batch's longest example, nothing real cut off.
    assert width == min(b for b in boundaries if b >= lengths.max())
    np.testing.assert_array_equal(features["input_ids"].numpy(), ids[index, :width])
    assert not ids[index, width:].any()
    np.testing.assert_array_equal(labels["label_ids"].numpy(), index % 2)
    seen.extend(index.tolist())
  assert sorted(seen) == list(range(len(LENGTHS)))
  assert [LENGTHS[i] for i in seen] == sorted(LENGTHS)  # sorted by length
  assert widths == [16, 32, SEQ, SEQ]  # lengths 5-9, 12-31, 33-60, 64
  # Without buckets: batches of the full length, in file order, no example_index.
  plain = next(iter(classifier_features.make_dataset(path, SEQ, "eval", 4, num_labels=2)))
  assert plain[0]["input_ids"].shape == (4, SEQ) and "example_index" not in plain[0]


def test_outputs_put_back_in_example_order():
  state = {"example_index": [np.array([3, 0]), np.array([2, 1])],
           "predictions": [np.array([30, 0]), np.array([20, 10])],
           "weights": [np.array([1.0, 1.0]), np.array([0.0, 1.0])]}
  ordered = in_example_order(state)
  np.testing.assert_array_equal(ordered["predictions"][0], [0, 10, 20, 30])
  np.testing.assert_array_equal(ordered["weights"][0], [1.0, 1.0, 0.0, 1.0])
  assert "example_index" not in ordered
  unsorted = {"predictions": [np.array([1])]}
  assert in_example_order(unsorted) is unsorted


def test_training_windows_regroup_the_same_examples_by_length():
  lengths = np.array([5 + (7 * i) % 59 for i in range(32)], np.int32)
  mask = (np.arange(SEQ)[None, :] < lengths[:, None]).astype(np.int32)
  labels = np.arange(32, dtype=np.int32)  # which example each row is
  batches = tf.data.Dataset.from_tensor_slices(({"input_mask": mask}, labels)).batch(4)
  grouped = list(bucketing.group_by_length(batches, 4, seed=1, window_batches=4))
  assert len(grouped) == 8 and all(len(l) == 4 for _, l in grouped)
  # Every example exactly once, its features with it.
  rows = np.concatenate([l.numpy() for _, l in grouped])
  assert sorted(rows.tolist()) == labels.tolist()
  for features, l in grouped:
    np.testing.assert_array_equal(features["input_mask"].numpy(), mask[l.numpy()])
  # Each window of 16 examples (4 batches) was sorted: a batch holds a run of 4 of its window's
  # sorted lengths, never lengths of another window.
  for features, l in grouped:
    window = l.numpy() // 16
    assert len(set(window.tolist())) == 1
    in_window = np.sort(lengths[window[0] * 16:(window[0] + 1) * 16])
    got = np.sort(features["input_mask"].numpy().sum(-1))
    assert any((in_window[k:k + 4] == got).all() for k in range(0, 16, 4))


def test_training_batches_are_full_and_mostly_narrow(tmp_path):
  path = str(tmp_path / "train.tf_record")
  _write_features(path, [5 + (7 * i) % 59 for i in range(32)])
  boundaries = (16, 32, 48, SEQ)
  dataset = classifier_features.make_dataset(path, SEQ, "train", 4, num_labels=2, seed=3,
                                             bucket_boundaries=boundaries)
  widths = []
  for features, labels in dataset.take(32):
    assert features["input_ids"].shape[0] == 4 and labels["label_ids"].shape == (4,)
    width = features["input_ids"].shape[-1]
    longest = features["input_mask"].numpy().sum(-1).max()
    assert width == min(b for b in boundaries if b >= longest)
    widths.append(width)
  # Lengths 5-63 spread evenly: padded to the batch maximum, most batches would need SEQ; sorted
  # into batches, about a quarter do.
  assert widths.count(SEQ) <= 12 and widths.count(16) >= 4


def test_multiple_choice_bucket_holds_the_longest_choice(tmp_path):
  path = str(tmp_path / "race.tf_record")
  ids = _write_features(path, [10, 30, 20], num_choices=4)
  dataset = classifier_features.make_dataset(path, SEQ, "eval", 2, num_choices=4, num_labels=4,
                                             bucket_boundaries=(8, 16, 32, SEQ))
  for features, _ in dataset:
    index = features["example_index"].numpy()
    width = features["input_ids"].shape[-1]
    assert width == (16 if index.tolist() == [0] else 32) or len(index) == 2
    np.testing.assert_array_equal(features["input_ids"].numpy(), ids[index, :, :width])


def test_classifier_outputs_equal_padding_to_the_maximum(tmp_path):
  path = str(tmp_path / "eval.tf_record")
  _write_features(path, LENGTHS)
  model = randomize_weights(AlbertClassifier(tiny_albert_config(), num_classes=3,
                                             dropout_rate=0.0))

  def probabilities(buckets):
    rows, order = [], []
    for features, _ in classifier_features.make_dataset(path, SEQ, "eval", 4, num_labels=2,
                                                        bucket_boundaries=buckets):
      rows.append(model(features, training=False)["probabilities"].numpy())
      order.append(features.get("example_index", tf.zeros([0], tf.int32)).numpy())
    rows = np.concatenate(rows)
    return rows[np.argsort(np.concatenate(order))] if buckets else rows

  padded, bucketed = probabilities(None), probabilities((16, 32, SEQ))
  assert padded.shape == (len(LENGTHS), 3)
  np.testing.assert_allclose(bucketed, padded, atol=1e-5)
  assert np.abs(padded - padded.mean(0)).max() > 1e-3  # the rows differ: order matters


def test_squad_prediction_batches_trimmed_and_logits_equal(tmp_path):
  path = str(tmp_path / "squad.tf_record")
  rng = np.random.default_rng(0)
  rows = []
  for uid, n in enumerate([40, 12, 64, 20, 9], start=1000000000):
    rows.append(types.SimpleNamespace(
        unique_id=uid,
        input_ids=[2] + rng.integers(5, 1000, n - 2).tolist() + [3] + [0] * (SEQ - n),
        input_mask=[1] * n + [0] * (SEQ - n),
        segment_ids=[0] * 6 + [1] * (n - 6) + [0] * (SEQ - n),
        p_mask=[1] * 6 + [0] * (n - 7) + [1] * (SEQ - n + 1)))
  squad.write_features(rows, path, is_training=False)
  model = randomize_weights(AlbertSquadModel(tiny_albert_config()))

  def logits(buckets):
    out = {}
    for features in squad.feature_dataset(path, SEQ, False, 2, False,
                                          bucket_boundaries=buckets):
      width = features["input_ids"].shape[-1]
      assert features["p_mask"].shape[-1] == width
      start = model(features, training=False)["start_logits"].numpy()
      for uid, row, n in zip(features["unique_ids"].numpy(), start,
                             features["input_mask"].numpy().sum(-1)):
        out[int(uid)] = row[:n]  # the real positions
    return out

  padded, bucketed = logits(None), logits((16, 32, SEQ))
  assert set(padded) == set(bucketed) and len(padded) == 5
  for uid, row in padded.items():
    np.testing.assert_allclose(bucketed[uid], row, atol=1e-5)


def test_run_classifier_rejects_a_bad_bucket_flag_on_one_line(tmp_path):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO)
  done = subprocess.run(
      [sys.executable, os.path.join(REPO, "run_classifier.py"), "--task_name=MRPC",
       f"--data_dir={tmp_path}", f"--output_dir={tmp_path / 'out'}", "--do_eval",
       "--albert_config_file=" + os.path.join(REPO, "configs", "albert_tiny.json"),
       "--max_seq_length=64", "--bucket_boundaries=32,128"],
      capture_output=True, text=True, env=env, timeout=300, check=False)
  assert done.returncode == 2, done.stderr[-2000:]
  assert "Traceback" not in done.stderr
  assert done.stderr.strip().splitlines()[-1] == (
      "error: --bucket_boundaries=32,128 is invalid: 128 exceeds --max_seq_length=64")
