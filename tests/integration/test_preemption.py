"""SIGTERM / Ctrl-C during training, through the real scripts: the step in progress finishes, a
checkpoint (weights, optimizer, input position) is saved, one line says how to resume, the exit
status is 42, and the same command resumes to exactly the weights of an uninterrupted run."""

import os
import signal
import subprocess
import time

import numpy as np
import pytest

from tests.helpers import finetune, training as helpers
from tests.helpers.paths import REPO
from tests.helpers.tiny_config import write_tiny_config

EXIT_STOPPED = 42
STEPS = 400


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("preemption")
  config = write_tiny_config(str(tmp / "albert_config.json"))
  data = helpers.write_synthetic_pretraining_data(str(tmp / "data.tfrecord"), 300)
  return tmp, config, data


def _flags(setup, output_dir, **extra):
  _, config, data = setup
  # One checkpoint at the end only: whatever a stop saves is all there is of the run.
  return helpers.pretraining_flags(config, data, output_dir, STEPS, save_every=100_000,
                                   log_every_n_steps=20, deterministic="true", **extra)


def _start(argv, log_path, env=None):
  log = open(log_path, "w")  # pylint: disable=consider-using-with
  return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO,  # pylint: disable=consider-using-with
                          env=helpers.subprocess_env(env))


def _read(path):
  with open(path, encoding="utf-8", errors="replace") as f:
    return f.read()


def _wait_for_text(log_path, proc, text, timeout=120):
  deadline = time.time() + timeout
  while time.time() < deadline:
    if text in _read(log_path):
      return True
    if proc.poll() is not None:
      return False
    time.sleep(0.05)
  return False


def _signal_mid_run(argv, log_path, sig, after_text):
  proc = _start(argv, log_path)
  try:
    assert _wait_for_text(log_path, proc, after_text), _read(log_path)[-3000:]
    proc.send_signal(sig)
    proc.wait(timeout=120)
  finally:
    if proc.poll() is None:
      proc.kill()
  return proc.returncode, _read(log_path)


def _model_and_optimizer(path):
  values = helpers.checkpoint_values(str(path))
  return {k: v for k, v in values.items() if k.startswith(("model/", "optimizer/"))}


def test_sigterm_mid_pretraining_saves_the_step_and_resumes_bit_exactly(setup, tmp_path):
  reference = helpers.run_pretraining(_flags(setup, tmp_path / "straight"))
  assert reference.returncode == 0, reference.stderr[-3000:]

  out = tmp_path / "stopped"
  argv = helpers.pretraining_command(_flags(setup, out))
  code, log = _signal_mid_run(argv, tmp_path / "first.log", signal.SIGTERM, "step 100/")
  assert code == EXIT_STOPPED, log[-3000:]
  assert "Traceback" not in log, log[-3000:]
  last = log.strip().splitlines()[-1]
  assert last.startswith("stopped by SIGTERM: step ") and "run the same command again" in last
  step = int(last.split("step ")[1].split("/")[0])
  assert 100 <= step < STEPS, last
  assert f"saved to {out / f'ckpt-{step}'}" in last
  # Nothing but the stop's checkpoint: every completed step is in it.
  assert sorted(p.name for p in out.glob("ckpt-*.index")) == [f"ckpt-{step}.index"]

  second = helpers.run_pretraining(_flags(setup, out))
  assert second.returncode == 0, second.stderr[-3000:]
  output = second.stdout + second.stderr
  assert f"Resuming from {out / f'ckpt-{step}'} at step {step} (input position restored)" \
      in output, output[-3000:]
  got, want = _model_and_optimizer(out / f"ckpt-{STEPS}"), _model_and_optimizer(
      tmp_path / "straight" / f"ckpt-{STEPS}")
  assert len(want) > 20 and got.keys() == want.keys()
  for key in want:
    np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def test_ctrl_c_during_run_classifier_training_saves_and_resumes(tmp_path):
  setup = finetune.mrpc_setup(tmp_path, n_train=16)
  spm, config = setup["spm"], setup["config"]

  def argv(output_dir):
    return [os.path.join(REPO, "run_classifier.py"), "--task_name=MRPC",
            f"--data_dir={tmp_path / 'glue'}", f"--output_dir={output_dir}",
            f"--albert_config_file={config}", f"--spm_model_file={spm}", "--do_train",
            "--max_seq_length=24", "--train_batch_size=4", "--train_step=300",
            "--warmup_step=10", "--learning_rate=1e-3", "--save_checkpoints_steps=100000",
            "--log_every_n_steps=20", "--deterministic", "--dropout_prob=0"]

  import sys  # pylint: disable=g-import-not-at-top
  straight = subprocess.run([sys.executable] + argv(tmp_path / "straight"), cwd=REPO,
                            env=helpers.subprocess_env(), capture_output=True, text=True,
                            timeout=300, check=False)
  assert straight.returncode == 0, straight.stderr[-3000:]

  out = tmp_path / "stopped"
  code, log = _signal_mid_run([sys.executable] + argv(out), tmp_path / "first.log",
                              signal.SIGINT, "step 60/")
  assert code == EXIT_STOPPED, log[-3000:]
  assert "Traceback" not in log and "KeyboardInterrupt" not in log, log[-3000:]
  last = log.strip().splitlines()[-1]
  assert last.startswith("stopped by SIGINT: step "), last
  step = int(last.split("step ")[1].split("/")[0])

  resumed = subprocess.run([sys.executable] + argv(out), cwd=REPO, env=helpers.subprocess_env(),
                           capture_output=True, text=True, timeout=300, check=False)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"at step {step} (input position restored)" in resumed.stdout + resumed.stderr
  got, want = _model_and_optimizer(out / "ckpt-300"), _model_and_optimizer(
      tmp_path / "straight" / "ckpt-300")
  assert got.keys() == want.keys()
  for key in want:
    np.testing.assert_array_equal(got[key], want[key], err_msg=key)
