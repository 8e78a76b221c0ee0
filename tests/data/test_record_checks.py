"""Input records are checked, not trusted: framing at the start of a run, every record in the
pipeline, the diagnosis after a failure, and cached feature files that must be what was written.
(The scripts' side is in tests/integration/test_bad_input_records.py.)"""

import logging
import struct

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import classifier_features, record_checks
from albert_tf.data.pretraining import dataset as pretraining_dataset
from albert_tf.errors import AlbertError
from tests.helpers import training as helpers

SEQ, PREDS, VOCAB = helpers.TINY_SEQ, helpers.TINY_PREDS, 1000


def _good_file(path, num_records=12, seed=0):
  return helpers.write_synthetic_pretraining_data(str(path), num_records, seed=seed,
                                                  vocab_size=VOCAB)


def _record_ends(path):
  data = open(path, "rb").read()
  ends, offset = [], 0
  while offset < len(data):
    offset += 16 + struct.unpack("<Q", data[offset:offset + 8])[0]
    ends.append(offset)
  return ends


def _truncate(path, size):
  data = open(path, "rb").read()
  open(path, "wb").write(data[:size])


def _edit_record(source, target, index, **features):
  """Copies a record file with features of record `index` replaced (None: removed)."""
  records = [r.numpy() for r in tf.data.TFRecordDataset(source)]
  example = tf.train.Example.FromString(records[index])
  for name, feature in features.items():
    if feature is None:
      del example.features.feature[name]
    else:
      example.features.feature[name].CopyFrom(feature)
  records[index] = example.SerializeToString()
  with tf.io.TFRecordWriter(str(target)) as writer:
    for record in records:
      writer.write(record)
  return str(target)


