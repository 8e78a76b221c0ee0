"""run_classifier.py end to end with the official command line, its one-line errors, and an HF
directory as --init_checkpoint."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer
import albert_tf
from albert_tf.checkpoints import official_names
from tests.helpers import finetune
from tests.helpers.paths import REPO, REPO_ROOT
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import write_tiny_config


def _run(args, cwd):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO)
  return subprocess.run([sys.executable, os.path.join(REPO, "run_classifier.py")] + args,
                        capture_output=True, text=True, cwd=cwd, env=env, timeout=600,
                        check=False)


@pytest.fixture(scope="module")
def mrpc_run(tmp_path_factory):
  root = tmp_path_factory.mktemp("mrpc_run")
  spm = make_tiny_spm_model(str(root))
  finetune.write_mrpc(str(root / "glue"))
  config = write_tiny_config(str(root / "albert_config.json"))
  # An official command line, unchanged, plus --export_dir (and our --export_precision extra).
  proc = _run([
      "--task_name=MRPC", "--data_dir=glue", "--output_dir=out", "--cached_dir=cache",
      f"--albert_config_file={config}", f"--spm_model_file={spm}", "--do_train=true",
      "--do_eval=true", "--do_predict=true", "--do_lower_case=true", "--max_seq_length=24",
      "--optimizer=adamw", "--warmup_step=1", "--learning_rate=3e-4", "--train_step=4",
      "--save_checkpoints_steps=2", "--train_batch_size=4", "--eval_batch_size=3",
      "--predict_batch_size=2", "--export_dir=serving/mrpc", "--log_every_n_steps=2",
      "--export_precision=bf16"],
      cwd=str(root))
  assert proc.returncode == 0, proc.stderr[-4000:]
  return root


def test_eval_keeps_every_checkpoint_and_reports_the_best(mrpc_run):
  text = (mrpc_run / "out" / "eval_results.txt").read_text()
  blocks = text.split("=" * 50)
  assert len(blocks) == 3  # checkpoints 2 and 4, then the best summary
  assert "global_step = 2" in blocks[0] and "global_step = 4" in blocks[1]
  for block in blocks[:2]:
    for key in ("eval_accuracy", "f1", "eval_loss"):
      assert f"{key} = " in block
  accuracies = [float(line.split(" = ")[1]) for line in text.splitlines()
                if line.startswith("eval_accuracy = ")]
  best = json.loads((mrpc_run / "out" / "best_checkpoint.json").read_text())
  assert best["value"] == max(accuracies) and best["metric"] == "eval_accuracy"
  assert f"best_eval_accuracy = {max(accuracies)!r}" in text
  assert (mrpc_run / "out" / "best_trial.txt").read_text().startswith("4:")
  # Features were cached in --cached_dir under the official names.
  assert sorted(p for p in os.listdir(mrpc_run / "cache") if p.endswith(".tf_record")) == [
      "mrpc_eval.tf_record", "mrpc_predict.tf_record", "mrpc_train.tf_record"]


def test_predict_writes_glue_submission(mrpc_run):
  lines = (mrpc_run / "out" / "MRPC.tsv").read_text().splitlines()
  assert lines[0] == "index\tprediction"
  assert [l.split("\t")[0] for l in lines[1:]] == ["0", "1", "2", "3", "4"]
  assert all(l.split("\t")[1] in ("0", "1") for l in lines[1:])
  assert (mrpc_run / "out" / "submit_results.tsv").read_text() == "\n".join(lines) + "\n"
  probabilities = np.loadtxt(mrpc_run / "out" / "test_results.tsv")
  assert probabilities.shape == (5, 2)
  np.testing.assert_allclose(probabilities.sum(-1), 1.0, rtol=1e-5)
  predicted = [int(l.split("\t")[1]) for l in lines[1:]]
  assert predicted == probabilities.argmax(-1).tolist()


def test_export_dir_holds_the_task_model(mrpc_run):
  versions = [p for p in os.listdir(mrpc_run / "serving" / "mrpc") if p.isdigit()]
  assert len(versions) == 1  # TF Serving: <base>/<version>/
  assert (mrpc_run / "serving" / "mrpc" / "albert_model.tflite").exists()
  export_dir = mrpc_run / "serving" / "mrpc" / versions[0]
  assert (export_dir / "saved_model.pb").exists()
  assert (export_dir / "core_ops" / "saved_model.pb").exists()
  info = json.loads((export_dir / "assets.extra" / "albert_export.json").read_text())
  assert info["task"] == "mrpc" and info["labels"] == ["0", "1"] and info["max_seq_length"] == 24
  assert info["precision"] == "bf16"
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(str(export_dir / "variables" / "variables"))
  dtypes = set(reader.get_variable_to_dtype_map().values())
  assert tf.bfloat16 in dtypes and tf.float32 in dtypes  # bf16 weights, float32 LayerNorm
  assert not [p for p in os.listdir(mrpc_run / "serving") if ".tmp" in p]


def test_bad_flags_give_one_line_errors(tmp_path):
  proc = _run(["--task_name=glue_foo", "--data_dir=.", "--output_dir=out", "--do_train",
               "--albert_config_file=missing.json"], cwd=str(tmp_path))
  assert proc.returncode == 2
  assert proc.stderr.strip().splitlines()[-1].startswith(
      "error: --task_name='glue_foo' is not a known GLUE task; known tasks: ax, cola")
  assert "Traceback" not in proc.stderr


def random_weights(model, seed):
  """Assigns N(0, 0.2) to every named variable (LayerNorm scales around 1)."""
  rng = np.random.default_rng(seed)
  for name, variable in sorted(official_names.model_variable_map(model).items()):
    shape = variable.shape.as_list()
    value = 0.2 * rng.standard_normal(shape)
    if name.endswith("gamma"):
      value += 1.0
    variable.assign(value.astype(np.float32))


def test_run_classifier_initialises_from_an_hf_directory(tmp_path):
  """--init_checkpoint=<HF dir> through the real script: the encoder starts from its weights."""
  from tests.helpers import finetune  # pylint: disable=g-import-not-at-top
  from tests.helpers.text import make_tiny_spm_model  # pylint: disable=g-import-not-at-top
  spm = make_tiny_spm_model(str(tmp_path))
  finetune.write_mrpc(str(tmp_path / "glue"), n_train=8, n_dev=4)
  config_file = write_tiny_config(str(tmp_path / "albert_config.json"))
  source = AlbertPretrainer(AlbertConfig.from_json_file(config_file))
  random_weights(source, seed=5)  # N(0, 0.2): far from any fresh initialisation (std 0.02)
  albert_tf.save_hf_checkpoint(source, tmp_path / "hf")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(REPO_ROOT))
  proc = subprocess.run([
      sys.executable, str(REPO_ROOT / "run_classifier.py"), "--task_name=MRPC",
      "--data_dir=glue", "--output_dir=out", f"--albert_config_file={config_file}",
      f"--spm_model_file={spm}", f"--init_checkpoint={tmp_path / 'hf'}", "--do_train=true",
      "--max_seq_length=24", "--optimizer=adamw", "--warmup_step=0", "--learning_rate=1e-7",
      "--train_step=1", "--save_checkpoints_steps=1", "--train_batch_size=4"],
      capture_output=True, text=True, cwd=str(tmp_path), env=env, timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr[-4000:]
  assert f"{tmp_path / 'hf'}: loaded " in proc.stderr  # the load report, logged
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path / "out")))
  keys = [k for k in reader.get_variable_to_shape_map()
          if "word_embeddings" in k and "OPTIMIZER_SLOT" not in k]
  assert len(keys) == 1, keys
  expected = source.encoder.embeddings.word_embeddings.numpy()
  np.testing.assert_allclose(reader.get_tensor(keys[0]), expected, atol=1e-4)
