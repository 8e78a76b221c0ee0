"""Every directory our tools write is self-describing: albert_config.json (and, where the input
had one, the SentencePiece model) beside the checkpoint, so that from_pretrained, the scripts'
--init_checkpoint and the converter read it back with no --albert_config_file.

Writers: the converter (tf1, tf2 and hf outputs; the issue's command through the real module),
export_checkpoints.py (the real script), and a training run's --output_dir (run_classifier.py).
Each output is read back by from_pretrained with no config or vocabulary argument, and converted
again with no --albert_config_file. Converting a TF1 checkpoint with no config beside it is still
a one-line error asking for --albert_config_file.
"""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import albert_tf
from albert_tf import models
from albert_tf.common import kinds, output_layout
from albert_tf.checkpoints import formats
from albert_tf.checkpoints.conversion import convert
from albert_tf.errors import AlbertError
from tests.helpers import finetune
from tests.helpers import scripts
from tests.helpers.model_inputs import randomize_weights
from tests.helpers.paths import REPO
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_albert_config

_CONFIG, _SPM, _HF_SPM = formats.CONFIG_FILE, formats.SPM_FILE, formats.HF_SPM_FILE


def _same_file(a, b):
  with open(a, "rb") as fa, open(b, "rb") as fb:
    return fa.read() == fb.read()


@pytest.fixture(scope="module")
def src_tf1(tmp_path_factory):
  """src_tf1/: a pretrainer's TF1 model.ckpt with its albert_config.json and 30k-clean.model."""
  root = tmp_path_factory.mktemp("self_describing")
  directory = root / "src_tf1"
  model = randomize_weights(models.build(kinds.PRETRAINER, tiny_albert_config()), seed=3)
  formats.adapter_class(formats.TF1).save(model, str(directory / "model.ckpt"))
  (directory / _CONFIG).write_text(tiny_albert_config().to_json_string())
  make_tiny_spm_model(str(directory), name="30k-clean")
  return root, model


def _word_embeddings(model):
  return model.encoder.embeddings.word_embeddings.numpy()


def test_the_issues_command_then_from_pretrained(src_tf1):
  root, model = src_tf1
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO)
  proc = subprocess.run([sys.executable, "-m", "albert_tf.cli.convert",
                         "--input_checkpoint=src_tf1/model.ckpt", "--output_checkpoint=tf2/ckpt"],
                        cwd=str(root), capture_output=True, text=True, env=env, timeout=600,
                        check=False)
  assert proc.returncode == 0, scripts.describe(proc)
  assert _same_file(root / "tf2" / _CONFIG, root / "src_tf1" / _CONFIG)
  assert _same_file(root / "tf2" / _SPM, root / "src_tf1" / _SPM)
  pretrained = albert_tf.from_pretrained(str(root / "tf2"))  # no other argument
  assert pretrained.model_type == kinds.PRETRAINER and pretrained.tokenizer is not None
  np.testing.assert_array_equal(_word_embeddings(pretrained.model), _word_embeddings(model))


@pytest.mark.parametrize("output_format", [formats.TF1, formats.TF2, formats.HF])
def test_every_converter_output_reads_back_with_no_config(src_tf1, tmp_path, output_format):
  root, model = src_tf1
  output = tmp_path / "out" / ("hf" if output_format == formats.HF else "model.ckpt")
  convert(None, str(root / "src_tf1" / "model.ckpt"), str(output), output_format=output_format)
  directory = output if output_format == formats.HF else output.parent
  assert _same_file(directory / (_HF_SPM if output_format == formats.HF else _SPM),
                    root / "src_tf1" / _SPM)
  if output_format != formats.HF:
    assert formats.detect(str(output)).config().to_dict() == tiny_albert_config().to_dict()
  pretrained = albert_tf.from_pretrained(str(output))
  assert pretrained.tokenizer is not None
  np.testing.assert_array_equal(_word_embeddings(pretrained.model), _word_embeddings(model))
  # ... and converts again with no --albert_config_file.
  again = tmp_path / "again" / "model.ckpt"
  convert(None, str(output), str(again),
          output_format=formats.TF2 if output_format == formats.TF1 else formats.TF1)
  assert (again.parent / _CONFIG).exists() and (again.parent / _SPM).exists()


def test_a_different_config_beside_the_output_is_not_replaced(src_tf1, tmp_path):
  root, _ = src_tf1
  out = tmp_path / "out"
  out.mkdir()
  (out / _CONFIG).write_text(tiny_albert_config(hidden_size=64).to_json_string())
  with pytest.raises(AlbertError, match=f"{_CONFIG}: exists with another config"):
    convert(None, str(root / "src_tf1" / "model.ckpt"), str(out / "ckpt"))


def test_a_checkpoint_without_config_still_asks_for_one(src_tf1, tmp_path):
  root, _ = src_tf1
  bare = tmp_path / "bare"
  shutil.copytree(root / "src_tf1", bare)
  os.remove(bare / _CONFIG)
  with pytest.raises(AlbertError, match=f"no {_CONFIG} beside the checkpoint; pass "
                     "--albert_config_file"):
    convert(None, str(bare / "model.ckpt"), str(tmp_path / "out" / "ckpt"))


def test_export_checkpoints_output_reads_back(src_tf1, tmp_path):
  root, model = src_tf1
  proc = scripts.run_script("export_checkpoints.py", [
      f"--albert_directory={root / 'src_tf1'}", "--checkpoint_name=model.ckpt",
      "--export_path=clean/model.ckpt"], cwd=str(tmp_path))
  assert proc.returncode == 0, scripts.describe(proc)
  assert _same_file(tmp_path / "clean" / _SPM, root / "src_tf1" / _SPM)
  pretrained = albert_tf.from_pretrained(str(tmp_path / "clean" / "model.ckpt"))
  assert pretrained.model_type == kinds.PRETRAINER and pretrained.tokenizer is not None
  np.testing.assert_array_equal(_word_embeddings(pretrained.model), _word_embeddings(model))


def test_a_training_runs_output_dir_reads_back(tmp_path):
  setup = finetune.mrpc_setup(tmp_path)
  proc = scripts.run_script("run_classifier.py", [
      "--task_name=MRPC", "--data_dir=glue", "--output_dir=out",
      f"--albert_config_file={setup['config']}", f"--spm_model_file={setup['spm']}",
      "--do_train", "--do_eval", "--train_step=1", "--save_checkpoints_steps=1",
      "--max_seq_length=24", "--train_batch_size=4", "--eval_batch_size=4"], cwd=str(tmp_path))
  assert proc.returncode == 0, scripts.describe(proc)
  out = tmp_path / "out"
  assert _same_file(out / output_layout.ALBERT_CONFIG, setup["config"]) or (
      formats.detect(str(out)).config().to_dict() == tiny_albert_config().to_dict())
  assert _same_file(out / output_layout.SPM_MODEL, setup["spm"])
  pretrained = albert_tf.from_pretrained(str(out), task_name="MRPC")  # model.ckpt-best
  assert pretrained.model_type == kinds.CLASSIFIER and pretrained.tokenizer is not None
  assert pretrained.predict(["a b"], ["c d"], max_seq_length=24)["labels"][0] in ("0", "1")
