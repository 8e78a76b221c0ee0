"""Distribution: MirroredStrategy (2 logical CPUs) and MultiWorkerMirroredStrategy (2 local
worker processes on 127.0.0.1) agree with one device; a SIGTERM to one worker stops them all
after one and the same step, and the restarted job resumes with nothing lost.

Every multi-device run happens in subprocesses with timeouts, so a hang cannot block CI.
The data give every example the same number of masked positions, so splitting a batch over
replicas/workers changes nothing but float summation order.
"""

import os
import re
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

  # 2. The same command again, both workers: resume from the stop's checkpoint and finish;
  # then evaluate (each worker the whole set of 400 records on its own replica: counted once).
  workers = helpers.start_workers(flags + ["--do_eval=true", "--eval_batch_size=16"],
                                  log_dir=str(logs))
  logs_text = _wait_for_all(workers, 240, "restart hung")
  for p, text in zip(workers, logs_text):
    assert p.returncode == 0, text[-5000:]
  # (the chief prints the results)
  assert re.search(rf"eval at step {STEPS}: .*num_examples = 400\.0000", logs_text[0]), \
      logs_text[0][-2000:]
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


# ------------------------------------------------------------------ a missing or lost worker
@pytest.fixture(scope="module")
def tiny_run_inputs(tmp_path_factory):
  """A tiny config and synthetic pretraining data (no reference run needed)."""
  tmp = tmp_path_factory.mktemp("cluster")
  config = write_tiny_config(tmp / "albert_config.json")
  data = helpers.write_synthetic_pretraining_data(str(tmp / "synthetic.tfrecord"), 400)
  return config, data


def _start_worker(flags, cluster, index, log_path):
  """One run_pretraining.py worker with TF_CONFIG {"cluster": {"worker": cluster}, ...}."""
  import json  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  tf_config = json.dumps({"cluster": {"worker": cluster},
                          "task": {"type": "worker", "index": index}})
  out = open(log_path, "w")  # pylint: disable=consider-using-with
  proc = subprocess.Popen(  # pylint: disable=consider-using-with
      helpers.pretraining_command(flags),
      env=helpers.subprocess_env({"TF_CONFIG": tf_config}), stdout=out,
      stderr=subprocess.STDOUT, cwd=str(helpers.REPO_ROOT))
  proc.log_path = str(log_path)
  return proc


def _first_time(proc, text, timeout):
  """The time.time() at which `text` first appeared in proc's log (polled), else None."""
  found = _wait_for(lambda: text in helpers.read_log(proc), timeout)
  return time.time() if found else None


def _last_line(text):
  lines = [line for line in text.strip().splitlines() if line.strip()]
  return lines[-1] if lines else ""


