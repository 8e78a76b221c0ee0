"""Broken input records through the real scripts: one line naming the file (and record), exit 2,
never a hang, a traceback or a quiet run on part of the data; broken feature caches are rebuilt.

  run_pretraining.py: a 0-byte file, a file cut mid-record (train and --do_eval), a record of
    another length in the middle of a file (train), an id >= vocab_size (eval).
  run_classifier.py: a cached <task>_eval.tf_record cut at a record boundary or mid-record.
  run_squad.py: a cached prediction feature file cut mid-record.
"""

import json
import os
import shutil
import struct

import pytest
import tensorflow as tf

from tests.helpers import glue_fixtures
from tests.helpers import scripts
from tests.helpers import squad as squad_helpers
from tests.helpers import training as helpers
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_albert_config, write_tiny_config

VOCAB_SIZE = 1000  # configs/albert_tiny.json


# ----------------------------------------------------------------------------- broken files
def record_ends(path):
  """Byte offsets where each record of a TFRecord file ends (framing: 8 + 4 + data + 4)."""
  with open(path, "rb") as f:
    data = f.read()
  ends, offset = [], 0
  while offset < len(data):
    offset += 16 + struct.unpack("<Q", data[offset:offset + 8])[0]
    ends.append(offset)
  return ends


def cut(path, num_records, into_next=0):
  """Keeps the first num_records records of `path` (and `into_next` bytes of the next one)."""
  keep = record_ends(path)[num_records - 1] + into_next
  with open(path, "rb") as f:
    data = f.read()[:keep]
  with open(path, "wb") as f:
    f.write(data)


def replace_feature(source, target, index, name, values):
  """Copies a record file, record `index` with feature `name` set to the int64 `values`."""
  records = [r.numpy() for r in tf.data.TFRecordDataset(source)]
  example = tf.train.Example.FromString(records[index])
  example.features.feature[name].CopyFrom(
      tf.train.Feature(int64_list=tf.train.Int64List(value=values)))
  records[index] = example.SerializeToString()
  with tf.io.TFRecordWriter(str(target)) as writer:
    for record in records:
      writer.write(record)
  return str(target)


def assert_one_line_error(proc, *fragments):
  """Exit 2, no traceback, and the last stderr line is `error: ...` holding every fragment."""
  assert proc.returncode == 2, scripts.describe(proc)
  assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
  line = scripts.last_line(proc.stderr)
  assert line.startswith("error: "), proc.stderr[-3000:]
  for fragment in fragments:
    assert fragment in line, line


# ----------------------------------------------------------------------------- pretraining
@pytest.fixture(scope="module")
def pretraining(tmp_path_factory):
  """Tiny config, 16 good records and a pretrainer checkpoint to evaluate (--init_checkpoint)."""
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks import pretraining as pretraining_task  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp("bad_pretraining_input")
  config = write_tiny_config(root / "albert_config.json")
  good = helpers.write_synthetic_pretraining_data(str(root / "good.tfrecord"), 16,
                                                  vocab_size=VOCAB_SIZE)
  task = pretraining_task.PretrainingTask(pretraining_task.PretrainingConfig(
      AlbertConfig.from_json_file(config), input_file=good, max_seq_length=helpers.TINY_SEQ,
      max_predictions_per_seq=helpers.TINY_PREDS))
  model = task.build_model()
  model(next(iter(task.build_inputs("eval", 2)))[0])
  checkpoint = tf.train.Checkpoint(model=model).write(str(root / "init" / "ckpt-0"))
  return {"root": root, "config": config, "good": good, "checkpoint": checkpoint}


def _pretrain(pretraining, data, name, steps=2, **extra):
  return helpers.run_pretraining(
      helpers.pretraining_flags(pretraining["config"], data, pretraining["root"] / name, steps,
                                save_every=100, **extra), timeout=120)


def _evaluate(pretraining, data, name):
  return _pretrain(pretraining, data, name, do_train="false", do_eval="true",
                   init_checkpoint=pretraining["checkpoint"])


