"""StopSignals with real signals, in subprocesses: outside the train loop a SIGTERM/SIGINT is a
StopRequested at once (exit 42, one line); inside it only raises the loop's flag, even while the
main thread is busy; a second Ctrl-C there exits at once (130)."""

import subprocess
import sys

from tests.helpers.paths import REPO

_PRELUDE = """
import os, signal, sys, time
sys.path.insert(0, %r)
from albert_tf.errors import StopRequested
from albert_tf.training import preemption
""" % REPO


def _run(body, timeout=120):
  return subprocess.run([sys.executable, "-c", _PRELUDE + body], capture_output=True, text=True,
                        timeout=timeout, check=False)


def test_outside_the_loop_a_signal_stops_at_once_with_one_line():
  for name in ("SIGTERM", "SIGINT"):
    proc = _run(f"""
with preemption.StopSignals():
  try:
    os.kill(os.getpid(), signal.{name})
    time.sleep(30)
    print("not stopped")
  except StopRequested as e:
    print(e.exit_code, e)
""")
    assert proc.returncode == 0, proc.stderr
    code, message = proc.stdout.strip().split(" ", 1)
    assert code == "42" and message.startswith(f"stopped by {name}: "), proc.stdout
    assert "run the same command again" in message and "\n" not in message


def test_inside_the_loop_a_signal_raises_the_flag_while_the_main_thread_is_busy():
  # The main thread never runs Python's handler in between: only the watcher thread can see it.
  proc = _run("""
import threading
with preemption.StopSignals() as signals:
  flag = signals.make_stop_flag()
  with signals.training():
    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
    deadline = time.time() + 20
    while int(flag.numpy()) == 0 and time.time() < deadline:
      sum(range(10000))  # busy, as inside a long step
    print("flag", int(flag.numpy()), signals.received)
print("handlers restored", signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
""")
  assert proc.returncode == 0, proc.stderr
  assert "flag 1 SIGTERM" in proc.stdout and "handlers restored True" in proc.stdout, proc.stdout


def test_a_second_ctrl_c_in_the_loop_exits_at_once_without_saving():
  proc = _run("""
with preemption.StopSignals() as signals:
  flag = signals.make_stop_flag()
  with signals.training():
    os.kill(os.getpid(), signal.SIGINT)
    while int(flag.numpy()) == 0:
      time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(20)
    print("not stopped")
""")
  assert proc.returncode == 130, (proc.returncode, proc.stdout, proc.stderr)
  assert "not stopped" not in proc.stdout
  assert proc.stderr.strip().splitlines()[-1] == (
      "interrupted again: stopped without saving; the last complete checkpoint is kept")


def test_a_signal_before_the_loop_is_seen_when_it_starts():
  proc = _run("""
with preemption.StopSignals() as signals:
  flag = signals.make_stop_flag()
  signals.received = "SIGTERM"  # as the watcher records a signal that came during set-up
  with signals.training():
    print("flag", int(flag.numpy()))
""")
  assert proc.returncode == 0 and "flag 1" in proc.stdout, proc.stdout + proc.stderr


def test_only_the_main_thread_installs_handlers():
  proc = _run("""
import threading
def other():
  with preemption.StopSignals() as signals:
    print("installed", signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL)
threading.Thread(target=other).start()
""")
  assert proc.returncode == 0 and "installed False" in proc.stdout, proc.stdout + proc.stderr


def test_while_deferred_a_signal_abandons_the_next_atomic_write_not_the_code_running():
  """The export step: the signal is recorded, the code it arrives in goes on (no exception out
  of TensorFlow's C code), and the next atomic write is abandoned with StopRequested."""
  proc = _run(f"""
import tempfile
from albert_tf.common import fileio
root = tempfile.mkdtemp()
with preemption.StopSignals() as stops:
  try:
    with stops.deferred():
      os.kill(os.getpid(), signal.SIGTERM)
      time.sleep(0.5)
      print("went on", stops.received)
      fileio.write_text(os.path.join(root, "version.txt"), "whole")
      print("committed")
  except StopRequested as e:
    print(e.exit_code, e)
print(sorted(os.listdir(root)))
# After the block, a signal stops at once again.
with preemption.StopSignals() as stops:
  with stops.deferred():
    pass
  try:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
  except StopRequested as e:
    print("at once", e.exit_code)
""")
  assert proc.returncode == 0, proc.stderr
  lines = proc.stdout.strip().splitlines()
  assert lines[0] == "went on SIGTERM", proc.stdout
  assert lines[1].startswith("42 stopped by SIGTERM: "), proc.stdout
  assert lines[2] == "[]", proc.stdout  # neither the file nor its temporary
  assert lines[3] == "at once 42", proc.stdout
