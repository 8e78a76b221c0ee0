"""Joining a MultiWorkerMirroredStrategy cluster, and leaving it when a peer is lost: one line.

TensorFlow's own waits here cannot be watched from Python: creating the strategy blocks in C++
(holding the GIL, so no Python thread runs and no Python signal handler) until every task has
registered with the coordination service, for over 9 minutes and ignoring SIGTERM when a peer
never comes. So a worker joins in two phases:

  1. `wait_for_peers` (plain Python): this worker listens on its own TF_CONFIG port (so its
     peers see it) and opens a TCP connection to every peer's address, every
     `PROBE_EVERY_S`, until all answer. Every `REPORT_EVERY_S` it prints which task, at which
     address, it waits for and why (connection refused, unknown host, timed out). A SIGTERM or
     SIGINT ends it with one line (exit status 42); after `wait_seconds` (--worker_wait_seconds)
     it gives up with one `error:` line (exit status 2).
  2. `join_guard` around the strategy's creation: once every address answered, TensorFlow's
     registration takes seconds. If a peer vanishes in between, a watchdog process prints one
     line and ends this process with exit status 42 after the rest of the wait (at least
     `JOIN_MIN_S`).

Mid-run, TensorFlow's coordination service notices a dead (SIGKILL), frozen (SIGSTOP) or
unreachable peer within its heartbeat timeout (10 s) and aborts the collective ops; the error
that surfaces is turned by `peer_lost` into one line naming the lost task, the newest intact
checkpoint and "run the same command on every worker to resume" (exit status 42).
"""

import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from albert_tf.errors import EXIT_STOPPED_BY_SIGNAL, AlbertError, StopRequested

# --worker_wait_seconds's default: long enough for a preempted VM to come back.
DEFAULT_WAIT_S = 600
# How often the peers' addresses are tried, and how often the waiting line is printed.
PROBE_EVERY_S = 0.5
REPORT_EVERY_S = 10
PROBE_TIMEOUT_S = 2
# The least time allowed for TensorFlow's registration once every address answered.
JOIN_MIN_S = 30

# Only these jobs take part in MultiWorkerMirroredStrategy's collectives.
_COLLECTIVE_JOBS = ("chief", "worker")


class ClusterStopped(StopRequested):
  """The cluster cannot go on (a peer was lost, or a signal came while waiting for one); the
  message says what is kept and how to resume. The script prints it as its last line."""

  last_words = True


# ------------------------------------------------------------------------------ addresses
def _split(address):
  host, _, port = address.rpartition(":")
  return host.strip("[]"), int(port)


def tasks(tf_config):
  """[(job, index, "host:port")] of the tasks that take part in the collectives, chief first."""
  cluster = tf_config.get("cluster") or {}
  return [(job, i, address) for job in _COLLECTIVE_JOBS for i, address in
          enumerate(cluster.get(job) or [])]


def describe_task(tf_config, job, index):
  """`worker 1 (host1:12345)`, or `worker 1` when TF_CONFIG does not list it."""
  addresses = ((tf_config or {}).get("cluster") or {}).get(job) or []
  where = f" ({addresses[index]})" if 0 <= index < len(addresses) else ""
  return f"{job} {index}{where}"


def _probe(address):
  """None when a TCP connection to `address` opens, else why not (a few words)."""
  try:
    host, port = _split(address)
    socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S).close()
    return None
  except socket.gaierror as e:
    return f"unknown host: {e.strerror}"
  except socket.timeout:
    return "no answer: timed out"
  except OSError as e:
    return (e.strerror or str(e)).lower()


def _listen(address, what):
  """A listening socket on this task's own port (all interfaces, as TensorFlow's server)."""
  _, port = _split(address)
  try:
    if socket.has_dualstack_ipv6():
      server = socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True,
                                    reuse_port=False)
    else:
      server = socket.create_server(("", port))
  except OSError as e:
    raise AlbertError(f"TF_CONFIG: this process is {what}, but port {port} is not free here "
                      f"({(e.strerror or str(e)).lower()}): another process uses it") from None
  server.setblocking(False)
  return server


def _drain(server):
  """Accepts the peers' probes and resets them at once (no TIME_WAIT left on our port)."""
  while True:
    try:
      conn, _ = server.accept()
    except (BlockingIOError, InterruptedError):
      return
    except OSError:
      return
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    conn.close()


