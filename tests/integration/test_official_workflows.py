"""Official command lines and artefacts through the real scripts: hub modules, seeds, resumes,
bad configs and vocabularies, quiet output, online masking, export_checkpoints.py."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import finetune, training as training_helpers
from tests.helpers.paths import REPO
from tests.helpers.tiny_config import tiny_config_dict, write_tiny_config


def _script(name, args, cwd, env=None, timeout=600):
  full_env = dict(os.environ, PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES="")
  full_env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # the scripts quiet TensorFlow themselves
  full_env.update(env or {})
  return subprocess.run([sys.executable, os.path.join(REPO, name)] + list(args),
                        capture_output=True, text=True, cwd=str(cwd), env=full_env,
                        timeout=timeout, check=False)


def _one_line_error(proc):
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
  return proc.stderr.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def glue_setup(tmp_path_factory):
  return finetune.mrpc_setup(tmp_path_factory.mktemp("workflows"))


def _mrpc_flags(setup, output_dir, *extra):
  return ["--task_name=MRPC", f"--data_dir={setup['root'] / 'glue'}",
          f"--output_dir={output_dir}", "--max_seq_length=24", "--train_batch_size=4",
          "--eval_batch_size=4", "--predict_batch_size=4", "--log_every_n_steps=1"] + list(extra)


# ------------------------------------------------------------------------------ TF-Hub modules
def test_hub_module_handle_gives_config_vocabulary_and_weights(glue_setup, tmp_path):
  from tests.helpers.hub_module import write_official_tf1_hub_module  # pylint: disable=g-import-not-at-top
  from tests.helpers.albert_numpy import make_official_weights  # pylint: disable=g-import-not-at-top
  cfg = tiny_config_dict()
  weights = make_official_weights(cfg, seed=3)
  module = write_official_tf1_hub_module(str(tmp_path / "albert_hub"), cfg, glue_setup["spm"],
                                         weights=weights, do_lower_case=True)
  # run_glue.sh's two invocations, unchanged but for the local module: no --albert_config_file,
  # an empty --init_checkpoint. A negligible learning rate keeps the weights: the fine-tuned
  # checkpoint's encoder must be the module's.
  common = _mrpc_flags(glue_setup, tmp_path / "out", f"--spm_model_file={glue_setup['spm']}",
                       f"--vocab_file={glue_setup['spm'][:-len('.model')]}.vocab",
                       "--do_lower_case", "--optimizer=adamw", "--warmup_step=0",
                       "--learning_rate=1e-12", "--train_step=1", "--save_checkpoints_steps=1")
  proc = _script("run_classifier.py", common + [
      "--do_train", "--nodo_eval", "--nodo_predict", f"--albert_hub_module_handle={module}",
      "--init_checkpoint="], tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  proc = _script("run_classifier.py", common + [
      "--nodo_train", "--do_eval", "--do_predict", f"--albert_hub_module_handle={module}"],
      tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert (tmp_path / "out" / "MRPC.tsv").exists()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  best = tf.train.load_checkpoint(str(tmp_path / "out" / "model.ckpt-best"))
  for name in ("bert/embeddings/word_embeddings",
               "bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel",
               "bert/pooler/dense/kernel"):
    np.testing.assert_allclose(best.get_tensor(name), weights[name], atol=1e-9)
  assert best.get_tensor("output_weights").shape == (2, cfg["hidden_size"])


def test_hub_module_url_asks_to_download(glue_setup, tmp_path):
  proc = _script("run_classifier.py", _mrpc_flags(
      glue_setup, tmp_path / "out", "--albert_hub_module_handle=https://tfhub.dev/google/albert_base/3",
      f"--spm_model_file={glue_setup['spm']}", "--do_train"), tmp_path)
  line = _one_line_error(proc)
  assert "https://tfhub.dev/google/albert_base/3" in line and "download" in line


# ------------------------------------------------------------------------------ bad inputs
def test_binary_config_is_a_one_line_error(glue_setup, tmp_path):
  binary = tmp_path / "model.ckpt.data-00000-of-00001"
  binary.write_bytes(bytes(range(256)) * 4)
  proc = _script("run_classifier.py", _mrpc_flags(
      glue_setup, tmp_path / "out", f"--albert_config_file={binary}",
      f"--spm_model_file={glue_setup['spm']}", "--do_train"), tmp_path)
  line = _one_line_error(proc)
  assert str(binary) in line and "not a UTF-8 text file" in line
  proc = _script("run_pretraining.py", [
      f"--albert_config_file={binary}", "--input_file=x.tfrecord", "--output_dir=out"], tmp_path)
  assert str(binary) in _one_line_error(proc)


def test_vocabulary_larger_than_the_config_is_refused(glue_setup, tmp_path):
  config = write_tiny_config(str(tmp_path / "small_vocab.json"), vocab_size=100)
  proc = _script("run_classifier.py", _mrpc_flags(
      glue_setup, tmp_path / "out", f"--albert_config_file={config}",
      f"--spm_model_file={glue_setup['spm']}", "--do_train"), tmp_path)
  line = _one_line_error(proc)
  assert "has 400 pieces" in line and "vocab_size=100" in line and glue_setup["spm"] in line


# ------------------------------------------------------------------------------ quiet output
def _assert_no_tensorflow_logs(output):
  for noise in ("cuInit", "oneDNN", "cpu_feature_guard", "Sharding callback", "tensorflow:",
                "autograph", "I1", "W1", "E1", "I0000", "W0000", "E0000", "absl::InitializeLog",
                "Ignored output_format", "MLIR V1 optimization pass"):
    assert noise not in output, (noise, output[-3000:])


@pytest.fixture(scope="module")
def trained_and_exported(glue_setup, tmp_path_factory):
  """One run_classifier.py --do_train --export_dir run (2 steps): its output is checked for
  quietness (training, export and TFLite steps) and its export dir for the TF Serving layout;
  one training run instead of one per test."""
  root = tmp_path_factory.mktemp("trained_and_exported")
  export = root / "export"
  args = _mrpc_flags(glue_setup, root / "out", f"--albert_config_file={glue_setup['config']}",
                     f"--spm_model_file={glue_setup['spm']}", "--do_train", "--train_step=2",
                     "--save_checkpoints_steps=2", f"--export_dir={export}")
  proc = _script("run_classifier.py", args, root)
  return dict(root=root, export=export, args=args, proc=proc)


def test_scripts_print_their_own_lines_not_tensorflow_logs(trained_and_exported, tmp_path):
  proc, args = trained_and_exported["proc"], trained_and_exported["args"]
  assert proc.returncode == 0, proc.stderr[-3000:]
  output = proc.stdout + proc.stderr
  assert "step 2/2 |" in output and "examples/s" in output and "ETA" in output
  assert "Exported SavedModel version" in output
  _assert_no_tensorflow_logs(output)
  # ALBERT_TF_VERBOSE brings TensorFlow's own lines back (the same command, without the export,
  # on a copy of the trained output dir).
  shutil.copytree(trained_and_exported["root"] / "out", tmp_path / "out2")
  verbose = _script("run_classifier.py", args[:2] + [f"--output_dir={tmp_path / 'out2'}"] +
                    args[3:-1], tmp_path, env={"ALBERT_TF_VERBOSE": "1"})
  assert verbose.returncode == 0, verbose.stderr[-3000:]
  assert "tensorflow/" in verbose.stderr or "oneDNN" in verbose.stderr


# ------------------------------------------------------------------------------ pretraining
@pytest.fixture(scope="module")
def pretraining_data(tmp_path_factory):
  root = tmp_path_factory.mktemp("pretraining")
  return dict(data=training_helpers.make_pretraining_data(root / "data"),
              config=write_tiny_config(root / "albert_config.json"))


def _pretraining_flags(setup, output_dir, steps, batch=8, **extra):
  flags = [f"--albert_config_file={setup['config']}", f"--input_file={setup['data']}",
           f"--output_dir={output_dir}", f"--max_seq_length={training_helpers.TINY_SEQ}",
           f"--max_predictions_per_seq={training_helpers.TINY_PREDS}",
           f"--train_batch_size={batch}", f"--num_train_steps={steps}", "--num_warmup_steps=1",
           "--save_checkpoints_steps=2", "--log_every_n_steps=1"]
  return flags + [f"--{k}={v}" for k, v in extra.items()]


def test_deterministic_from_scratch_is_seeded_and_reproducible(pretraining_data, tmp_path):
  values = []
  for run in ("a", "b"):
    proc = _script("run_pretraining.py", _pretraining_flags(
        pretraining_data, tmp_path / run, 2, deterministic="true"), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The official default is --do_eval=False: no evaluation unless asked.
    assert not (tmp_path / run / "eval_results.txt").exists()
    seed = json.loads((tmp_path / run / "run_seed.json").read_text())
    assert seed == {"seed": 0, "deterministic": True}
    values.append(training_helpers.checkpoint_values(str(tmp_path / run)))
  assert values[0].keys() == values[1].keys()
  for key in values[0]:
    np.testing.assert_array_equal(values[0][key], values[1][key], err_msg=key)
  # Another seed gives other initial weights.
  proc = _script("run_pretraining.py", _pretraining_flags(
      pretraining_data, tmp_path / "c", 2, deterministic="true", seed=5), tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  other = training_helpers.checkpoint_values(str(tmp_path / "c"))
  key = next(k for k in other if "word_embeddings" in k and "optimizer" not in k)
  assert not np.array_equal(other[key], values[0][key])


def test_resume_with_another_batch_size_restarts_the_input(pretraining_data, tmp_path):
  out = tmp_path / "out"
  proc = _script("run_pretraining.py", _pretraining_flags(pretraining_data, out, 2, batch=8,
                                                          shuffle_seed=1), tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  proc = _script("run_pretraining.py", _pretraining_flags(pretraining_data, out, 4, batch=4,
                                                          shuffle_seed=1), tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  output = proc.stdout + proc.stderr
  assert "train_batch_size 8 -> 4" in output and "input restarts from the beginning" in output
  assert "step 4/4 |" in output


def test_online_masking_budget(pretraining_data, tmp_path):
  proc = _script("run_pretraining.py", _pretraining_flags(
      pretraining_data, tmp_path / "out", 2, masked_lm_budget=0.2, shuffle_seed=2), tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "step 2/2 |" in proc.stdout + proc.stderr
  proc = _script("run_pretraining.py", _pretraining_flags(
      pretraining_data, tmp_path / "bad", 2, masked_lm_budget=-1), tmp_path)
  assert "--masked_lm_budget=-1.0 is invalid" in _one_line_error(proc)


# ------------------------------------------------------------------------------ export_checkpoints
def test_export_checkpoints_writes_the_official_layout(pretraining_data, tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tests.helpers.albert_numpy import make_official_weights, write_official_checkpoint  # pylint: disable=g-import-not-at-top
  cfg = tiny_config_dict()
  weights = make_official_weights(cfg, seed=1)
  directory = tmp_path / "albert_base"
  directory.mkdir()
  (directory / "albert_config.json").write_text(json.dumps(cfg))
  write_official_checkpoint(weights, str(directory / "model.ckpt-best"), optimizer_slots=True,
                            global_step=77)
  proc = _script("export_checkpoints.py", [f"--albert_directory={directory}",
                                           f"--export_path={tmp_path / 'clean' / 'model.ckpt'}"],
                 tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  reader = tf.train.load_checkpoint(str(tmp_path / "clean" / "model.ckpt"))
  names = set(reader.get_variable_to_shape_map())
  assert names == set(weights) | {"global_step"}  # the model, no optimizer slots
  assert int(reader.get_tensor("global_step")) == 77
  for name, value in weights.items():
    np.testing.assert_array_equal(reader.get_tensor(name), value)
  proc = _script("export_checkpoints.py", [f"--albert_directory={directory}",
                                           "--checkpoint_name=model.ckpt-9",
                                           f"--export_path={tmp_path / 'x' / 'model.ckpt'}"],
                 tmp_path)
  assert "model.ckpt-9: no checkpoint there" in _one_line_error(proc)


# ------------------------------------------------------------------------------ export layout
def test_export_dir_is_a_tf_serving_base_path_with_tflite(trained_and_exported):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from ai_edge_litert.interpreter import Interpreter  # pylint: disable=g-import-not-at-top
  export, args = trained_and_exported["export"], trained_and_exported["args"]
  tmp_path = trained_and_exported["root"]
  proc = trained_and_exported["proc"]
  assert proc.returncode == 0, proc.stderr[-3000:]
  # The TFLite converter logs through absl (W0000 ... lines, absl's pre-init notice), which
  # TF_CPP_MIN_LOG_LEVEL does not reach: none of it is printed.
  assert "Exported SavedModel version" in proc.stdout + proc.stderr
  _assert_no_tensorflow_logs(proc.stdout + proc.stderr)
  # Exporting again (e.g. after more training) adds a newer version; TF Serving serves the max.
  # This time the TFLite file takes any batch (--tflite_batch_size=0).
  proc = _script("run_classifier.py", args[:-4] + [f"--export_dir={export}",
                                                   "--tflite_batch_size=0"], tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  versions = sorted(int(p) for p in os.listdir(export) if p.isdigit())
  assert len(versions) == 2 and versions[0] < versions[1]
  assert sorted(p for p in os.listdir(export) if not p.isdigit()) == ["albert_model.tflite"]
  import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  served = tf.saved_model.load(str(export / str(versions[-1]))).signatures["tf_example"]
  rng = np.random.RandomState(0)
  ids = rng.randint(5, 400, size=(1, 24)).astype(np.int64)
  ids[0, 0], ids[0, 12], ids[0, 23] = 2, 3, 3
  segments = np.zeros_like(ids)
  segments[0, 13:] = 1
  example = tf.train.Example(features=tf.train.Features(feature={
      name: tf.train.Feature(int64_list=tf.train.Int64List(value=value[0].tolist()))
      for name, value in (("input_ids", ids), ("input_mask", np.ones_like(ids)),
                          ("segment_ids", segments))})).SerializeToString()
  outputs = served(examples=tf.constant([example, example]))
  # The official export's output names.
  assert outputs["predictions"].numpy().tolist() == [
      int(np.argmax(outputs["probabilities"][0]))] * 2
  interpreter = Interpreter(model_path=str(export / "albert_model.tflite"))
  assert [list(d["shape_signature"]) for d in interpreter.get_input_details()] == [[-1, 24]] * 3
  runner = interpreter.get_signature_runner("serving_default")
  pair = {name: np.concatenate([value] * 2).astype(np.int32) for name, value in (
      ("input_ids", ids), ("input_mask", np.ones_like(ids)), ("segment_ids", segments))}
  lite = runner(**pair)
  np.testing.assert_allclose(lite["probabilities"], outputs["probabilities"].numpy(), atol=1e-5)
