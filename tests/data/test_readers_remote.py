"""Task data on a tf.io.gfile URL (ram://, TensorFlow's in-memory filesystem, standing in for
gs://): the GLUE, custom-table, RACE and SQuAD readers give the local copy's examples, the record checks
read there, and a missing or wrong data file is the same one-line error as locally. (Feature
caches on ram://: tests/data/test_classifier_features.py.)"""

import dataclasses

import pytest

from albert_tf.common import fileio
from albert_tf.data import custom_task, glue, race, record_checks, squad
from albert_tf.data.custom_task import Columns
from albert_tf.errors import AlbertError
from tests.helpers import finetune
from tests.helpers import squad as squad_helpers
from tests.helpers import training as training_helpers
from tests.helpers.remote import copied_to_ram, ram_bucket


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
  remote = copied_to_ram(local)
  for task, split in (("MRPC", "train"), ("MRPC", "test"), ("CoLA", "train")):
    expected = glue.read_examples(str(local), task, split)
    assert _rows(glue.read_examples(remote, task, split)) == _rows(expected) and expected
  # BERT's --data_dir=glue/MRPC too
  assert _rows(glue.read_examples(f"{remote}/MRPC", "MRPC", "dev")) == _rows(
      glue.read_examples(str(local / "MRPC"), "MRPC", "dev"))


def test_missing_task_data_on_ram_is_the_local_one_line(tmp_path):
  bucket = ram_bucket()
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
  remote = copied_to_ram(local)
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
  remote = copied_to_ram(local)
  expected = race.read_examples(str(local), "dev")
  assert _rows(race.read_examples(remote, "dev")) == _rows(expected) and len(expected) == 8
  before = race.tree_fingerprint(remote, "dev")
  fileio.write_text(f"{remote}/RACE/dev/high/0.txt",
                    fileio.read_text(f"{remote}/RACE/dev/high/0.txt") + "\n")
  assert race.tree_fingerprint(remote, "dev") != before  # ram:// has no mtime: the size tells


def test_squad_examples_on_ram_are_the_local_ones():
  for local in (squad_helpers.TINY_V1, squad_helpers.TINY_V2):
    expected = squad.read_squad_examples(str(local), is_training=True)
    remote = squad.read_squad_examples(copied_to_ram(str(local)), is_training=True)
    assert _rows(remote) == _rows(expected) and expected


def test_record_checks_on_ram(tmp_path):
  local = training_helpers.write_synthetic_pretraining_data(str(tmp_path / "data.tfrecord"), 12,
                                                            seed=0, vocab_size=1000)
  bucket = ram_bucket()
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