# ------------------------------------------------------------------------------ phase 1
class _Signals:
  """SIGTERM/SIGINT raise ClusterStopped (main thread only) while waiting."""

  def __init__(self, waiting_for):
    self.waiting_for = waiting_for
    self._previous = {}

  def _handle(self, signum, frame):
    del frame
    raise ClusterStopped(
        f"stopped by {signal.Signals(signum).name} while waiting for {self.waiting_for()}: "
        f"nothing was started; run the same command on every worker to start (exit status "
        f"{EXIT_STOPPED_BY_SIGNAL})", EXIT_STOPPED_BY_SIGNAL)

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      for sig in (signal.SIGTERM, signal.SIGINT):
        self._previous[sig] = signal.signal(sig, self._handle)
    return self

  def __exit__(self, *exc_info):
    for sig, previous in self._previous.items():
      signal.signal(sig, previous)
    return False


def wait_for_peers(tf_config, wait_seconds=DEFAULT_WAIT_S, report=None, clock=time.monotonic):
  """Waits until every other collective task's TF_CONFIG address accepts a TCP connection.

  Args:
    tf_config: the parsed, checked TF_CONFIG (`strategy.read_tf_config`).
    wait_seconds: give up after this long (--worker_wait_seconds).
    report: callable printing one line (default: stderr).
  Returns:
    The seconds left of `wait_seconds`.
  Raises:
    AlbertError: a peer did not answer within `wait_seconds` (exit status 2), or this task's
      own port is taken.
    ClusterStopped: SIGTERM/SIGINT while waiting (exit status 42).
  """
  report = report or (lambda line: print(line, file=sys.stderr, flush=True))
  task = tf_config.get("task") or {}
  me = (task.get("type"), int(task.get("index", 0)))
  everyone = tasks(tf_config)
  mine = [address for job, i, address in everyone if (job, i) == me]
  peers = [(job, i, address) for job, i, address in everyone if (job, i) != me]
  start = clock()
  if not peers or me[0] not in _COLLECTIVE_JOBS:  # an evaluator joins no collective
    return wait_seconds
  server = _listen(mine[0], f"{me[0]} {me[1]} ({mine[0]})") if mine else None
  missing = {}  # (job, index, address) -> why it did not answer
  waiting_for = lambda: "; ".join(f"{job} {i} at {address}" for job, i, address in missing) \
      or "the other workers"
  next_report = start
  try:
    with _Signals(waiting_for):
      pending = list(peers)
      while True:
        if server is not None:
          _drain(server)
        missing = {peer: why for peer in pending if (why := _probe(peer[2])) is not None}
        pending = list(missing)
        if not pending:
          return max(0.0, wait_seconds - (clock() - start))
        waited = clock() - start
        if waited >= wait_seconds:
          raise AlbertError(
              f"gave up after {waited:.0f} s waiting for " + "; ".join(
                  f"{job} {i} at {address} ({why})" for (job, i, address), why in
                  missing.items()) +
              f" (--worker_wait_seconds={wait_seconds:g}): start the same command on every "
              f"worker of TF_CONFIG, and check its addresses")
        if clock() >= next_report:
          report(f"waiting for " + "; ".join(
              f"{job} {i} at {address} ({why})" for (job, i, address), why in missing.items())
                 + f": {waited:.0f} of {wait_seconds:g} s (--worker_wait_seconds)")
          next_report += REPORT_EVERY_S
        time.sleep(min(PROBE_EVERY_S, max(0.0, wait_seconds - waited)))
  finally:
    if server is not None:
      server.close()


# ------------------------------------------------------------------------------ phase 2
# The watchdog: a separate process, since TensorFlow holds the GIL while it waits. At the
# deadline it prints the line and sends the signal whose handler is `_exit` (see join_guard).
_WATCHDOG = r"""
import os, select, sys
pid, seconds, signum, message = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ready, _, _ = select.select([0], [], [], seconds)
if not ready:
  os.write(2, message.encode("utf-8", "replace") + b"\n")
  os.kill(pid, signum)
"""

# A real-time signal numbered as the exit status it ends the process with (its handler is the
# C library's _exit, which takes the signal number as its argument).
_JOIN_TIMEOUT_SIGNAL = EXIT_STOPPED_BY_SIGNAL