def test_worker_waiting_for_missing_peer_reports_gives_up_and_stops_on_sigterm(tiny_run_inputs,
                                                                               tmp_path):
  """Peers that never start: a closed port on localhost and the README's `host1:12345`. The
  worker prints what it waits for every 10 s, gives up after --worker_wait_seconds with one
  line (exit 2); a SIGTERM while waiting ends it with one line (exit 42)."""
  import signal  # pylint: disable=g-import-not-at-top
  config, data = tiny_run_inputs
  flags = helpers.pretraining_flags(config, data, tmp_path / "out", STEPS, batch=BATCH,
                                    save_every=SAVE_EVERY)
  closed = [helpers.free_port() for _ in range(3)]  # nobody listens there
  own = [helpers.free_port() for _ in range(3)]
  wait = 12
  procs = [
      # worker 0 of two; worker 1 is a closed port: gives up after `wait` s.
      _start_worker(flags + [f"--output_dir={tmp_path / 'a'}", f"--worker_wait_seconds={wait}"],
                    [f"127.0.0.1:{own[0]}", f"127.0.0.1:{closed[0]}"], 0, tmp_path / "a.log"),
      # worker 1 of two, the default wait; worker 0 never comes: SIGTERM while it waits.
      _start_worker(flags + [f"--output_dir={tmp_path / 'b'}"],
                    [f"127.0.0.1:{closed[1]}", f"127.0.0.1:{own[1]}"], 1, tmp_path / "b.log"),
      # The README's example address of worker 1.
      _start_worker(flags + [f"--output_dir={tmp_path / 'c'}", "--worker_wait_seconds=3"],
                    [f"127.0.0.1:{own[2]}", "host1:12345"], 0, tmp_path / "c.log"),
  ]
  try:
    waiting_a = f"waiting for worker 1 at 127.0.0.1:{closed[0]} (connection refused): "
    first_a = _first_time(procs[0], waiting_a, 120)
    assert first_a, helpers.read_log(procs[0])[-3000:]
    first_b = _first_time(procs[1], f"waiting for worker 0 at 127.0.0.1:{closed[1]}", 120)
    assert first_b, helpers.read_log(procs[1])[-3000:]
    procs[1].send_signal(signal.SIGTERM)
    signalled = time.time()
    procs[1].wait(timeout=30)
    sigterm_s = time.time() - signalled
    gave_up = _first_time(procs[0], "error: gave up", wait + 60)
    assert gave_up, helpers.read_log(procs[0])[-3000:]
    give_up_s = gave_up - first_a
    procs[0].wait(timeout=60)
    exit_s = time.time() - first_a
    procs[2].wait(timeout=60)
  finally:
    texts = _wait_for_all(procs, 60, "waiting workers hung")
  print(f"\nmeasured: SIGTERM while waiting -> exit {sigterm_s:.2f} s; first waiting line -> "
        f"give-up line {give_up_s:.1f} s, exit {exit_s:.1f} s (--worker_wait_seconds={wait})")
  a, b, c = texts
  # Gave up after the wait, with one line; waiting lines every 10 s before it.
  assert procs[0].returncode == 2, a[-3000:]
  assert a.count(waiting_a) >= 2, a[-3000:]
  assert _last_line(a).startswith(
      f"error: gave up after {wait} s waiting for worker 1 at 127.0.0.1:{closed[0]} "
      f"(connection refused) (--worker_wait_seconds={wait})"), a[-3000:]
  # Checked at the first waiting line, which comes within a probe of the start of the wait.
  assert wait - 1 <= give_up_s <= wait + 5, give_up_s
  assert "Traceback" not in a
  # SIGTERM while waiting: one line, exit 42, at once.
  assert procs[1].returncode == 42, b[-3000:]
  assert _last_line(b) == (
      f"stopped by SIGTERM while waiting for worker 0 at 127.0.0.1:{closed[1]}: nothing was "
      f"started; run the same command on every worker to start (exit status 42)"), b[-3000:]
  assert sigterm_s < 10, sigterm_s
  assert "Traceback" not in b
  # The README's TF_CONFIG on a machine that is not host0: named, then given up on.
  assert procs[2].returncode == 2, c[-3000:]
  assert "waiting for worker 1 at host1:12345 (" in c, c[-3000:]
  assert _last_line(c).startswith("error: gave up after 3 s waiting for worker 1 at "
                                  "host1:12345 ("), c[-3000:]
  for name in "abc":  # nothing was started, so nothing was written
    assert not list((tmp_path / name).glob("ckpt-*"))


def _survivor_ends(survivor, lost_index, lost_address, out, timeout=90):
  """Waits for the survivor's exit; asserts its one line. Returns (seconds, checkpoint)."""
  lost = time.time()
  survivor.wait(timeout=timeout)
  seconds = time.time() - lost
  text = helpers.read_log(survivor)
  assert survivor.returncode == 42, text[-4000:]
  last = _last_line(text)
  prefix = f"lost worker {lost_index} ({lost_address}): "
  assert last.startswith(prefix), text[-4000:]
  assert last.endswith("run the same command on every worker to resume (exit status 42)"), last
  checkpoint = last.split("the newest intact checkpoint is ")[1].split(":")[0]
  assert checkpoint.startswith(str(out / "ckpt-")), last
  assert os.path.exists(checkpoint + ".index")
  # The newest intact checkpoint it names is the newest there is.
  steps = sorted(int(p.name[len("ckpt-"):-len(".index")]) for p in out.glob("ckpt-*.index"))
  assert checkpoint == str(out / f"ckpt-{steps[-1]}"), (checkpoint, steps)
  assert "Traceback" not in text
  # Nothing of TensorFlow's or gRPC's before or after the line (its collective errors, the
  # peer's status, the eager context's note): only the run's own lines.
  noise = [line for line in text.splitlines() if _TF_NOISE.search(line)]
  assert not noise, "\n".join(noise[:10])
  return seconds, checkpoint


