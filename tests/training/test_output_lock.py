"""The output-directory lock (albert_tf/training/output_lock.py) with real processes: a live holder
stops a second one with one line naming it; a dead, zombie or pid-reused holder's lock, or another
host's lock with an old heartbeat, is taken over with a note; racing processes end with exactly one
holder; release happens on exceptions and signal stops and never removes another process's lock;
and the same on a tf.io.gfile filesystem without exclusive create (`ram://`)."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

import pytest

from albert_tf.common import fileio
from albert_tf.errors import AlbertError, StopRequested
from albert_tf.training import output_lock
from tests.helpers.paths import REPO

HOST = socket.gethostname()

# Holds the lock of argv[1] until killed; SIGTERM raises StopRequested as the runner's stop does,
# SIGINT raises KeyboardInterrupt (Python's default).
_HOLDER = """
import signal, sys, time
from albert_tf.errors import StopRequested
from albert_tf.training import output_lock
def stop(signum, frame):
  raise StopRequested("stopped by SIGTERM")
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored
try:
  with output_lock.hold(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
except StopRequested:
  sys.exit(42)
"""

# Waits until wall time argv[2], then tries the lock of argv[1] and holds it for a second.
_RACER = """
import sys, time
from albert_tf.errors import AlbertError
from albert_tf.training import output_lock
while time.time() < float(sys.argv[2]):
  time.sleep(0.001)
try:
  with output_lock.hold(sys.argv[1]):
    print("won", flush=True)
    time.sleep(1.0)
except AlbertError as e:
  print("lost:", e, flush=True)
"""


def _python(script, *args):
  """`python -c script args` in the background (stdout and stderr piped)."""
  return subprocess.Popen(  # pylint: disable=consider-using-with
      [sys.executable, "-c", script] + [str(a) for a in args],
      env=dict(os.environ, PYTHONPATH=REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
      text=True)


def _start_holder(output_dir):
  proc = _python(_HOLDER, output_dir)
  line = proc.stdout.readline()
  assert line == "held\n", line + proc.stderr.read()
  return proc


def _lock_file(output_dir):
  return os.path.join(output_dir, output_lock.LOCK_FILE)


def _read_lock(output_dir):
  with open(_lock_file(output_dir), encoding="utf-8") as f:
    return json.load(f)


def _record(**fields):
  """A lock record as this process would write it, with `fields` changed (another holder)."""
  return dict(output_lock._new_record(), **fields)  # pylint: disable=protected-access


def _write_lock(path, **fields):
  """Writes `_record(**fields)` to `path`; returns it."""
  record = _record(**fields)
  # Staged under a name of its own, as another process's writer would: fileio's temporary name
  # is this process's, which the holder's heartbeat thread may be using at the same moment.
  staged = f"{path}.other-writer"
  fileio.write_json(staged, record)
  fileio.replace(staged, path)
  return record


def _in_use_pattern(output_dir, pid, host, lock_path=None, heartbeat=""):
  """The one-line error of a refused run (`heartbeat`: a pattern of the seconds since another
  host's holder refreshed its lock)."""
  lock_path = lock_path or _lock_file(output_dir)
  heartbeat = f"; last heartbeat {heartbeat} s ago" if heartbeat else ""
  return (rf"^{re.escape(str(output_dir))} is in use by pid {pid} on host {re.escape(host)} "
          rf"\(started \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC: [^;]+{heartbeat}\); wait for it to "
          rf"finish, or delete {re.escape(lock_path)} if that process is gone$")


@pytest.fixture
def fast_lock(monkeypatch):
  """Heartbeats every 0.1 s and short read retries, so tests of them take a moment."""
  monkeypatch.setattr(output_lock, "HEARTBEAT_SECONDS", 0.1)
  monkeypatch.setattr(output_lock, "_READ_RETRY_SECONDS", 0.01)
  monkeypatch.setattr(output_lock, "OBJECT_STORE_SETTLE_SECONDS", 0.05)


# ----------------------------------------------------------------------------- a live holder
# (An uncaught KeyboardInterrupt ends Python by SIGINT itself: returncode -SIGINT.)
@pytest.mark.parametrize("stop_signal, exit_code", [(signal.SIGTERM, 42),
                                                    (signal.SIGINT, -signal.SIGINT)])
def test_live_holder_refuses_a_second_run_and_releases_on_a_signal_stop(tmp_path, stop_signal,
                                                                        exit_code):
  out = tmp_path / "out"
  holder = _start_holder(out)
  try:
    held = _read_lock(out)
    with pytest.raises(AlbertError) as refused:
      with output_lock.hold(out):
        pytest.fail("a second holder got the lock")
    message = str(refused.value)
    assert "\n" not in message
    assert re.match(_in_use_pattern(out, holder.pid, HOST), message), message
    assert f": -c {out})" in message  # the holder's command line
    assert _read_lock(out) == held  # the refused run left the holder's lock alone
  finally:
    holder.send_signal(stop_signal)
    _, stderr = holder.communicate(timeout=30)
  # StopRequested (SIGTERM, as the runner raises it) and KeyboardInterrupt (SIGINT) both release.
  assert holder.returncode == exit_code, stderr
  assert not os.path.exists(_lock_file(out)), stderr
  with output_lock.hold(out):  # and the directory is free again, without a takeover note
    pass


@pytest.mark.parametrize("error", [ValueError("boom"), StopRequested("stopped")])
def test_release_on_exceptions(tmp_path, error):
  with pytest.raises(type(error)):
    with output_lock.hold(tmp_path):
      assert os.path.exists(_lock_file(tmp_path))
      raise error
  assert not os.path.exists(_lock_file(tmp_path))


def test_disabled_lock_neither_writes_nor_checks(tmp_path):
  """Workers under MultiWorkerMirroredStrategy share the chief's directory (enabled=False)."""
  with output_lock.hold(tmp_path) as chief:
    with output_lock.hold(tmp_path, enabled=False) as worker:
      assert worker is None
      assert _read_lock(tmp_path)["token"] == chief.record["token"]


# ----------------------------------------------------------------------------- stale locks
@pytest.mark.parametrize("reap", [True, False], ids=["dead", "zombie"])
def test_lock_of_a_killed_process_is_taken_over_with_a_note(tmp_path, capsys, reap):
  out = tmp_path / "out"
  holder = _start_holder(out)
  holder.kill()
  if reap:
    holder.communicate(timeout=30)
  else:  # killed but not yet waited for by its parent: a zombie, which runs no more
    while output_lock._process_stat(holder.pid)[0] != "Z":  # pylint: disable=protected-access
      time.sleep(0.01)
  try:
    stale = _read_lock(out)
    assert stale["pid"] == holder.pid  # SIGKILL left the lock behind
    with output_lock.hold(out) as lock:
      assert _read_lock(out)["token"] == lock.record["token"] != stale["token"]
      assert _read_lock(out)["pid"] == os.getpid()
  finally:
    holder.communicate(timeout=30)
  stdout = capsys.readouterr().out
  assert stdout.splitlines() == [f"note: took over the lock of pid {holder.pid} on {HOST}, "
                                 f"which is no longer running"], stdout
  assert sorted(os.listdir(out)) == []  # nothing moved aside or left behind


def test_pid_reuse_guard(tmp_path, capsys):
  """A lock naming a running pid whose process started at another time: the pid was reused."""
  own_start = output_lock._process_stat(os.getpid())[1]  # pylint: disable=protected-access
  _write_lock(_lock_file(tmp_path), pid=os.getpid(), process_start=str(int(own_start) - 1))
  with output_lock.hold(tmp_path):
    pass
  assert capsys.readouterr().out == (f"note: took over the lock of pid {os.getpid()} on {HOST}, "
                                     f"which is no longer running (pid {os.getpid()} is now "
                                     f"another process)\n")
  # The same pid with its true start time is the live holder.
  _write_lock(_lock_file(tmp_path), pid=os.getpid(), process_start=own_start)
  with pytest.raises(AlbertError, match=_in_use_pattern(tmp_path, os.getpid(), HOST)):
    with output_lock.hold(tmp_path):
      pass
  assert _read_lock(tmp_path)["process_start"] == own_start


@pytest.mark.parametrize("age, taken_over", [(600, True), (5, False)])
def test_other_host_lock_is_stale_only_when_its_heartbeat_is_old(tmp_path, capsys, age,
                                                                 taken_over):
  now = time.time()
  # Another host's pids mean nothing here: pid 1 runs on every Linux machine.
  theirs = _write_lock(_lock_file(tmp_path), host="h1", boot_id="another-boot", pid=1,
                       started=now - 3600, heartbeat=now - age)
  if taken_over:
    with output_lock.hold(tmp_path) as lock:
      assert _read_lock(tmp_path)["token"] == lock.record["token"]
    note = capsys.readouterr().out.strip()
    assert re.fullmatch(r"note: took over the lock of pid 1 on h1, whose last heartbeat was "
                        r"60\d s ago \(stale after 180 s\)", note), note
    assert not os.path.exists(_lock_file(tmp_path))
  else:
    with pytest.raises(AlbertError) as refused:
      with output_lock.hold(tmp_path):
        pass
    assert re.match(_in_use_pattern(tmp_path, 1, "h1", heartbeat="[5-9]"),
                    str(refused.value)), str(refused.value)
    assert _read_lock(tmp_path) == theirs


@pytest.mark.usefixtures("fast_lock")
def test_unreadable_lock_is_an_error_not_a_takeover(tmp_path):
  with open(_lock_file(tmp_path), "w", encoding="utf-8") as f:
    f.write("checkpoint data?")
  with pytest.raises(AlbertError, match=rf"^{re.escape(str(tmp_path))}: its lock file "
                     rf"{re.escape(_lock_file(tmp_path))} is unreadable \(not a lock record.*\); "
                     rf"delete it if no other run is using"):
    with output_lock.hold(tmp_path):
      pass
  with open(_lock_file(tmp_path), encoding="utf-8") as f:
    assert f.read() == "checkpoint data?"


# ----------------------------------------------------------------------------- races
def test_racing_processes_end_with_exactly_one_holder(tmp_path):
  """Racers that all find the same dead holder's lock: they race to move it aside, then to
  create theirs (O_EXCL)."""
  out = tmp_path / "out"
  out.mkdir()
  dead = _python("pass")
  dead.communicate(timeout=30)
  _write_lock(_lock_file(out), pid=dead.pid, process_start="1")
  start = time.time() + 1.0  # after every racer has started
  racers = [_python(_RACER, out, start) for _ in range(4)]
  results = [racer.communicate(timeout=60) for racer in racers]
  outputs = [stdout for stdout, _ in results]
  winners = [i for i, stdout in enumerate(outputs) if "won" in stdout]
  assert len(winners) == 1, results
  winner_pid = racers[winners[0]].pid
  for i, stdout in enumerate(outputs):
    if i != winners[0]:
      assert re.search(rf"lost: .* in use by pid {winner_pid} on host", stdout), results
  assert os.listdir(out) == []


def test_takeover_keeps_a_lock_that_replaced_the_stale_one(tmp_path, monkeypatch):
  """Another run takes over the stale lock between this run's judging it and moving it aside:
  this run must put that live lock back and stop, not remove it."""
  dead = _python("pass")
  dead.communicate(timeout=30)
  _write_lock(_lock_file(tmp_path), pid=dead.pid, process_start="1")
  live_start = output_lock._process_stat(os.getpid())[1]  # pylint: disable=protected-access
  why_gone = output_lock._why_gone  # pylint: disable=protected-access
  rival = {}

  def judged_then_taken_over(record):
    reason = why_gone(record)
    if reason and not rival:  # the rival (alive: this very process) wins the takeover now
      rival.update(_write_lock(_lock_file(tmp_path), pid=os.getpid(), process_start=live_start))
    return reason

  monkeypatch.setattr(output_lock, "_why_gone", judged_then_taken_over)
  with pytest.raises(AlbertError, match=_in_use_pattern(tmp_path, os.getpid(), HOST)):
    with output_lock.hold(tmp_path):
      pytest.fail("took over a live lock")
  assert _read_lock(tmp_path) == rival
  assert os.listdir(tmp_path) == [output_lock.LOCK_FILE]  # nothing left aside


# ----------------------------------------------------------------------------- heartbeat
@pytest.mark.usefixtures("fast_lock")
def test_heartbeat_is_refreshed_while_held(tmp_path):
  with output_lock.hold(tmp_path) as lock:
    first = _read_lock(tmp_path)
    time.sleep(0.5)
    later = _read_lock(tmp_path)
    assert later["token"] == first["token"] == lock.record["token"]
    assert later["heartbeat"] > first["heartbeat"] + 0.2
    assert later["started"] == first["started"]
  assert os.listdir(tmp_path) == []  # no lock, and no temporary file of a rewrite, left


@pytest.mark.usefixtures("fast_lock")
def test_release_never_removes_another_process_lock(tmp_path, capsys):
  with output_lock.hold(tmp_path) as lock:
    # Right after a heartbeat (so that none is between its check and its rewrite), another host
    # that judged this run stale takes the lock over.
    while _read_lock(tmp_path)["heartbeat"] == lock.record["started"]:
      time.sleep(0.001)
    theirs = _write_lock(_lock_file(tmp_path), host="h2", boot_id="b2", pid=77)
    time.sleep(0.4)  # heartbeats: they must see it is not ours and leave it alone
    assert _read_lock(tmp_path) == theirs
  assert _read_lock(tmp_path) == theirs
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith(
      f"warning: this run no longer holds the lock of {tmp_path} (it is now held by pid 77 on "
      f"host h2 ("), err


# ----------------------------------------------------------------------------- object stores
@pytest.mark.usefixtures("fast_lock")
def test_object_store_lock(capsys):
  """ram:// (TensorFlow's in-memory filesystem): no O_EXCL there, write-wait-read back instead."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  out = f"ram://{uuid.uuid4().hex}/out"
  path = f"{out}/{output_lock.LOCK_FILE}"
  with output_lock.hold(out) as lock:
    assert fileio.read_json(path)["token"] == lock.record["token"]
    with pytest.raises(AlbertError, match=_in_use_pattern(out, os.getpid(), HOST)):
      with output_lock.hold(out):
        pass
    time.sleep(0.3)
    assert fileio.read_json(path)["heartbeat"] > lock.record["started"]
  assert not tf.io.gfile.exists(path)
  assert tf.io.gfile.listdir(out) == []

  # Another host's stale lock is taken over.
  _write_lock(path, host="h3", boot_id="b3", heartbeat=time.time() - 1000)
  with output_lock.hold(out):
    pass
  assert capsys.readouterr().out.startswith("note: took over the lock of pid ")
  assert not tf.io.gfile.exists(path)


@pytest.mark.usefixtures("fast_lock")
def test_object_store_race_lost_after_writing(monkeypatch):
  """A run that wrote last holds the lock: the first writer reads it back, stops with the error
  naming it, and leaves its lock in place."""
  out = f"ram://{uuid.uuid4().hex}/out"
  path = f"{out}/{output_lock.LOCK_FILE}"
  rival = _record(host="h4", boot_id="b4", pid=4242)
  write_json = fileio.write_json

  def write_then_rival_writes(target, value, **kwargs):
    write_json(target, value, **kwargs)
    write_json(target, rival)  # within our settle time

  monkeypatch.setattr(output_lock.fileio, "write_json", write_then_rival_writes)
  with pytest.raises(AlbertError, match=_in_use_pattern(out, 4242, "h4", path, heartbeat="0")):
    with output_lock.hold(out):
      pytest.fail("both runs hold the lock")
  monkeypatch.undo()
  assert fileio.read_json(path) == rival


def test_object_store_threads_racing_end_with_one_holder(monkeypatch):
  """Two runs (threads here) taking the lock of one ram:// directory at the same moment: exactly
  one holds it, the other stops with the error naming it."""
  monkeypatch.setattr(output_lock, "OBJECT_STORE_SETTLE_SECONDS", 0.5)
  out = f"ram://{uuid.uuid4().hex}/out"
  start = threading.Barrier(2)
  locks, errors = [], []

  def take():
    lock = output_lock.OutputLock(out)
    start.wait()
    try:
      lock.acquire()
      locks.append(lock)
    except AlbertError as e:
      errors.append(str(e))

  threads = [threading.Thread(target=take) for _ in range(2)]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  try:
    assert len(locks) == 1 and len(errors) == 1, (locks, errors)
    assert re.match(_in_use_pattern(out, os.getpid(), HOST), errors[0]), errors[0]
    assert fileio.read_json(_lock_file(out))["token"] == locks[0].record["token"]
  finally:
    for lock in locks:
      lock.release()
  assert not fileio.exists(_lock_file(out))


def test_object_store_holder_whose_lock_was_taken_is_refused_at_its_next_write(monkeypatch,
                                                                               capsys):
  """The run-id marker checked before every save: once another run's record replaced this run's
  lock on ram://, this run's next atomic write stops with one line and writes nothing."""
  monkeypatch.setattr(output_lock, "OBJECT_STORE_SETTLE_SECONDS", 0.05)
  out = f"ram://{uuid.uuid4().hex}/out"
  path = _lock_file(out)
  result = f"{out}/eval_results.txt"
  with pytest.raises(AlbertError) as refused:
    with output_lock.hold(out):
      fileio.write_text(result, "ours")  # still ours: written
      theirs = _write_lock(path, host="h2", boot_id="b2", pid=77)
      fileio.write_text(result, "overwritten by the run that lost its lock")
  message = str(refused.value)
  assert "\n" not in message
  assert re.match(rf"^{re.escape(out)}: this run no longer holds its lock {re.escape(path)} "
                  rf"\(it is now held by pid 77 on host h2 \(started [^;]+; last heartbeat "
                  rf"\d+ s ago\)\); stopped before writing, so as not to overwrite that run's "
                  rf"files$", message), message
  assert fileio.read_text(result) == "ours"
  assert fileio.read_json(path) == theirs  # the winner's lock is left alone
  assert [name for name in fileio.listdir(out) if "tmp" in name] == []
  assert capsys.readouterr().err == ""  # the error says it all: no second warning
  # Released: no check is left behind for this process's later writes.
  fileio.write_text(result, "a later run")


def test_object_store_holder_whose_lock_was_taken_saves_no_checkpoint(monkeypatch):
  """The same marker at a training checkpoint save: nothing of ckpt-<step> (neither the input
  position nor the model) is written once another run holds the directory."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.training import checkpointing  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(output_lock, "OBJECT_STORE_SETTLE_SECONDS", 0.05)
  out = f"ram://{uuid.uuid4().hex}/out"
  checkpoint = tf.train.Checkpoint(weights=tf.Variable([1.0, 2.0]))
  with pytest.raises(AlbertError, match="no longer holds its lock"):
    with output_lock.hold(out):
      saves = checkpointing.TrainingCheckpoints(out, checkpoint, {"batch": 1})
      saves.restore(lambda: 0)
      assert saves.save(1) == f"{out}/ckpt-1"  # still ours: saved
      _write_lock(_lock_file(out), host="h2", boot_id="b2", pid=77)
      saves.save(2)
  names = [name for _, _, files in fileio.walk(out) for name in files]
  assert any(name.startswith("ckpt-1") for name in names)
  assert not any(name.startswith("ckpt-2") for name in names), names