def _ints(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def _floats(values):
  return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def _read_error(dataset):
  """The exception iterating `dataset` raises (the test fails if there is none)."""
  with pytest.raises((tf.errors.OpError, UnicodeDecodeError)) as e:
    for _ in dataset.take(50):
      pass
  return e.value


# ----------------------------------------------------------------------------- framing
def test_masked_crc32c_is_the_tfrecord_checksum(tmp_path):
  path = str(tmp_path / "one.tfrecord")
  with tf.io.TFRecordWriter(path) as writer:
    writer.write(b"some record data")
  data = open(path, "rb").read()
  length, length_crc = struct.unpack("<QI", data[:12])
  assert record_checks.masked_crc32c(data[:8]) == length_crc
  assert record_checks.masked_crc32c(data[12:12 + length]) == struct.unpack(
      "<I", data[12 + length:])[0]


def test_framing_names_cut_and_foreign_files(tmp_path):
  path = _good_file(tmp_path / "data.tfrecord")
  ends = _record_ends(path)
  assert record_checks.framing_problem(path) is None
  _truncate(path, ends[6])  # at a record boundary: whole records (the count tells the rest)
  assert record_checks.framing_problem(path) is None
  _truncate(path, ends[5] + 100)
  assert record_checks.framing_problem(path) == (
      f"{path}: record 6: cut short at byte {ends[5] + 100} (the record ends at byte "
      f"{ends[6]}): the file is truncated")
  _truncate(path, ends[2] + 5)
  assert record_checks.framing_problem(path).startswith(
      f"{path}: record 3: cut short in its header")
  text = tmp_path / "notes.txt"
  text.write_text("not records\n" * 50)
  assert record_checks.framing_problem(str(text)) == (
      f"{text}: not a TFRecord file (its first record header has a wrong checksum)")
  with pytest.raises(AlbertError, match="missing.tfrecord: no such file"):
    record_checks.framing_problem(str(tmp_path / "missing.tfrecord"))


def test_last_record_beyond_the_tail_window_is_found_by_walking(tmp_path, monkeypatch):
  monkeypatch.setattr(record_checks, "_TAIL_WINDOWS", (64,))  # smaller than one record
  path = _good_file(tmp_path / "data.tfrecord")
  assert record_checks.framing_problem(path) is None
  ends = _record_ends(path)
  _truncate(path, ends[-1] - 1)
  assert f"record {len(ends) - 1}: cut short" in record_checks.framing_problem(path)


def test_empty_files(tmp_path, caplog):
  good = _good_file(tmp_path / "good.tfrecord")
  empty = [tmp_path / "empty-0.tfrecord", tmp_path / "empty-1.tfrecord"]
  for path in empty:
    path.write_bytes(b"")
  with pytest.raises(AlbertError) as e:
    record_checks.check_record_files([str(empty[0])])
  assert str(e.value) == f"{empty[0]}: the file is empty (0 bytes), expected TFRecords"
  with pytest.raises(AlbertError, match=r"^all 2 input files are empty \(0 bytes\)"):
    record_checks.check_record_files([str(p) for p in empty])
  with caplog.at_level(logging.WARNING):
    assert record_checks.check_record_files([good, str(empty[1])]) == [good]
  warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
  assert warnings == [f"{empty[1]}: the file is empty (0 bytes); it adds no records"]


# ----------------------------------------------------------------------------- every record
def _eval_dataset(path, **kwargs):
  return pretraining_dataset.pretraining_dataset(path, SEQ, PREDS, 4, is_training=False,
                                                 vocab_size=VOCAB, type_vocab_size=2, **kwargs)


@pytest.mark.parametrize("index, features, line", [
    (5, dict(input_ids=_ints([7] * 16)), "input_ids has 16 values, expected 32 "
     "(--max_seq_length)"),
    (6, dict(token_boundary=None), "token_boundary is missing, expected 32 (--max_seq_length)"),
    (7, dict(input_ids=_ints([7] * 31 + [VOCAB])), "input_ids holds 1000, expected values in "
     "[0, 1000) (vocab_size 1000 of the model config)"),
    (8, dict(segment_ids=_ints([0] * 31 + [2])), "segment_ids holds 2, expected values in [0, 2) "
     "(type_vocab_size 2 of the model config)"),
    (9, dict(masked_lm_positions=_ints([1, 2, 3, 4, SEQ])), "masked_lm_positions holds 32, "
     "expected values in [0, 32) (--max_seq_length=32)"),
    (10, dict(masked_lm_ids=_ints([5, 6, 7, 8, -3])), "masked_lm_ids holds -3, expected values "
     "in [0, 1000) (vocab_size 1000 of the model config)"),
    (11, dict(masked_lm_weights=_floats([1, 1, 1, 1, float("nan")])), "masked_lm_weights holds "
     "nan or inf, expected a finite number"),
    (3, dict(next_sentence_labels=_ints([2])), "next_sentence_labels holds 2, expected values in "
     "[0, 2) (sentence order: 0 or 1)"),
], ids=["length", "missing", "vocab", "segment", "position", "negative_id", "nan", "label"])
def test_bad_record_is_named_with_file_and_index(tmp_path, index, features, line):
  path = _edit_record(_good_file(tmp_path / "good.tfrecord"), tmp_path / "bad's.tfrecord",
                      index, **features)
  error = _read_error(_eval_dataset(path))
  assert isinstance(error, tf.errors.InvalidArgumentError)
  explained = record_checks.explain_input_error(error, [path])
  assert str(explained) == f"{path}: record {index}: {line}"


def test_training_stream_names_the_record_in_its_own_file(tmp_path):
  good = _good_file(tmp_path / "a.tfrecord")
  bad = _edit_record(_good_file(tmp_path / "b.tfrecord", seed=1), tmp_path / "b-bad.tfrecord",
                     9, input_ids=_ints([7] * 31 + [VOCAB + 1]))
  dataset = pretraining_dataset.pretraining_dataset(
      [good, bad], SEQ, PREDS, 4, is_training=True, seed=3, vocab_size=VOCAB,
      type_vocab_size=2)
  explained = record_checks.explain_input_error(_read_error(dataset), [good, bad])
  assert str(explained).startswith(f"{bad}: record 9: input_ids holds 1001")


def test_checks_leave_the_data_and_its_order_unchanged(tmp_path):
  files = [_good_file(tmp_path / f"{i}.tfrecord", seed=i) for i in range(2)]
  for is_training in (False, True):
    read = [list(pretraining_dataset.pretraining_dataset(
        files, SEQ, PREDS, 4, is_training=is_training, seed=5, vocab_size=VOCAB,
        type_vocab_size=2, check_records=checked).take(5)) for checked in (True, False)]
    for checked, unchecked in zip(*read):
      assert checked.keys() == unchecked.keys()
      for name in checked:
        assert checked[name].dtype == unchecked[name].dtype
        np.testing.assert_array_equal(checked[name].numpy(), unchecked[name].numpy())


# ----------------------------------------------------------------------------- after a failure
def test_corrupt_and_unparsable_records_are_found_by_scanning(tmp_path):
  good = _good_file(tmp_path / "good.tfrecord")
  corrupt = str(tmp_path / "corrupt.tfrecord")
  data = bytearray(open(good, "rb").read())
  ends = _record_ends(good)
  data[ends[6] + 40] ^= 0xFF  # inside record 7's data: its checksum no longer matches
  open(corrupt, "wb").write(bytes(data))
  assert record_checks.framing_problem(corrupt) is None  # the framing is intact
  error = _read_error(_eval_dataset(corrupt, check_format=False))
  assert isinstance(error, tf.errors.DataLossError)
  assert str(record_checks.explain_input_error(error, [good, corrupt])) == (
      f"{corrupt}: record 7: its checksum does not match its bytes: the file is corrupted")

  floats = _edit_record(good, tmp_path / "floats.tfrecord", 4, segment_ids=_floats([0.0] * 32))
  error = _read_error(_eval_dataset(floats, check_format=False))
  assert str(record_checks.explain_input_error(error, [good, floats])) == (
      f"{floats}: record 4: segment_ids is a float_list, expected int64_list (as in the file's "
      "first record)")

  # Not the input's fault: the files are fine, so there is nothing to explain.
  unrelated = tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")
  assert record_checks.explain_input_error(unrelated, [good, corrupt]) is None
  assert record_checks.explain_input_error(unrelated, []) is None


def test_a_file_cut_during_the_run_is_named(tmp_path):
  path = _good_file(tmp_path / "data.tfrecord")
  dataset = _eval_dataset(path)  # checked whole when the pipeline was built
  _truncate(path, _record_ends(path)[3] + 20)
  error = _read_error(dataset)
  assert str(record_checks.explain_input_error(error, [path])).startswith(
      f"{path}: record 4: cut short")


# ----------------------------------------------------------------------------- cached files
class _Builds:
  """make_features for cached_features: 5 GLUE-like feature dicts; counts its calls."""

  def __init__(self, num=5):
    self.num, self.calls = num, 0

  def __call__(self):
    self.calls += 1
    return ({"input_ids": [2, 5 + i, 3, 0], "input_mask": [1, 1, 1, 0],
             "segment_ids": [0, 0, 0, 0], "label_ids": i % 2, "is_real_example": 1}
            for i in range(self.num))


def test_cache_cut_or_changed_after_writing_is_rebuilt(tmp_path, caplog):
  path = str(tmp_path / "task_eval.tf_record")
  build = _Builds()
  classifier_features.cached_features(path, {"seq": 4}, build)
  classifier_features.cached_features(path, {"seq": 4}, build)
  assert build.calls == 1  # whole: reused
  _truncate(path, _record_ends(path)[1])  # 2 of 5 records, at a record boundary
  with caplog.at_level(logging.WARNING):
    classifier_features.cached_features(path, {"seq": 4}, build)
  assert build.calls == 2 and len(_record_ends(path)) == 5
  assert f"{path}: {_record_ends(path)[1]} bytes, but " in caplog.text
  assert "rebuilding it" in caplog.text


def test_cache_without_sidecar_is_checked_against_its_source(tmp_path):
  path = str(tmp_path / "task_eval.tf_record")
  classifier_features.write_tfrecord(_Builds()(), path)  # as the official code leaves it
  build = _Builds()
  classifier_features.cached_features(path, {"seq": 4}, build, count_examples=lambda: 5)
  assert build.calls == 0  # whole, and as many real examples as the source: trusted
  assert not (tmp_path / "task_eval.tf_record.meta.json").exists()
  _truncate(path, _record_ends(path)[2])  # 3 of 5 records, at a record boundary
  classifier_features.cached_features(path, {"seq": 4}, build, count_examples=lambda: 5)
  assert build.calls == 1 and len(_record_ends(path)) == 5

  def no_source():
    raise AlbertError("dev.tsv: file not found")

  _truncate(path, _record_ends(path)[2] + 9)  # mid-record, and the source is gone
  (tmp_path / "task_eval.tf_record.meta.json").unlink()
  with pytest.raises(AlbertError) as e:
    classifier_features.cached_features(path, {"seq": 4}, no_source, count_examples=no_source)
  assert str(e.value).startswith(f"{path}: record 3: cut short")
  assert str(e.value).endswith("and it cannot be rebuilt: dev.tsv: file not found")


def test_classifier_records_are_checked(tmp_path):
  path = str(tmp_path / "task_eval.tf_record")
  features = list(_Builds()())
  features[3]["label_ids"] = 2
  features[1]["segment_ids"] = [0, 0, 0, 1]
  classifier_features.write_tfrecord(features, path)

  def first_error(**bounds):
    dataset = classifier_features.make_dataset(path, 4, "eval", 2, **bounds)
    return str(record_checks.explain_input_error(_read_error(dataset), [path]))

  assert first_error(vocab_size=100, type_vocab_size=1, num_labels=2) == (
      f"{path}: record 1: segment_ids holds 1, expected values in [0, 1) (type_vocab_size 1 of "
      "the model config)")
  assert first_error(vocab_size=100, type_vocab_size=2, num_labels=2) == (
      f"{path}: record 3: label_ids holds 2, expected values in [0, 2) (the task's 2 labels)")
  assert first_error(vocab_size=8, type_vocab_size=2, num_labels=3) == (
      f"{path}: record 3: input_ids holds 8, expected values in [0, 8) (vocab_size 8 of the model "
      "config)")


def test_cached_file_problems(tmp_path):
  path = str(tmp_path / "features.tf_record")
  classifier_features.write_tfrecord(_Builds()(), path)
  identity = record_checks.file_identity(path)
  assert record_checks.cached_file_problem(path, identity) is None
  assert record_checks.cached_file_problem(path, None, expected_count=5) is None
  assert record_checks.cached_file_problem(path, None, expected_count=lambda: 6,
                                           counted="features") == (
                                               f"{path}: holds 5 features, expected 6")
  with open(path, "ab") as f:
    f.write(b"\0")
  assert record_checks.cached_file_problem(path, identity) == (
      f"{path}: {identity['size'] + 1} bytes, but {identity['size']} were recorded when it was "
      "written (cut or changed since)")
  assert record_checks.cached_file_problem(path).startswith(f"{path}: record 5: cut short")