class join_guard:  # pylint: disable=invalid-name
  """Bounds TensorFlow's registration (the `with` block) to `seconds`.

  Past it, a watchdog process prints `message` and ends this process with exit status 42: the
  only way out of a C++ wait that holds the GIL is a signal whose handler is `_exit`. Where
  that cannot be set up (no real-time signals), the block runs unguarded.
  """

  def __init__(self, seconds, message):
    self.seconds = seconds
    self.message = message
    self._watchdog = None
    self._previous = None

  def __enter__(self):
    if not hasattr(signal, "SIGRTMIN") or not (
        signal.SIGRTMIN <= _JOIN_TIMEOUT_SIGNAL <= signal.SIGRTMAX):
      return self
    try:
      libc = ctypes.CDLL(None, use_errno=True)
      libc.signal.restype = ctypes.c_void_p
      libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
      self._previous = libc.signal(_JOIN_TIMEOUT_SIGNAL, ctypes.cast(libc._exit,  # pylint: disable=protected-access
                                                                     ctypes.c_void_p))
      self._libc = libc
      for stream in (sys.stdout, sys.stderr):
        stream.flush()
      self._watchdog = subprocess.Popen(  # pylint: disable=consider-using-with
          [sys.executable, "-S", "-c", _WATCHDOG, str(os.getpid()), str(self.seconds),
           str(_JOIN_TIMEOUT_SIGNAL), self.message], stdin=subprocess.PIPE)
    except (OSError, AttributeError, ValueError):
      self._watchdog = None
    return self

  def __exit__(self, *exc_info):
    if self._watchdog is not None:
      self._watchdog.stdin.close()  # the watchdog's select returns: it exits quietly
      self._watchdog.wait()
      self._libc.signal(_JOIN_TIMEOUT_SIGNAL, self._previous)
    return False


def join(tf_config, wait_seconds, create, report=None):
  """Phase 1 then phase 2 (see the module docstring); returns `create()` (the strategy)."""
  left = wait_for_peers(tf_config, wait_seconds, report)
  seconds = max(left, JOIN_MIN_S)
  task = tf_config.get("task") or {}
  me = f"{task.get('type')} {task.get('index')}"
  message = (f"gave up joining the cluster as {me}: every address answered, but not every "
             f"worker registered within {seconds:.0f} s (a worker stopped or restarted in "
             f"between?); run the same command on every worker (exit status "
             f"{EXIT_STOPPED_BY_SIGNAL})")
  # A signal during TensorFlow's wait is handled once it returns (the handler cannot run before).
  with _Signals(lambda: "the other workers to register"), join_guard(seconds, message):
    return create()


# ------------------------------------------------------------------------------ mid-run
_TASK = re.compile(r"/job:(\w+)/(?:replica:\d+/)?task:(\d+)")
_ABORTED = re.compile(r"Collective ops is aborted by: ?(.*)")
_PEER_ERROR_TYPES = ("UnavailableError", "AbortedError", "CancelledError",
                     "DeadlineExceededError", "InternalError", "UnknownError",
                     "FailedPreconditionError")
_PEER_WORDS = ("Collective ops is aborted", "unhealthy", "stopped sending heartbeats",
               "CoordinationService", "coordination service", "Connection reset",
               "failed to connect to all addresses", "Socket closed", "heartbeat")


def _lost_task(text, tf_config, me):
  """(job, index) of the peer the error names, else the only other task, else None."""
  unhealthy = text.split("unhealthy", 1)
  candidates = _TASK.findall(unhealthy[1] if len(unhealthy) > 1 else text)
  for job, index in candidates:
    if (job, int(index)) != me:
      return job, int(index)
  others = [(job, i) for job, i, _ in tasks(tf_config or {}) if (job, i) != me]
  return others[0] if len(others) == 1 else None


def _reason(text):
  if "stopped sending heartbeats" in text or "unhealthy" in text:
    return "it stopped sending heartbeats"
  match = _ABORTED.search(text)
  reason = (match.group(1) if match else text).strip().splitlines()
  reason = reason[0].strip() if reason else ""
  reason = reason.split("recvmsg:")[-1].strip() or "no answer"
  return f"it stopped answering ({reason[:120]})"


def peer_lost(error, tf_config, checkpoint):
  """The ClusterStopped for an error TensorFlow raised because a peer was lost, else None.

  Args:
    error: the exception (its causes are looked at too).
    tf_config: the parsed TF_CONFIG (names the tasks' addresses).
    checkpoint: the newest intact checkpoint (a prefix) or None.
  """
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    text = str(getattr(error, "message", None) or error)
    if type(error).__name__ in _PEER_ERROR_TYPES and any(w in text for w in _PEER_WORDS):
      task = (tf_config or {}).get("task") or {}
      me = (task.get("type"), int(task.get("index", 0)))
      lost = _lost_task(text, tf_config, me)
      who = describe_task(tf_config, *lost) if lost else "a peer"
      kept = (f"the newest intact checkpoint is {checkpoint}" if checkpoint else
              "no checkpoint was saved yet")
      return ClusterStopped(
          f"lost {who}: {_reason(text)}; {kept}: run the same command on every worker to "
          f"resume (exit status {EXIT_STOPPED_BY_SIGNAL})", EXIT_STOPPED_BY_SIGNAL)
    error = error.__cause__ or error.__context__
  return None