# TensorFlow's C++ log lines (TSL's and absl's formats) and what their messages carry.
_TF_NOISE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] |^[IWEF]\d{4} \d\d:"
                       r"|GRPC|grpc_|:UNKNOWN:|RPC: /tensorflow|Restart your program to reset"
                       r"|DerivedStatus|\[Op:|tensorflow/core/|^/job:|type\.googleapis\.com"
                       r"|The tasks have crashed")


def test_worker_lost_mid_run_sigkill_sigstop_then_resume(tiny_run_inputs, tmp_path):
  """Worker 1 is SIGKILLed after the first checkpoint: worker 0 exits at once with one line
  naming worker 1 and that checkpoint (exit 42). The same command on both resumes from it;
  worker 0 (the chief) is frozen with SIGSTOP after the next checkpoint: worker 1 exits with
  one line naming worker 0. Restarted once more, they resume and finish."""
  import signal  # pylint: disable=g-import-not-at-top
  config, data = tiny_run_inputs
  out = tmp_path / "out"
  flags = helpers.pretraining_flags(config, data, out, STEPS, batch=BATCH, save_every=SAVE_EVERY)
  logs = tmp_path / "logs"
  logs.mkdir()

  def start(name):
    ports = [helpers.free_port() for _ in range(2)]
    cluster = [f"127.0.0.1:{p}" for p in ports]
    return [_start_worker(flags, cluster, i, logs / f"{name}-{i}.log") for i in range(2)], cluster

  # 1. SIGKILL worker 1 once ckpt-20 exists.
  workers, cluster = start("kill")
  try:
    assert _wait_for((out / f"ckpt-{SAVE_EVERY}.index").exists, 240, workers), "\n".join(
        helpers.read_log(p)[-3000:] for p in workers)
    workers[1].kill()
    kill_s, kept = _survivor_ends(workers[0], 1, cluster[1], out)
  finally:
    _wait_for_all(workers, 60, "kill phase hung")

  # 2. The same command: resumes from the checkpoint the line named; SIGSTOP the chief once
  # the next checkpoint exists.
  workers, cluster = start("stop")
  stopped = None
  try:
    step = int(kept.rsplit("-", 1)[1])
    assert _wait_for(lambda: f"Resuming from {kept} at step {step}" in helpers.read_log(
        workers[0]), 240, workers), helpers.read_log(workers[0])[-3000:]
    # The next checkpoint complete: its index there and the state file naming it (written
    # after the save; a chief frozen halfway through its save leaves that checkpoint unreadable,
    # and the survivor then rightly names the one before).
    next_name = f"ckpt-{step + SAVE_EVERY}"
    state = out / "checkpoint"
    assert _wait_for(lambda: (out / f"{next_name}.index").exists() and state.exists() and (
        f'"{next_name}"' in state.read_text() or f"/{next_name}\"" in state.read_text()),
        240, workers), helpers.read_log(workers[0])[-3000:]
    workers[0].send_signal(signal.SIGSTOP)
    stopped = workers[0]
    stop_s, kept = _survivor_ends(workers[1], 0, cluster[0], out)
  finally:
    if stopped is not None:
      stopped.kill()  # a frozen process takes SIGKILL
    _wait_for_all(workers, 60, "stop phase hung")

  # 3. Both restarted: resume from that checkpoint and finish.
  workers, _ = start("resume")
  texts = _wait_for_all(workers, 240, "resume hung")
  for p, text in zip(workers, texts):
    assert p.returncode == 0, text[-5000:]
  step = int(kept.rsplit("-", 1)[1])
  assert f"Resuming from {kept} at step {step} (input position restored)" in texts[0], \
      texts[0][-3000:]
  assert f"step {STEPS}/{STEPS}" in texts[0]
  assert (out / f"ckpt-{STEPS}.index").exists()
  print(f"\nmeasured: peer lost -> survivor's exit: SIGKILL {kill_s:.1f} s, "
        f"SIGSTOP {stop_s:.1f} s")


