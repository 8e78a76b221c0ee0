"""Distribution: MirroredStrategy (2 logical CPUs) and MultiWorkerMirroredStrategy (2 local
worker processes on 127.0.0.1) agree with one device; a SIGTERM to one worker stops them all
after one and the same step, and the restarted job resumes with nothing lost.

Every multi-device run happens in subprocesses with timeouts, so a hang cannot block CI.
The data give every example the same number of masked positions, so splitting a batch over
replicas/workers changes nothing but float summation order.
"""

import os
import time

import numpy as np
import pytest

from tests.helpers import training as helpers
from tests.helpers.tiny_config import write_tiny_config

STEPS, BATCH, SAVE_EVERY = 60, 16, 20


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
  """One process: the same run on one device and mirrored over 2 logical CPUs."""
  tmp = tmp_path_factory.mktemp("distributed")
  config = write_tiny_config(tmp / "albert_config.json")
  data = helpers.write_synthetic_pretraining_data(str(tmp / "synthetic.tfrecord"), 400)
  result = helpers.run_mirrored_comparison(config, data, tmp / "runs", STEPS, BATCH)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
  return tmp, config, data, result.stdout


def _assert_same_model(got_dir, ref_dir, rtol, atol):
  got = helpers.checkpoint_values(str(got_dir))
  ref = helpers.checkpoint_values(str(ref_dir))
  model_keys = [k for k in ref if k.startswith("model/")]
  assert len(model_keys) > 10 and set(model_keys) <= set(got)
  for key in model_keys:
    np.testing.assert_allclose(got[key], ref[key], rtol=rtol, atol=atol, err_msg=key)
  step_key = "global_step/.ATTRIBUTES/VARIABLE_VALUE"
  assert int(got[step_key]) == int(ref[step_key]) == STEPS


def test_mirrored_two_cpus_matches_single_device(reference):
  tmp, _, _, stdout = reference
  assert "single 1 " in stdout and "mirrored 2 " in stdout, stdout
  _assert_same_model(tmp / "runs" / "mirrored", tmp / "runs" / "single", rtol=1e-4, atol=1e-6)
  # The run actually moved the weights away from the shared initialisation.
  init = helpers.checkpoint_values(str(tmp / "runs" / "init" / "ckpt-0"))
  single = helpers.checkpoint_values(str(tmp / "runs" / "single"))
  moved = [k for k in init if k.startswith("model/") and not np.allclose(init[k], single[k])]
  assert len(moved) > 10


def _wait_for(predicate, timeout, procs=()):
  deadline = time.time() + timeout
  while time.time() < deadline:
    if predicate():
      return True
    if any(p.poll() not in (None, 0) for p in procs):
      return False
    time.sleep(0.02)
  return False


def _wait_for_all(workers, timeout, what):
  """Waits until every worker has exited (killing any left after `timeout`); returns logs."""
  try:
    assert _wait_for(lambda: all(p.poll() is not None for p in workers), timeout), what
  finally:
    _kill(workers)
  return [helpers.read_log(p) for p in workers]


def _kill(procs):
  for p in procs:
    if p.poll() is None:
      p.kill()
  for p in procs:
    p.wait(timeout=30)


def test_multi_worker_sigterm_to_one_worker_stops_all_at_one_step_and_resumes(reference,
                                                                              tmp_path):
  """A preemption notice (SIGTERM) reaches one worker only: every worker finishes the same
  step, the checkpoint is saved, all exit 42; the restarted job resumes and agrees with the
  uninterrupted single-device run."""
  import signal  # pylint: disable=g-import-not-at-top
  tmp, config, data, _ = reference
  out = tmp_path / "mwms"
  flags = helpers.pretraining_flags(
      config, data, out, STEPS, batch=BATCH, save_every=SAVE_EVERY, learning_rate=0.01,
      init_checkpoint=str(tmp / "runs" / "init" / "ckpt-0"), log_every_n_steps=1)
  logs = tmp_path / "logs"
  logs.mkdir()

  # 1. Two workers start; after the first checkpoint, worker 1 alone gets SIGTERM.
  workers = helpers.start_workers(flags, log_dir=str(logs))
  try:
    first_ckpt = out / f"ckpt-{SAVE_EVERY}.index"
    assert _wait_for(first_ckpt.exists, 240, workers), "\n".join(
        helpers.read_log(p)[-3000:] for p in workers)
    workers[1].send_signal(signal.SIGTERM)
  finally:
    texts = _wait_for_all(workers, 120, "stop hung")
  for p, text in zip(workers, texts):
    assert p.returncode == 42, text[-3000:]
  last = [text.strip().splitlines()[-1] for text in texts]
  assert last[1].startswith("stopped by SIGTERM: step "), last[1]
  step = int(last[1].split("step ")[1].split("/")[0])
  assert SAVE_EVERY <= step < STEPS, last
  # The chief was not signalled, yet stopped after the same step and wrote the checkpoint.
  assert "stopped by a signal on another worker" in texts[0], texts[0][-2000:]
  assert f"step {step}/{STEPS} saved to {out / f'ckpt-{step}'}" in last[0], last[0]
  assert (out / f"ckpt-{step}.index").exists()

  # 2. The same command again, both workers: resume from the stop's checkpoint and finish.
  workers = helpers.start_workers(flags, log_dir=str(logs))
  logs_text = _wait_for_all(workers, 240, "restart hung")
  for p, text in zip(workers, logs_text):
    assert p.returncode == 0, text[-5000:]
  assert f"Resuming from {out / f'ckpt-{step}'} at step {step} (input position restored)" \
      in logs_text[0], logs_text[0][-3000:]
  assert f"step {STEPS}/{STEPS}" in logs_text[0]
  # 3. Nothing lost: the result equals the uninterrupted single-device run.
  _assert_same_model(out, tmp / "runs" / "single", rtol=1e-3, atol=1e-5)
  assert os.path.isdir(out / "train_input_state" / "worker_1")


def test_strategy_selection_and_errors(monkeypatch):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.errors import AlbertError  # pylint: disable=g-import-not-at-top
  from albert_tf.training import strategy as strategy_lib  # pylint: disable=g-import-not-at-top
  monkeypatch.delenv("TF_CONFIG", raising=False)
  assert strategy_lib.get_strategy() is tf.distribute.get_strategy()
  assert isinstance(strategy_lib.get_strategy("one_device"), tf.distribute.OneDeviceStrategy)
  with pytest.raises(AlbertError, match="--strategy='horovod' is invalid"):
    strategy_lib.get_strategy("horovod")
  with pytest.raises(AlbertError, match="needs TF_CONFIG"):
    strategy_lib.get_strategy("multi_worker_mirrored")
  monkeypatch.setenv("TF_CONFIG", "{not json")
  with pytest.raises(AlbertError, match="TF_CONFIG: not JSON"):
    strategy_lib.get_strategy()
  monkeypatch.setenv("TF_CONFIG", helpers.tf_config([1111, 2222], 0))
  assert strategy_lib._tf_config_has_cluster()  # pylint: disable=protected-access
  monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["127.0.0.1:1"]}, '
                     '"task": {"type": "worker", "index": 0}}')
  assert not strategy_lib._tf_config_has_cluster()  # pylint: disable=protected-access
