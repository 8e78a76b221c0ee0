"""The pretraining TFRecord reader: globs, feature checks, int32 casts, per-worker sharding."""

import pytest
import tensorflow as tf

from albert_tf.data.pretraining import dataset as pretraining_dataset
from albert_tf.errors import AlbertError


# ------------------------------------------------------------------------------ bad input
def _write_record(path, **features):
  feats = {}
  for name, (kind, values) in features.items():
    if kind == "int":
      feats[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    else:
      feats[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
  with tf.io.TFRecordWriter(str(path)) as w:
    w.write(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
  return str(path)


def _good_features(seq=8, preds=2):
  return dict(input_ids=("int", [2] * seq), input_mask=("int", [1] * seq),
              segment_ids=("int", [0] * seq), token_boundary=("int", [1] * seq),
              masked_lm_positions=("int", [1] * preds), masked_lm_ids=("int", [5] * preds),
              masked_lm_weights=("float", [1.0] * preds), next_sentence_labels=("int", [0]))


def test_glob_matching_nothing_is_named(tmp_path):
  pattern = str(tmp_path / "nothing-*.tfrecord")
  with pytest.raises(AlbertError, match="no file matches") as e:
    pretraining_dataset.pretraining_dataset(pattern, 8, 2, 4, is_training=True)
  assert pattern in str(e.value) and "\n" not in str(e.value)


def test_missing_feature_and_wrong_length_are_named(tmp_path):
  features = _good_features()
  del features["masked_lm_weights"]
  path = _write_record(tmp_path / "missing.tfrecord", **features)
  with pytest.raises(AlbertError, match="'masked_lm_weights' is missing") as e:
    pretraining_dataset.pretraining_dataset(path, 8, 2, 4, is_training=True)
  assert path in str(e.value)

  path = _write_record(tmp_path / "long.tfrecord", **_good_features(seq=8))
  with pytest.raises(AlbertError, match=r"'input_ids' has length 8, expected 16 "
                     r"\(--max_seq_length\)"):
    pretraining_dataset.pretraining_dataset(path, 16, 2, 4, is_training=False)


def test_reader_casts_to_int32_and_shards_per_worker(tmp_path):
  paths = []
  for i in range(4):
    feats = _good_features()
    feats["input_ids"] = ("int", [i] * 8)
    paths.append(_write_record(tmp_path / f"shard-{i}.tfrecord", **feats))
  context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1)
  ds = pretraining_dataset.pretraining_dataset(str(tmp_path / "shard-*.tfrecord"), 8, 2, 1,
                                               is_training=False, input_context=context)
  batches = list(ds)
  assert [int(b["input_ids"][0, 0]) for b in batches] == [1, 3]
  assert batches[0]["input_ids"].dtype == tf.int32
  assert batches[0]["masked_lm_weights"].dtype == tf.float32
  assert batches[0]["next_sentence_labels"].shape == (1, 1)


def test_training_input_in_file_order_when_not_shuffled(tmp_path):
  """--shuffle_train_input=false: files in the order given, records in file order, repeated;
  the default shuffles."""
  paths = []
  for f in range(2):
    with tf.io.TFRecordWriter(str(tmp_path / f"part-{f}.tfrecord")) as w:
      for i in range(5):
        feats = _good_features()
        feats["input_ids"] = ("int", [10 * f + i] * 8)
        w.write(tf.train.Example(features=tf.train.Features(feature={
            n: (tf.train.Feature(int64_list=tf.train.Int64List(value=v)) if kind == "int"
                else tf.train.Feature(float_list=tf.train.FloatList(value=v)))
            for n, (kind, v) in feats.items()})).SerializeToString())
    paths.append(str(tmp_path / f"part-{f}.tfrecord"))

  def first_ids(shuffle, files):
    ds = pretraining_dataset.pretraining_dataset(files, 8, 2, 4, is_training=True,
                                                 shuffle=shuffle, seed=1)
    return [int(i) for b in ds.take(5) for i in b["input_ids"][:, 0]]

  in_order = [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]
  assert first_ids(False, paths) == in_order * 2
  assert first_ids(False, paths[::-1]) == (in_order[5:] + in_order[:5]) * 2
  assert first_ids(True, paths)[:10] != in_order  # (seeded: the same order every run)
