"""One writer per --output_dir, through the real run_pretraining.py (issue 20): a run after a
SIGKILLed one takes over its stale lock with a note and resumes; a second run on a directory in
use stops at once with exit 2 and one line naming the holder, writing nothing, and the holder
finishes untouched."""

import glob
import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest
import tensorflow as tf

from albert_tf.training import output_lock
from tests.helpers import training as helpers
from tests.helpers.scripts import last_line
from tests.helpers.tiny_config import write_tiny_config

HOST = socket.gethostname()
STEPS = 6


@pytest.fixture(scope="module")
def pretraining_inputs(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("one_writer")
  config = write_tiny_config(tmp / "albert_config.json")
  data = helpers.write_synthetic_pretraining_data(str(tmp / "pretrain.tfrecord"), 64)
  return config, data


def _start(flags, log_path):
  """run_pretraining.py in the background; stdout and stderr go to `log_path`."""
  log = open(log_path, "w", encoding="utf-8")  # pylint: disable=consider-using-with
  proc = subprocess.Popen(  # pylint: disable=consider-using-with
      helpers.pretraining_command(flags), env=helpers.subprocess_env(), stdout=log,
      stderr=subprocess.STDOUT, cwd=str(helpers.REPO_ROOT))
  proc.log_path = log_path
  return proc


def _log(proc):
  with open(proc.log_path, encoding="utf-8", errors="replace") as f:
    return f.read()


def _wait_for(proc, ready, what, timeout=180):
  """Polls `ready()` while `proc` runs; fails with its log if it ends or times out first."""
  deadline = time.time() + timeout
  while not ready():
    assert proc.poll() is None, f"the run ended before {what}: exit {proc.returncode}\n" + _log(
        proc)[-3000:]
    assert time.time() < deadline, f"no {what} after {timeout} s\n" + _log(proc)[-3000:]
    time.sleep(0.01)


def _lock_path(out):
  return os.path.join(out, output_lock.LOCK_FILE)


def _assert_intact_checkpoints(out, last_step):
  """Every checkpoint in `out` reads whole; the latest is step `last_step`; no lock is left."""
  latest = tf.train.latest_checkpoint(str(out))
  assert latest and latest.endswith(f"ckpt-{last_step}"), (latest, sorted(os.listdir(out)))
  indexes = glob.glob(os.path.join(out, "ckpt-*.index"))
  assert indexes
  for index in indexes:
    values = helpers.checkpoint_values(index[:-len(".index")])
    assert len(values) > 20, index
  assert not os.path.exists(_lock_path(out))


def _holder_pid(out):
  try:
    with open(_lock_path(out), encoding="utf-8") as f:
      return json.load(f)["pid"]
  except (OSError, ValueError):  # no lock, or one being written
    return None


def _files(out):
  """{path: (inode, size, mtime)} of everything under `out`: what a run changed."""
  found = {}
  for root, _, names in os.walk(out):
    for name in names:
      stat = os.stat(os.path.join(root, name))
      found[os.path.join(root, name)] = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
  return found


def test_one_writer_per_output_dir(pretraining_inputs, tmp_path):
  """Killed -> taken over and resumed; then, while that run works, a second one is refused.

  (One scenario, so that three runs cover both: each run's TensorFlow start-up costs seconds.)
  """
  config, data = pretraining_inputs
  out = tmp_path / "out"
  flags = helpers.pretraining_flags(config, data, out, steps=STEPS, save_every=2)

  # A run killed outright (SIGKILL) after its first checkpoint leaves its lock behind.
  killed = _start(flags, tmp_path / "killed.log")
  try:
    _wait_for(killed, lambda: glob.glob(os.path.join(out, "ckpt-*.index")), "a checkpoint")
  finally:
    killed.kill()
    killed.wait(timeout=60)
  assert _holder_pid(out) == killed.pid

  # The same command again takes the lock over, says so, and resumes.
  resumed = _start(flags, tmp_path / "resumed.log")
  try:
    _wait_for(resumed, lambda: _holder_pid(out) == resumed.pid, "the lock taken over")
    # Hold it still, lock held, so that it surely still runs while a second run starts up
    # (whatever the machine's speed); nothing in `out` may change meanwhile.
    resumed.send_signal(signal.SIGSTOP)
    try:
      before = _files(out)
      # (With its own --seed, which a run records in output_dir: it must not get that far.)
      refused = helpers.run_pretraining(flags + ["--seed=3"])
      after = _files(out)
    finally:
      resumed.send_signal(signal.SIGCONT)
    resumed.wait(timeout=240)
  finally:
    if resumed.poll() is None:
      resumed.kill()

  # The second run: exit 2, one line naming the holder, nothing written.
  assert refused.returncode == 2, refused.stdout[-2000:] + refused.stderr[-3000:]
  error = last_line(refused.stderr)
  assert re.fullmatch(
      rf"error: {re.escape(str(out))} is in use by pid {resumed.pid} on host {re.escape(HOST)} "
      rf"\(started \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC: run_pretraining\.py "
      rf"--albert_config_file=[^;]+\); wait for it to finish, or delete "
      rf"{re.escape(_lock_path(out))} if that process is gone", error), error
  assert "Traceback" not in refused.stderr, refused.stderr[-3000:]
  assert not re.search(r"^step \d", refused.stdout, re.M), refused.stdout
  changed = sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))
  assert not changed, f"the refused run wrote into the output_dir: {changed}"

  # The holder: took over with a note, resumed, finished normally with intact checkpoints.
  log = _log(resumed)
  assert resumed.returncode == 0, log[-3000:]
  assert (f"note: took over the lock of pid {killed.pid} on {HOST}, which is no longer running"
          in log.splitlines()), log[-3000:]
  resumed_at = re.search(r"^Resuming from .*ckpt-(\d+) at step (\d+)", log, re.M)
  assert resumed_at and resumed_at.group(1) == resumed_at.group(2) != "0", log[-3000:]
  assert re.findall(r"^step (\d+)/", log, re.M) == [
      str(step) for step in range(int(resumed_at.group(2)) + 1, STEPS + 1)], log[-3000:]
  _assert_intact_checkpoints(out, STEPS)
