"""SIGTERM and SIGINT as requests to stop cleanly: finish the step, save, say how to resume.

Preemptible VMs, Kubernetes and Slurm send SIGTERM and allow a grace period (often 30 s) before
SIGKILL; a user sends SIGINT with Ctrl-C. Python's default turns the first into an immediate death
(every step since the last checkpoint lost) and the second into a KeyboardInterrupt traceback.

`StopSignals` (installed by the runner for a whole run) changes that:

  * While the trainer's loop runs (`training()`), a signal only raises a flag. A watcher thread,
    woken by the signal through `signal.set_wakeup_fd` even while the main thread is inside a
    long TensorFlow call, sets the tf.Variable `stop_flag`; the compiled train loop reads it
    every step and stops after the step it is in. Under MultiWorkerMirroredStrategy the flag
    travels with the gradients' all-reduce, so every worker stops after the same step (and saves
    its share of the checkpoint) although only one was signalled; no extra collective is run.
    The trainer then saves the checkpoint (weights, optimizer, input position) and raises
    `StopRequested`; the script prints its one line and exits with
    `errors.EXIT_STOPPED_BY_SIGNAL` (42). The same command resumes at that step.
  * Outside the loop (reading data, evaluating, predicting: all of whose outputs are written
    atomically) a signal raises `StopRequested` at once.
  * While an export is written (`deferred()`), a signal is recorded and `StopRequested` raised
    at the next atomic write's commit (fileio.commit_check), which abandons the version. Raised
    at once, inside TensorFlow's tracing, it came out of C code as a SystemError whose
    traceback TensorFlow printed.
  * A second SIGINT while the save is under way exits at once without saving.

On TPUs the loop runs on the device and cannot read a host flag; there the stop comes at the end
of the current `--iterations_per_loop` steps.
"""

import contextlib
import os
import signal
import threading
import time

from albert_tf.common import fileio
from albert_tf.errors import EXIT_STOPPED_BY_SIGNAL, StopRequested, end_with_last_line

HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
  """Catches SIGTERM/SIGINT for the duration of a `with` block (main thread only; elsewhere a
  no-op that never reports a signal).

  Attributes:
    received: the name of the first signal received ("SIGTERM", "SIGINT") or None.
    stop_flag: a scalar int32 tf.Variable, 1 once a signal arrived while `training()` is active
      (created by `make_stop_flag`, read inside the compiled train loop).
  """

  def __init__(self, outside_loop=None):
    """outside_loop: what the line of a stop outside the train loop says after "stopped by
    <signal>: " (what is kept, how to go on); default: the runner's."""
    self._outside_loop = outside_loop or (
        "everything finished before it is kept (checkpoints and result files are written "
        "whole); run the same command again to continue")
    self.received = None
    self.stop_flag = None
    self._training = False
    self._deferred = False
    self._previous = {}
    self._wakeup_fds = None
    self._watcher = None
    self._installed = False
    self._lock = threading.Lock()

  # ------------------------------------------------------------------ install / remove
  def __enter__(self):
    if threading.current_thread() is not threading.main_thread():
      return self
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    self._wakeup_fds = (read_fd, write_fd)
    for sig in HANDLED_SIGNALS:
      self._previous[sig] = signal.signal(sig, self._handle_in_main_thread)
    self._previous_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    self._watcher = threading.Thread(target=self._watch, name="albert_tf-stop-signals",
                                     daemon=True)
    self._watcher.start()
    self._installed = True
    return self

  def __exit__(self, *exc_info):
    if not self._installed:
      return False
    signal.set_wakeup_fd(self._previous_wakeup)
    for sig, previous in self._previous.items():
      signal.signal(sig, previous)
    read_fd, write_fd = self._wakeup_fds
    os.close(write_fd)  # ends the watcher's read
    self._watcher.join(timeout=5)
    os.close(read_fd)
    self._installed = False
    return False

  # ------------------------------------------------------------------ what the trainer uses
  def make_stop_flag(self):
    """The tf.Variable the train loop reads; create it outside any strategy scope (on the host)."""
    import tensorflow as tf  # lazy: export_savedmodel.py holds StopSignals around --help
    if self.stop_flag is None:
      self.stop_flag = tf.Variable(0, dtype=tf.int32, trainable=False, name="stop_requested")
    return self.stop_flag

  @contextlib.contextmanager
  def training(self):
    """While active, a signal only raises the stop flag: the loop stops after its step, and the
    trainer saves before it raises StopRequested. A second SIGINT exits at once."""
    self._training = True
    try:
      if self.received:
        self._raise_flag()
      yield self
    finally:
      self._training = False

  @contextlib.contextmanager
  def deferred(self):
    """While active, a signal is only recorded; StopRequested is raised before the next atomic
    write is committed, or when the block ends. A second SIGINT exits at once."""
    def stop_before_commit():
      if self.received:
        raise self.stop_requested()
    self._deferred = True
    try:
      with fileio.commit_check(stop_before_commit):
        yield self
    finally:
      self._deferred = False
    stop_before_commit()

  @property
  def requested(self):
    return self.received is not None

  def stopped_message(self, what):
    """The line a run prints when it stops after a signal; `what` says what was kept."""
    return (f"stopped by {self.received or 'a signal on another worker'}: {what}; run the same "
            f"command again to resume (exit status {EXIT_STOPPED_BY_SIGNAL})")

  # ------------------------------------------------------------------ signal plumbing
  def _raise_flag(self):
    if self.stop_flag is not None:
      self.stop_flag.assign(1)

  def _watch(self):
    """Runs in a daemon thread; the wakeup fd carries one byte per signal, delivered even while
    the main thread is inside a long TensorFlow call."""
    read_fd = self._wakeup_fds[0]
    while True:
      try:
        data = os.read(read_fd, 16)
      except OSError:
        return
      if not data:
        return
      for signum in data:
        if signum in _HANDLED_NUMBERS:
          self._count(signal.Signals(signum).name)

  def _count(self, name):
    with self._lock:
      first = self.received is None
      if first:
        self.received = name
    if self._training or self._deferred:
      if not first and name == "SIGINT":
        os.write(2, b"interrupted again: stopped without saving; the last complete checkpoint "
                    b"is kept\n")
        os._exit(130)  # pylint: disable=protected-access
      if self._training:
        self._raise_flag()

  def _handle_in_main_thread(self, signum, frame):
    """Python's handler (main thread, between bytecodes): raises outside the train loop."""
    del frame
    if self._training:
      return  # the watcher raised the flag; the loop stops after its step and saves
    if self._deferred:  # recorded; raised at the next commit (deferred())
      if self.received is None:
        self.received = signal.Signals(signum).name
      return
    # Recorded here too, not only by the watcher, for stop_requested() right after. No lock: a
    # second signal re-entering this handler while it held one would wait for ever.
    if self.received is None:
      self.received = signal.Signals(signum).name
    raise self.stop_requested()

  def stop_requested(self):
    """The StopRequested of a signal outside the train loop (what was kept, exit status 42).

    The runner also raises it when another exception ends a step after a signal: the handler's
    StopRequested, raised between two bytecodes of Python code that C code called back (inside
    TensorFlow's tracing, nest.flatten), can come out of that C code as another exception."""
    return StopRequested(
        f"stopped by {self.received or 'a signal'}: {self._outside_loop} (exit status "
        f"{EXIT_STOPPED_BY_SIGNAL})", EXIT_STOPPED_BY_SIGNAL)