def test_peer_lost_names_the_task_from_tensorflows_messages():
  """The lost task is read from the two forms of TensorFlow's error seen in the tests above;
  other errors are left alone."""
  from albert_tf.training import cluster  # pylint: disable=g-import-not-at-top
  config = {"cluster": {"worker": ["h0:1", "h1:2", "h2:3"]}, "task": {"type": "worker",
                                                                      "index": 0}}

  class UnavailableError(Exception):
    pass

  heartbeats = UnavailableError(
      "Collective ops is aborted by: Error reported from /job:worker/task:0: The following "
      "tasks are unhealthy (stopped sending heartbeats):\n/job:worker/replica:0/task:2\nThe "
      "tasks have crashed.")
  line = str(cluster.peer_lost(heartbeats, config, "out/ckpt-20"))
  assert line == ("lost worker 2 (h2:3): it stopped sending heartbeats; the newest intact "
                  "checkpoint is out/ckpt-20: run the same command on every worker to resume "
                  "(exit status 42)")
  reset = UnavailableError(
      "Graph execution error:\n\nCollective ops is aborted by: recvmsg:Connection reset by "
      "peer\nAdditional GRPC error information from remote target /job:worker/replica:0/task:1 "
      "while calling /tensorflow.WorkerService/RecvBuf")
  wrapped = RuntimeError("outer")
  wrapped.__cause__ = reset
  line = str(cluster.peer_lost(wrapped, config, None))
  assert line.startswith("lost worker 1 (h1:2): it stopped answering (Connection reset by "
                         "peer); no checkpoint was saved yet: "), line
  assert cluster.peer_lost(ValueError("Connection reset"), config, None) is None
  assert cluster.peer_lost(UnavailableError("a file system is unavailable"), config,
                           None) is None


_SLOW_CHECKPOINT_SAVES = """
import time
import tensorflow as tf
_save = tf.train.CheckpointManager.save
def _slow_save(self, *args, **kwargs):
  time.sleep(4)
  return _save(self, *args, **kwargs)
tf.train.CheckpointManager.save = _slow_save
"""


def test_multi_worker_classifier_evaluates_and_predicts_each_example_once(tmp_path):
  """run_classifier.py on 2 workers (a client each): each evaluates and predicts the whole set
  on its own replica, and the chief's files count and hold every example once (13 dev, 11 test
  examples; batches of 4 do not divide them); the chief alone exports, and no worker reads a
  checkpoint the chief has not finished writing."""
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  from tests.helpers import finetune  # pylint: disable=g-import-not-at-top
  from tests.helpers.paths import REPO  # pylint: disable=g-import-not-at-top
  job = finetune.mrpc_setup(tmp_path, n_train=8, n_dev=13, n_test=11)
  out = tmp_path / "out"
  flags = ["--task_name=MRPC", f"--data_dir={tmp_path / 'glue'}", f"--output_dir={out}",
           f"--albert_config_file={job['config']}", f"--spm_model_file={job['spm']}",
           "--do_train", "--do_eval", "--do_predict", "--train_batch_size=4",
           "--eval_batch_size=4", "--predict_batch_size=4", "--max_seq_length=32",
           "--train_step=2", "--warmup_step=0", "--save_checkpoints_steps=2", "--seed=1",
           f"--export_dir={tmp_path / 'export'}"]
  # The chief is slow to write its checkpoints (a sitecustomize on its PYTHONPATH sleeps before
  # each CheckpointManager.save), so a worker that does not wait for them finds none to evaluate.
  slow = tmp_path / "slow_chief"
  slow.mkdir()
  (slow / "sitecustomize.py").write_text(_SLOW_CHECKPOINT_SAVES)
  ports = [helpers.free_port() for _ in range(2)]
  envs = [helpers.subprocess_env({"TF_CONFIG": helpers.tf_config(ports, i)}) for i in range(2)]
  envs[0]["PYTHONPATH"] = str(slow) + os.pathsep + envs[0]["PYTHONPATH"]
  procs = [subprocess.Popen(  # pylint: disable=consider-using-with
      [sys.executable, "run_classifier.py"] + flags, cwd=str(REPO), text=True, env=envs[i],
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for i in range(2)]
  try:
    texts = [p.communicate(timeout=300)[0] for p in procs]
  finally:
    for p in procs:
      p.kill()
  for p, text in zip(procs, texts):
    assert p.returncode == 0, "\n---\n".join(t[-3000:] for t in texts)
  results = (out / "eval_results.txt").read_text()
  assert re.search(r"^num_examples = 13$", results, re.M), results
  rows = (out / "test_results.tsv").read_text().splitlines()
  assert len(rows) == 11, rows
  # One SavedModel version: the chief's (two workers writing one export_dir made two, or broke).
  versions = sorted(p.name for p in (tmp_path / "export").iterdir() if p.name.isdigit())
  assert len(versions) == 1, sorted(p.name for p in (tmp_path / "export").iterdir())
