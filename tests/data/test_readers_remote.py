"""Task data on a tf.io.gfile URL (ram://, TensorFlow's in-memory filesystem, standing in for
gs://): the GLUE, custom-table and RACE readers give the local copy's examples, classifier
feature caches are written and reused there, the record checks read there, and a missing data
dir is the same one-line error as locally."""

import dataclasses
import os
import uuid

import numpy as np
import pytest

from albert_tf.common import fileio
from albert_tf.data import classifier_features, custom_task, glue, race, record_checks
from albert_tf.data.custom_task import Columns
from albert_tf.errors import AlbertError
from tests.helpers import finetune
from tests.helpers import training as training_helpers


def _bucket():
  return f"ram://{uuid.uuid4().hex}"


def _on_ram(local_dir):
  remote = f"{_bucket()}/{os.path.basename(os.fspath(local_dir))}"
  fileio.copytree(local_dir, remote)
  return remote


def _rows(examples):
  return [dataclasses.astuple(e) if dataclasses.is_dataclass(e) else vars(e) for e in examples]


def _one_line(fn, *args, **kwargs):
  with pytest.raises(AlbertError) as info:
    fn(*args, **kwargs)
  message = str(info.value)
  assert "\n" not in message, message
  return message


def test_glue_examples_on_ram_are_the_local_ones(tmp_path):
  local = tmp_path / "glue"
  finetune.write_mrpc(str(local), n_train=4, n_dev=2, n_test=3)
  finetune.write_cola(str(local), n_train=3)
  remote = _on_ram(local)
  for task, split in (("MRPC", "train"), ("MRPC", "test"), ("CoLA", "train")):
    expected = glue.read_examples(str(local), task, split)
    assert _rows(glue.read_examples(remote, task, split)) == _rows(expected) and expected
  # BERT's --data_dir=glue/MRPC too
  assert _rows(glue.read_examples(f"{remote}/MRPC", "MRPC", "dev")) == _rows(
      glue.read_examples(str(local / "MRPC"), "MRPC", "dev"))


def test_missing_task_data_on_ram_is_the_local_one_line(tmp_path):
  bucket = _bucket()
  fileio.makedirs(f"{bucket}/glue")
  (tmp_path / "glue").mkdir()
  messages = [_one_line(glue.read_examples, f"{root}/glue", "RTE", "train").replace(root, "<root>")
              for root in (bucket, str(tmp_path))]
  assert messages[0] == messages[1] == (
      "<root>/glue/RTE/train.tsv: file not found (expected the standard GLUE layout "
      "<data_dir>/<Task>/<split>.tsv)"), messages
  messages = [_one_line(race.read_examples, f"{root}/glue", "dev").replace(root, "<root>")
              for root in (bucket, str(tmp_path))]
  assert messages[0] == messages[1] and "RACE/dev/middle: directory not found" in messages[0]
  for root in (bucket, str(tmp_path)):  # a wrong file: a TFRecord file saved as train.tsv
    fileio.write_bytes(f"{root}/glue/MRPC/train.tsv", b"Quality\t#1 ID\n\x00\x9c\xff\x01")
  messages = [_one_line(glue.read_examples, f"{root}/glue", "MRPC", "train").replace(root, "<root>")
              for root in (bucket, str(tmp_path))]
  assert messages[0] == messages[1] and messages[0].startswith(
      "<root>/glue/MRPC/train.tsv: line 2, column 2: not UTF-8 text"), messages


def test_custom_tables_on_ram_are_the_local_ones(tmp_path):
  local = tmp_path / "data"
  local.mkdir()
  (local / "train.csv").write_text('x1,"says ""hi"", twice",pos\nx2,"two\nlines",neg\n')
  (local / "dev.jsonl").write_text('{"id": "d1", "text": "fine", "label": "pos"}\n')
  remote = _on_ram(local)
  columns = Columns(text_a="1", text_b=None, label="2", id="0")
  for data_dir in (str(local), remote):
    spec = custom_task.build_spec("custom", data_dir, columns, header=False, data_format="csv")
    assert _rows(spec.read_examples(data_dir, "train")) == _rows(
        custom_task.build_spec("custom", str(local), columns, header=False,
                               data_format="csv").read_examples(str(local), "train"))
  jsonl = Columns(text_a="text", text_b=None, label="label", id="id")
  spec = custom_task.build_spec("custom", remote, jsonl, labels=["pos", "neg"])
  assert spec.split_path(remote, "dev") == f"{remote}/dev.jsonl"
  assert [(e.guid, e.text_a, e.label) for e in spec.read_examples(remote, "dev")] == [
      ("d1", "fine", "pos")]
  messages = [_one_line(spec.split_path, root, "test").replace(root, "<root>")
              for root in (remote, str(local))]
  assert messages[0] == messages[1] and "file not found" in messages[0]


def test_race_examples_on_ram_are_the_local_ones(tmp_path):
  local = tmp_path / "race"
  finetune.write_race(str(local), splits=("dev",), files_per_level=2)
  remote = _on_ram(local)
  expected = race.read_examples(str(local), "dev")
  assert _rows(race.read_examples(remote, "dev")) == _rows(expected) and len(expected) == 8
  before = race.tree_fingerprint(remote, "dev")
  fileio.write_text(f"{remote}/RACE/dev/high/0.txt",
                    fileio.read_text(f"{remote}/RACE/dev/high/0.txt") + "\n")
  assert race.tree_fingerprint(remote, "dev") != before  # ram:// has no mtime: the size tells


class _WordTokenizer:
  """Whitespace tokenizer with a growing vocabulary."""

  def __init__(self):
    self.vocab = {"<pad>": 0, "<unk>": 1, "[CLS]": 2, "[SEP]": 3}

  def tokenize(self, text):
    return text.split()

  def convert_tokens_to_ids(self, tokens):
    return [self.vocab.setdefault(t, len(self.vocab)) for t in tokens]


def test_classifier_feature_cache_on_ram_is_written_once_and_reused(tmp_path):
  examples = [glue.InputExample(str(i), "a b c", "d e", ["0", "1"][i % 2]) for i in range(3)]
  calls = []

  def make():
    calls.append(1)
    tok = _WordTokenizer()
    return (classifier_features.convert_classifier_example(e, ["0", "1"], 8, tok)
            for e in examples)

  bucket = _bucket()
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


def test_record_checks_on_ram(tmp_path):
  local = training_helpers.write_synthetic_pretraining_data(str(tmp_path / "data.tfrecord"), 12,
                                                            seed=0, vocab_size=1000)
  bucket = _bucket()
  remote = f"{bucket}/data.tfrecord"
  fileio.copy(local, remote)
  assert record_checks.check_record_files([remote]) == [remote]
  assert record_checks.count_records(remote) == 12
  identity = record_checks.file_identity(remote)
  assert identity == record_checks.file_identity(local)
  assert record_checks.cached_file_problem(remote, identity) is None
  data = fileio.read_bytes(remote)
  fileio.write_bytes(remote, data[:len(data) - 7])
  assert record_checks.framing_problem(remote) == (
      f"{remote}: record 11: cut short at byte {len(data) - 7} (the record ends at byte "
      f"{len(data)}): the file is truncated")
  assert record_checks.cached_file_problem(remote, identity) == (
      f"{remote}: {len(data) - 7} bytes, but {len(data)} were recorded when it was written (cut "
      "or changed since)")
  assert _one_line(record_checks.check_record_files, [f"{bucket}/missing.tfrecord"]) == (
      f"{bucket}/missing.tfrecord: no such file")
