"""What a script prints: its own progress lines, results and errors, not TensorFlow's log noise.

`quiet_startup()` runs first thing in every script, before TensorFlow is imported (TensorFlow's
C++ logging level is read once, at import). It sets TF_CPP_MIN_LOG_LEVEL=3 unless the user set
it, and routes file descriptor 2 through a filter process that drops TensorFlow's C++ log lines:
the TF_CPP_MIN_LOG_LEVEL setting does not reach the parts of TensorFlow that log through absl
(XLA's CUDA probing on machines with the CUDA driver but no GPU, the TFLite converter), nor the
lines of a user who set it to 2. It also hides Python warnings and matplotlib's font-cache
notice. `quiet_after_flags()` (called by `errors.run_main` once flags are parsed) hides
TensorFlow's Python logger (autograph, SavedModel and checkpoint notices) and prints the
script's own log lines plainly (`warning: ...` for warnings).

Everything comes back with `--verbosity=N` / `-v N` (absl's flag) or the environment variable
ALBERT_TF_VERBOSE=1.
"""

import atexit
import logging
import os
import re
import select
import signal
import sys
import threading
import time
import warnings

VERBOSE_ENV = "ALBERT_TF_VERBOSE"

# A line TensorFlow's C++ code logs. absl's format (XLA, the TFLite converter; "0000 00:00:<epoch>"
# before absl::InitializeLog) from a C++ file (absl's Python logging writes the same format from
# .py files: those lines stay), TSL's format (the rest of TensorFlow), and absl's pre-init
# notice. Fatal lines (F...) are not matched: they say why the process is about to abort.
TENSORFLOW_LOG_LINE = re.compile(
    rb"[IWE]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+(?<!\.py):\d+\] "
    rb"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWE] "
    rb"|WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR")

# Lines that continue the TensorFlow log line just before them (blank lines among them): the
# CPU-feature notice, and what a multi-worker run's errors carry when a peer is lost (gRPC's
# status, in its old `:{"created":...}` and new `:UNKNOWN:Error received from peer` forms, the
# RPC that failed, the coordination service's list of crashed tasks, one `/job:...` line per
# task, and the eager context's note on asynchronous errors). A line carrying a status payload
# (`[type.googleapis.com/tensorflow.<Payload>=...]`) continues one too, whatever its start.
_CONTINUATIONS = (b"To enable the following instructions:",
                  b"Additional GRPC error information from remote target",
                  b":UNKNOWN:", b":{\"created\"", b"RPC: /tensorflow.", b"/job:",
                  b"The tasks have crashed.",
                  b"The error could be from a previous operation.")
_STATUS_PAYLOAD = b"[type.googleapis.com/tensorflow."

# How long an unfinished line that could still become a TensorFlow log line is held back.
# TensorFlow writes each line with one write(), so a line still unfinished after this is ours
# (a prompt, a progress bar) and is passed on.
_HOLD_S = 0.05

# Set (to the pipe's device:inode) once fd 2 goes through a filter: child processes that inherit
# that fd (subprocesses, multiprocessing workers re-running a script's top) need no second one.
_FILTERED_ENV = "_ALBERT_TF_STDERR_FILTER"

# The filter this process installed: {"pid": filter pid, "stderr": the original fd 2 (a dup),
# "owner": this process's pid}.
_filter = {}


def verbose_requested(argv=None):
  """True when the user asked for TensorFlow's logs (env var or absl's --verbosity / -v)."""
  if os.environ.get(VERBOSE_ENV, "").strip() not in ("", "0"):
    return True
  for arg in (sys.argv if argv is None else argv)[1:]:
    if arg.startswith(("--verbosity", "-v")) and not arg.startswith("--verbosity=0"):
      return True
  return False