def test_empty_input_file_is_an_error_not_a_hang(pretraining):
  empty = pretraining["root"] / "empty.tfrecord"
  empty.write_bytes(b"")
  proc = _pretrain(pretraining, str(empty), "out_empty")
  assert_one_line_error(proc, f"{empty}: the file is empty (0 bytes)")


def test_file_cut_mid_record_is_named(pretraining):
  path = pretraining["root"] / "cut.tfrecord"
  shutil.copy(pretraining["good"], path)
  cut(str(path), 9, into_next=40)
  proc = _pretrain(pretraining, str(path), "out_cut")
  assert_one_line_error(proc, f"{path}: record 9: cut short", "truncated")


def test_record_of_another_length_names_file_and_record(pretraining):
  path = replace_feature(pretraining["good"], pretraining["root"] / "short.tfrecord", 5,
                         "input_ids", [7] * (helpers.TINY_SEQ // 2))
  proc = _pretrain(pretraining, path, "out_short", steps=20)
  assert_one_line_error(
      proc, f"{path}: record 5: input_ids has {helpers.TINY_SEQ // 2} values, expected "
      f"{helpers.TINY_SEQ} (--max_seq_length)")


def test_id_beyond_the_vocabulary_is_named_in_evaluation(pretraining):
  ids = [7] * (helpers.TINY_SEQ - 1) + [VOCAB_SIZE + 5]
  path = replace_feature(pretraining["good"], pretraining["root"] / "big_id.tfrecord", 11,
                         "input_ids", ids)
  proc = _evaluate(pretraining, path, "out_big_id")
  assert_one_line_error(proc, f"{path}: record 11: input_ids holds {VOCAB_SIZE + 5}, expected "
                        f"values in [0, {VOCAB_SIZE}) (vocab_size {VOCAB_SIZE}")
  assert not (pretraining["root"] / "out_big_id" / "eval_results.txt").exists()


def test_evaluation_over_a_file_cut_mid_record_is_an_error(pretraining):
  path = pretraining["root"] / "eval_cut.tfrecord"
  shutil.copy(pretraining["good"], path)
  cut(str(path), 12, into_next=3)  # inside the next record's header
  proc = _evaluate(pretraining, str(path), "out_eval_cut")
  assert_one_line_error(proc, f"{path}: record 12: cut short", "truncated")
  assert not (pretraining["root"] / "out_eval_cut" / "eval_results.txt").exists()


# ----------------------------------------------------------------------------- GLUE cache
def _write_model_checkpoint(task, mode, path):
  """A checkpoint of `task`'s model (random weights) to evaluate with --init_checkpoint."""
  model = task.build_model()
  model(next(iter(task.build_inputs(mode, 2)))[0])
  return tf.train.Checkpoint(model=model).write(path)


@pytest.fixture(scope="module")
def glue_setup(tmp_path_factory):
  """MRPC (glue_fixtures: 5 dev examples), a classifier checkpoint and the flags evaluating it.

  Each test caches the eval features as a first run does (the task's own code, in process),
  cuts the file and runs run_classifier.py --do_eval on it.
  """
  from albert_tf.tasks.glue import ClassificationTask, GlueConfig  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp("bad_glue_cache")
  glue_fixtures.write_glue(str(root / "glue"))
  spm = make_tiny_spm_model(str(root))
  config = write_tiny_config(root / "albert_config.json")

  def make_task(cached_dir):
    return ClassificationTask(GlueConfig(
        task_name="MRPC", albert_config=config, data_dir=str(root / "glue"), max_seq_length=24,
        cached_dir=str(cached_dir), spm_model_file=spm))

  checkpoint = _write_model_checkpoint(make_task(root / "init"), "eval",
                                       str(root / "init" / "ckpt-1"))
  flags = ["--task_name=MRPC", "--data_dir=glue", f"--albert_config_file={config}",
           f"--spm_model_file={spm}", "--max_seq_length=24", "--eval_batch_size=4",
           f"--init_checkpoint={checkpoint}", "--do_eval=true"]
  return root, flags, make_task


@pytest.mark.parametrize("into_next", [0, 30], ids=["at_record_boundary", "mid_record"])
def test_cut_eval_cache_is_rebuilt_and_every_example_evaluated(glue_setup, into_next):
  root, flags, make_task = glue_setup
  name = f"run_{into_next}"
  cache = make_task(root / name).features_file("eval")
  assert len(record_ends(cache)) == glue_fixtures.N_DEV
  cut(cache, 2, into_next=into_next)
  proc = scripts.run_script("run_classifier.py", flags + [
      f"--output_dir={name}/out", f"--cached_dir={name}"], cwd=str(root), timeout=300)
  assert proc.returncode == 0, scripts.describe(proc)
  notes = [l for l in proc.stderr.splitlines() if "rebuilding it" in l]
  assert len(notes) == 1 and notes[0].startswith(f"warning: {name}/mrpc_eval.tf_record: "), (
      proc.stderr[-3000:])
  blocks = scripts.eval_blocks(str(root / name / "out" / "eval_results.txt"))
  assert [b["num_examples"] for b in blocks] == [str(glue_fixtures.N_DEV)]
  assert len(record_ends(cache)) == glue_fixtures.N_DEV
  meta = json.loads((root / name / "mrpc_eval.tf_record.meta.json").read_text())
  assert meta["num_examples"] == glue_fixtures.N_DEV and meta["size"] == os.path.getsize(cache)


# ----------------------------------------------------------------------------- SQuAD cache
def test_cut_squad_predict_features_are_rebuilt(tmp_path):
  """The prediction features of a first run (the task's own code, in process), cut inside a
  record, then run_squad.py --do_predict: rebuilt, and every question predicted."""
  from albert_tf import tokenization  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks.squad import SquadConfig, SquadTask  # pylint: disable=g-import-not-at-top
  spm = squad_helpers.make_squad_spm_model(tmp_path)
  vocab_size = tokenization.FullTokenizer(spm_model_file=spm).sp_model.GetPieceSize()
  config = str(tmp_path / "albert_config.json")
  tiny_albert_config(vocab_size=vocab_size, **squad_helpers.TINY_CONFIG_OVERRIDES).to_json_file(
      config)
  data = str(squad_helpers.TINY_V1)
  lengths = dict(max_seq_length=64, doc_stride=32, max_query_length=16)
  task = SquadTask(SquadConfig(config, spm_model_file=spm, predict_file=data,
                               cache_dir=str(tmp_path / "out"), **lengths))
  checkpoint = _write_model_checkpoint(task, "predict", str(tmp_path / "init" / "ckpt-1"))
  features = tmp_path / "out" / "squad_v1_predict.tf_record"
  num_features = len(record_ends(str(features)))
  cut(str(features), num_features // 2, into_next=20)
  proc = scripts.run_script("run_squad.py", [
      f"--albert_config_file={config}", f"--spm_model_file={spm}", "--output_dir=out",
      "--do_predict", f"--predict_file={data}", f"--init_checkpoint={checkpoint}",
      "--predict_batch_size=8"] + [f"--{k}={v}" for k, v in lengths.items()],
      cwd=str(tmp_path), timeout=300)
  assert proc.returncode == 0, scripts.describe(proc)
  notes = [l for l in proc.stderr.splitlines() if "rebuilding it" in l]
  assert len(notes) == 1 and notes[0].startswith("warning: out/squad_v1_predict.tf_record: "), (
      proc.stderr[-3000:])
  assert len(record_ends(str(features))) == num_features
  with open(data, encoding="utf-8") as f:
    question_ids = {qa["id"] for article in json.load(f)["data"]
                    for paragraph in article["paragraphs"] for qa in paragraph["qas"]}
  assert set(json.loads((tmp_path / "out" / "predictions.json").read_text())) == question_ids
