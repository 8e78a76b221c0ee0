"""Broken checkpoints through the real scripts: a run never starts from scratch beside checkpoints
it could not read, never computes with half a checkpoint, never deletes or overwrites an intact
one; a save that cannot be written (disk full) is one line and keeps the last good checkpoint."""

import os
import resource
import shutil
import signal
import subprocess

import numpy as np
import pytest

from tests.helpers import finetune, training as helpers
from tests.helpers.scripts import run_script
from tests.helpers.tiny_config import write_tiny_config


@pytest.fixture(scope="module")
def pretraining(tmp_path_factory):
  """A finished 6-step run with checkpoints at steps 2, 4 and 6 (copied per test)."""
  tmp = tmp_path_factory.mktemp("broken_ckpt")
  config = write_tiny_config(str(tmp / "albert_config.json"))
  data = helpers.write_synthetic_pretraining_data(str(tmp / "data.tfrecord"), 120)
  proc = helpers.run_pretraining(helpers.pretraining_flags(config, data, tmp / "run", 6))
  assert proc.returncode == 0, proc.stderr[-3000:]
  return tmp, config, data


def _copy_run(pretraining, tmp_path):
  out = tmp_path / "out"
  shutil.copytree(pretraining[0] / "run", out)
  return out


def _rerun(pretraining, out, steps, **extra):
  _, config, data = pretraining
  return helpers.run_pretraining(helpers.pretraining_flags(config, data, out, steps, **extra))


def _cut_in_half(path):
  size = os.path.getsize(path)
  with open(path, "r+b") as f:
    f.truncate(size // 2)


def _one_line_error(proc):
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
  return proc.stderr.strip().splitlines()[-1]


def _values(prefix):
  return helpers.checkpoint_values(str(prefix))


# (The state file goes with the cut data: the checkpoints are found from their files alone.)
@pytest.mark.parametrize("damage", ["index_missing", "data_cut_and_state_file_gone"])
def test_resume_skips_a_broken_newest_checkpoint_and_keeps_the_intact_ones(pretraining,
                                                                           tmp_path, damage):
  out = _copy_run(pretraining, tmp_path)
  intact = _values(out / "ckpt-4")
  if damage == "index_missing":
    os.remove(out / "ckpt-6.index")
  else:
    _cut_in_half(out / "ckpt-6.data-00000-of-00001")
    os.remove(out / "checkpoint")
  proc = _rerun(pretraining, out, 8)
  output = proc.stdout + proc.stderr
  assert proc.returncode == 0, output[-3000:]
  warning = next(line for line in output.splitlines() if line.startswith("warning: "))
  assert str(out / "ckpt-6") in warning and "broken_checkpoints" in warning, warning
  assert f"Resuming from {out / 'ckpt-4'} at step 4" in output, output[-3000:]
  # The broken files are kept for inspection, out of the way.
  assert os.listdir(out / "broken_checkpoints")
  assert "step 8/8" in output
  # The intact checkpoint the run resumed from was neither deleted nor rewritten.
  for key, value in intact.items():
    np.testing.assert_array_equal(_values(out / "ckpt-4")[key], value, err_msg=key)


def test_no_intact_checkpoint_is_an_error_and_changes_nothing(pretraining, tmp_path):
  out = _copy_run(pretraining, tmp_path)
  for step in (2, 4, 6):
    _cut_in_half(out / f"ckpt-{step}.data-00000-of-00001")
  before = sorted(os.listdir(out))
  line = _one_line_error(_rerun(pretraining, out, 8))
  assert "holds checkpoints but none is intact" in line and "ckpt-6" in line, line
  assert sorted(os.listdir(out)) == before


def test_truncated_init_checkpoint_is_an_error(pretraining, tmp_path):
  init = _copy_run(pretraining, tmp_path)
  _cut_in_half(init / "ckpt-6.data-00000-of-00001")
  line = _one_line_error(_rerun(pretraining, tmp_path / "new", 2,
                                init_checkpoint=str(init / "ckpt-6")))
  assert f"--init_checkpoint {init / 'ckpt-6'}: unreadable" in line, line
  assert not (tmp_path / "new" / "ckpt-2.index").exists()


def test_disk_full_while_saving_keeps_the_last_checkpoint(pretraining, tmp_path):
  out = _copy_run(pretraining, tmp_path)
  intact = _values(out / "ckpt-6")
  limit = os.path.getsize(out / "ckpt-6.data-00000-of-00001") // 2

  def small_disk():  # every file the run writes may grow to half a checkpoint, no further
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

  _, config, data = pretraining
  proc = subprocess.run(
      helpers.pretraining_command(helpers.pretraining_flags(config, data, out, 8)),
      env=helpers.subprocess_env(), capture_output=True, text=True, timeout=240,
      cwd=str(helpers.REPO_ROOT), preexec_fn=small_disk, check=False)
  line = _one_line_error(proc)
  assert f"cannot write checkpoint {out / 'ckpt-8'}" in line, line
  assert f"the last complete checkpoint ({out / 'ckpt-6'}) is kept" in line, line
  assert not list(out.glob("ckpt-8*")), sorted(os.listdir(out))
  for key, value in intact.items():
    np.testing.assert_array_equal(_values(out / "ckpt-6")[key], value, err_msg=key)
  # With room again, the same command resumes and finishes.
  proc = _rerun(pretraining, out, 8)
  assert proc.returncode == 0 and "step 8/8" in proc.stdout + proc.stderr


# ------------------------------------------------------------------------------ fine-tuning
@pytest.fixture(scope="module")
def mrpc(tmp_path_factory):
  """A 4-step MRPC run with checkpoints at steps 2 and 4, evaluated (model.ckpt-best written)."""
  setup = finetune.mrpc_setup(tmp_path_factory.mktemp("broken_ckpt_mrpc"))
  tmp = setup["root"]
  flags = [f"--albert_config_file={setup['config']}", f"--spm_model_file={setup['spm']}",
           "--task_name=MRPC",
           f"--data_dir={tmp / 'glue'}", "--max_seq_length=24", "--train_batch_size=4",
           "--eval_batch_size=4", "--predict_batch_size=4", "--train_step=4",
           "--save_checkpoints_steps=2", "--log_every_n_steps=1"]
  proc = _classifier(flags + [f"--output_dir={tmp / 'run'}", "--do_train", "--do_eval"], tmp)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return tmp, flags


def _classifier(args, cwd):
  return run_script("run_classifier.py", args, cwd, timeout=300)


def test_broken_best_checkpoint_is_an_error_for_predict(mrpc, tmp_path):
  tmp, flags = mrpc
  out = tmp_path / "out"
  shutil.copytree(tmp / "run", out)
  _cut_in_half(out / "model.ckpt-best.data-00000-of-00001")
  line = _one_line_error(_classifier(flags + [f"--output_dir={out}", "--do_predict"], tmp_path))
  assert f"{out / 'model.ckpt-best'}: unreadable" in line, line
  assert not (out / "test_results.tsv").exists()


def test_eval_sweep_skips_an_unreadable_checkpoint_with_a_warning(mrpc, tmp_path):
  tmp, flags = mrpc
  out = tmp_path / "out"
  shutil.copytree(tmp / "run", out)
  _cut_in_half(out / "ckpt-2.data-00000-of-00001")
  proc = _classifier(flags + [f"--output_dir={out}", "--do_eval"], tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert f"warning: {out / 'ckpt-2'}: unreadable" in proc.stderr, proc.stderr[-3000:]
  text = (out / "eval_results.txt").read_text()
  assert "global_step = 4" in text and "global_step = 2" not in text