def quiet_startup(argv=None):
  """Before TensorFlow is imported: silence its C++ logs and Python warnings (unless verbose),
  and point tf.keras at tf_keras."""
  # Our models are tf_keras models. Without this, `import tensorflow` also imports Keras 3 (and
  # through it scikit-learn), about 1.3 s of every script's start that nothing uses.
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
  if verbose_requested(argv):
    return
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  # gRPC's own C-core logging (a multi-worker run's connection errors while peers exit).
  os.environ.setdefault("GRPC_VERBOSITY", "NONE")
  warnings.filterwarnings("ignore")
  logging.getLogger("matplotlib").setLevel(logging.ERROR)
  filter_tensorflow_logs()


# ------------------------------------------------------------------------ the stderr filter
class _LineFilter:
  """Feeds bytes in, writes what is not a TensorFlow log line out, line by line.

  Args:
    write: callable taking bytes (the original stderr).
  """

  def __init__(self, write):
    self._write = write
    self._pending = b""  # the start of a line not yet decided
    self._keep_line = None  # the current line's decision, once made (True/False)
    self._dropped = False  # whether the previous complete line was dropped

  def _keep(self, line):
    if TENSORFLOW_LOG_LINE.match(line):
      return False
    return not (self._dropped and (not line.strip() or line.startswith(_CONTINUATIONS)
                                   or _STATUS_PAYLOAD in line))

  def _may_be_dropped(self, partial):
    """False once an unfinished line can no longer turn into a line `_keep` drops."""
    starts = [b"WARNING: All log messages before absl::InitializeLog()"]
    if self._dropped:
      starts += _CONTINUATIONS
    return (len(partial) < 200 and partial[:1] in b"IWE0123456789") or any(
        start.startswith(partial[:len(start)]) for start in starts)

  def feed(self, data):
    lines = (self._pending + data).split(b"\n")
    self._pending = b""
    for line in lines[:-1]:
      keep = self._keep(line) if self._keep_line is None else self._keep_line
      if keep:
        self._write(line + b"\n")
      self._dropped, self._keep_line = not keep, None
    partial = lines[-1]
    if partial and self._keep_line is None:
      if TENSORFLOW_LOG_LINE.match(partial):
        self._keep_line = False
      elif not self._may_be_dropped(partial):
        self._keep_line = True
    if self._keep_line is None:
      self._pending = partial
    elif self._keep_line and partial:
      self._write(partial)

  @property
  def holding(self):
    return bool(self._pending)

  def release(self):
    """Passes on the held unfinished line (it sat too long to be a TensorFlow log line)."""
    if self._pending:
      self._keep_line = self._keep(self._pending)
      if self._keep_line:
        self._write(self._pending)
      self._pending = b""


def _write_all(fd, data):
  while data:
    data = data[os.write(fd, data):]


def _run_filter(source, sink):
  """The filter process's loop: `source` (the pipe) to `sink` (the original stderr) until EOF."""
  state = {"sink": sink}

  def write(data):
    if state["sink"] is not None:
      try:
        _write_all(state["sink"], data)
      except OSError:  # the reader went away: keep draining so the script never blocks
        state["sink"] = None

  lines = _LineFilter(write)
  while True:
    ready, _, _ = select.select([source], [], [], _HOLD_S if lines.holding else None)
    if not ready:
      lines.release()
      continue
    data = os.read(source, 1 << 16)
    if not data:
      break
    lines.feed(data)
  lines.release()


