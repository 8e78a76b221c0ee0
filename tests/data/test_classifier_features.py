"""Classifier feature conversion (pairs and singles) and the feature TFRecord cache."""

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import classifier_features, glue
from albert_tf.common import fileio
from albert_tf.errors import AlbertError
from tests.helpers import remote as remote_helpers


# ---------------------------------------------------------------------------- features
class _WordTokenizer:
  """Whitespace tokenizer with a growing vocabulary: isolates packing from SentencePiece."""

  def __init__(self):
    self.vocab = {"<pad>": 0, "<unk>": 1, "[CLS]": 2, "[SEP]": 3}

  def tokenize(self, text):
    return text.split()

  def convert_tokens_to_ids(self, tokens):
    return [self.vocab.setdefault(t, len(self.vocab)) for t in tokens]


def test_convert_pair_and_single():
  tok = _WordTokenizer()
  pair = glue.InputExample("g", "a b c d e", "x y", "1")
  feature = classifier_features.convert_classifier_example(pair, ["0", "1"], 8, tok)
  ids = tok.vocab
  assert feature["input_ids"] == [2, ids["a"], ids["b"], ids["c"], 3, ids["x"], ids["y"], 3]
  assert feature["segment_ids"] == [0, 0, 0, 0, 0, 1, 1, 1]
  assert feature["input_mask"] == [1] * 8 and feature["label_ids"] == 1
  single = glue.InputExample("g", "a b", None, "0")
  feature = classifier_features.convert_classifier_example(single, ["0", "1"], 6, tok)
  assert feature["input_ids"] == [2, ids["a"], ids["b"], 3, 0, 0]
  assert feature["input_mask"] == [1, 1, 1, 1, 0, 0] and feature["segment_ids"] == [0] * 6
  score = glue.InputExample("g", "a", "b", 3.5)
  assert classifier_features.convert_classifier_example(score, [], 6, tok)["label_ids"] == 3.5


def test_tfrecord_roundtrip_and_cache(tmp_path):
  tok = _WordTokenizer()
  examples = [glue.InputExample(str(i), "a b c", "d e", 2.0 * i) for i in range(3)]
  path = str(tmp_path / "stsb_train.tf_record")
  calls = []

  def make():
    calls.append(1)
    return (classifier_features.convert_classifier_example(e, [], 8, tok) for e in examples)

  classifier_features.cached_features(path, {"max_seq_length": 8}, make)
  classifier_features.cached_features(path, {"max_seq_length": 8}, make)
  assert len(calls) == 1  # second call reused the cache
  classifier_features.cached_features(path, {"max_seq_length": 9}, make)
  assert len(calls) == 2  # other settings: rebuilt
  dataset = classifier_features.make_dataset(path, 8, "eval", batch_size=2, is_regression=True)
  batches = list(dataset)
  assert [b[0]["input_ids"].shape[0] for b in batches] == [2, 1]  # partial batch kept
  features, labels = batches[0]
  assert features["input_ids"].dtype == tf.int32
  np.testing.assert_allclose(labels["label_ids"].numpy(), [0.0, 2.0])
  with pytest.raises(AlbertError, match=r"records hold 8 input_ids, expected 16"):
    classifier_features.check_record_length(path, 16)
  assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]


def test_classifier_feature_cache_on_ram_is_written_once_and_reused(tmp_path):
  examples = [glue.InputExample(str(i), "a b c", "d e", ["0", "1"][i % 2]) for i in range(3)]
  calls = []

  def make():
    calls.append(1)
    tok = _WordTokenizer()
    return (classifier_features.convert_classifier_example(e, ["0", "1"], 8, tok)
            for e in examples)

  bucket = remote_helpers.ram_bucket()
  remote = f"{bucket}/cache/train.tf_record"
  local = str(tmp_path / "train.tf_record")
  for path in (remote, local):
    classifier_features.cached_features(path, {"max_seq_length": 8}, make)
  classifier_features.cached_features(remote, {"max_seq_length": 8}, make)
  assert len(calls) == 2  # one build each; the second call on ram:// reused its cache
  assert fileio.read_bytes(remote) == fileio.read_bytes(local)
  assert not [name for name in fileio.listdir(f"{bucket}/cache") if ".tmp" in name]
  classifier_features.cached_features(remote, {"max_seq_length": 9}, make)
  assert len(calls) == 3  # other settings: rebuilt
  batches = list(classifier_features.make_dataset(remote, 8, "eval", batch_size=2))
  assert [b[0]["input_ids"].shape[0] for b in batches] == [2, 1]
  np.testing.assert_array_equal(batches[0][1]["label_ids"].numpy(), [0, 1])