_HANDLED_NUMBERS = frozenset(int(s) for s in HANDLED_SIGNALS)


# How long a command's main thread has to act on a signal before the watcher ends the process.
EXIT_AT_ONCE_AFTER_S = 2.0


class StopCommand(StopSignals):
  """SIGTERM/SIGINT for a command that writes its files whole (the converter, build_corpus,
  train_spm, make_pair_task): one line, exit status 42, none of its temporaries left, and
  before it starts, none of those that killed runs left.

  The signal raises StopRequested in the main thread, so each atomic write (fileio.atomic_path)
  removes its temporary on the way out. A main thread inside a long C++ call (SentencePiece
  training, a TensorFlow save) cannot run the handler until the call returns: if it has not
  within `grace_s`, the watcher thread removes this process's temporaries and ends the process
  with the line. A second signal ends it at once the same way.

  Args:
    locations: [(directory, names)] where the command writes; `names` (or None: any name)
      limits which entries are its temporaries (fileio.remove_temporaries).
    grace_s: see above.
  """

  def __init__(self, locations=(), grace_s=EXIT_AT_ONCE_AFTER_S):
    self._kept = ("its files are written whole or not at all, and none of its temporaries is "
                  "left; run the same command again")
    super().__init__(outside_loop=self._kept)
    self._locations = list(locations)
    self._grace_s = grace_s
    self._main_stopping = False
    self._exiting = False  # the watcher is ending the process (decided under _decide)
    self._decide = threading.Lock()
    self._signals_seen = 0

  def __enter__(self):
    for directory, names in self._locations:  # what runs killed half-way left
      fileio.remove_temporaries(directory, names)
    return super().__enter__()

  def message(self, name):
    return f"stopped by {name}: {self._kept} (exit status {EXIT_STOPPED_BY_SIGNAL})"

  def _count(self, name):
    super()._count(name)
    self._signals_seen += 1
    if self._signals_seen > 1:
      self._exit_now(name)
    threading.Thread(target=self._exit_if_stuck, args=(name,), daemon=True,
                     name="albert_tf-stop-command").start()

  def _handle_in_main_thread(self, signum, frame):
    with self._decide:
      exiting = self._exiting
      self._main_stopping = not exiting
    if exiting:  # the watcher prints the one line and ends the process: wait for it
      threading.Event().wait()
    super()._handle_in_main_thread(signum, frame)

  def _exit_if_stuck(self, name):
    deadline = time.monotonic() + self._grace_s
    while time.monotonic() < deadline:
      if self._main_stopping:
        return  # the main thread raised StopRequested: its atomic writes clean up
      time.sleep(0.01)
    with self._decide:
      if self._main_stopping:
        return
      self._exiting = True
    self._exit_now(name)

  def _exit_now(self, name):
    self._exiting = True
    for directory, names in self._locations:
      fileio.remove_temporaries(directory, names, of_pid=os.getpid())
    end_with_last_line(self.message(name), EXIT_STOPPED_BY_SIGNAL)