def _start_filter_process(read_fd, write_fd, stderr_copy):
  """Forks the filter; returns its pid in the parent (the child never returns)."""
  # Ctrl-C and `kill` of the process group are for the script: the filter ignores them (from
  # its first instant, hence set before the fork) and ends when the last writer closes the pipe,
  # after passing on everything written (also after the script crashed).
  handlers = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
  pid = None
  try:
    pid = os.fork()
  finally:
    if pid != 0:  # the script (also when the fork failed)
      for sig, handler in handlers.items():
        signal.signal(sig, handler)
  if pid:
    return pid
  try:
    os.close(write_fd)
    # Only the pipe (0) and the original stderr (1) stay open: a copy of the script's stdout
    # held here would keep a reader of it waiting for EOF.
    os.dup2(read_fd, 0)
    os.dup2(stderr_copy, 1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.closerange(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024)
    try:
      _run_filter(0, 1)
    except Exception:  # pylint: disable=broad-except
      # Never leave the script writing into a pipe nobody reads: copy the rest as it is.
      while data := os.read(0, 1 << 16):
        _write_all(1, data)
  finally:
    os._exit(0)  # pylint: disable=protected-access


def _fd_identity(fd):
  try:
    stat = os.fstat(fd)
  except OSError:
    return None
  return f"{stat.st_dev}:{stat.st_ino}"


def filter_tensorflow_logs():
  """Routes fd 2 through a filter process that drops TensorFlow's C++ log lines.

  Everything else (tracebacks, fatal lines, our own lines) passes unchanged as it is written;
  what was written before a crash still comes out. Does nothing where os.fork is missing, when
  fd 2 is already filtered, or once TensorFlow (or another thread) runs in this process (a fork
  is only safe in a single-threaded process).
  """
  if (not hasattr(os, "fork") or _filter or "tensorflow" in sys.modules or
      threading.active_count() > 1):
    return
  current = _fd_identity(2)
  if current is None or os.environ.get(_FILTERED_ENV) == current:
    return
  for stream in (sys.stdout, sys.stderr):
    if stream is not None:
      stream.flush()
  read_fd, write_fd = os.pipe()
  stderr_copy = os.dup(2)  # not inheritable: subprocesses write to the pipe
  try:
    pid = _start_filter_process(read_fd, write_fd, stderr_copy)
  except OSError:
    for fd in (read_fd, write_fd, stderr_copy):
      os.close(fd)
    return
  os.close(read_fd)
  os.dup2(write_fd, 2)
  os.close(write_fd)
  os.environ[_FILTERED_ENV] = _fd_identity(2)
  _filter.update(pid=pid, stderr=stderr_copy, owner=os.getpid())
  atexit.register(finish_filter)


def finish_filter(timeout_s=2.0, restore=True):
  """At exit (atexit, or before an os._exit): hands fd 2 back and waits (briefly) until the
  filter has written everything, so the script's last lines come before the shell's prompt.
  With `restore=False` the caller has already pointed fd 2 elsewhere (and closed its copies of
  the pipe): only the wait."""
  if not _filter or _filter["owner"] != os.getpid():
    return
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (AttributeError, OSError, ValueError):
      pass
  if restore:
    os.dup2(_filter["stderr"], 2)  # closes our end of the pipe
  os.environ.pop(_FILTERED_ENV, None)
  deadline = time.monotonic() + timeout_s  # a subprocess still running may hold the pipe open
  while time.monotonic() < deadline:
    try:
      pid, _ = os.waitpid(_filter["pid"], os.WNOHANG)
    except ChildProcessError:
      break
    if pid:
      break
    time.sleep(0.005)
  _filter.clear()


# ------------------------------------------------------------------------ after flag parsing
class _PlainFormatter(logging.Formatter):
  """`message` for info lines, `warning: message` / `error: message` above."""

  def format(self, record):
    message = record.getMessage()
    if record.levelno >= logging.WARNING:
      return f"{record.levelname.lower()}: {message}"
    return message


# Log records from files under this directory (the package and the scripts beside it) are ours.
_OUR_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class _OursOnly(logging.Filter):
  """Lets through our own records, and errors from anywhere (TensorFlow also logs via absl)."""

  def filter(self, record):
    return record.levelno >= logging.ERROR or os.path.abspath(
        record.pathname).startswith(_OUR_ROOT) and "site-packages" not in record.pathname


def quiet_after_flags():
  """After flag parsing: TensorFlow's Python logger to errors only; our lines printed plainly."""
  if verbose_requested():
    return
  logging.getLogger("tensorflow").setLevel(logging.ERROR)
  try:
    from absl import logging as absl_logging  # lazy: absl flags; `import albert_tf` loads console
    handler = absl_logging.get_absl_handler()
    handler.setFormatter(_PlainFormatter())
    handler.addFilter(_OursOnly())
  except ImportError:
    pass
  if "tensorflow" in sys.modules:
    sys.modules["tensorflow"].autograph.set_verbosity(0)
