"""One writer per output directory: a lock file that stops a second run on the same --output_dir.

Two trainings writing one output_dir corrupt it (a checkpoint written half by each, interleaved
checkpoint series). `hold(output_dir)` holds `<output_dir>/albert_tf.lock` for the length of a
run; a second run that would write there stops with a one-line AlbertError naming the holder:

  error: /x/out is in use by pid 4242 on host h1 (started 2026-11-24 06:10:02 UTC:
  run_classifier.py --task_name=MNLI ...); wait for it to finish, or delete
  /x/out/albert_tf.lock if that process is gone

The lock file is a small JSON record of its holder: host name, boot id and PID namespace (which
together say "same machine"), pid and the process's start time, when the run took the lock, its
command line, a random token and a heartbeat time. It exists only while a run holds it: the
holder removes it when leaving `hold` - a normal exit, an exception, or a SIGTERM/SIGINT stop
(StopRequested and KeyboardInterrupt go through the context manager like any exception) - and
only if the file still carries the holder's own token, so a release never deletes another
process's lock. A process killed outright (SIGKILL, the OOM killer, a power loss) leaves its
lock behind; the next run decides whether that holder is gone, and if so takes the lock over and
says so on one line (`note: took over the lock of pid 4242 on h1, which is no longer running`).

What is guaranteed, by where output_dir is:

* Local filesystems (and NFS, which honours O_EXCL): the lock is created with
  O_CREAT|O_EXCL, so of any number of runs starting at once exactly one wins. (An object store
  mounted as a local path, e.g. gcsfuse, gives only the exclusivity its mount gives.)
* Whether a found lock's holder is alive, same machine: the holder is alive while its pid runs
  and that process started at the recorded time (field 22 of /proc/<pid>/stat; a different start
  time means the pid was reused, a zombie counts as gone). Without /proc, a running pid counts as
  alive, and a pid reused by an unrelated process keeps the lock until the user deletes it.
* Another machine (or a container with its own PID namespace), where pids mean nothing: the
  holder rewrites its heartbeat every HEARTBEAT_SECONDS (30 s, from a daemon thread, by an atomic
  rewrite) and a lock whose heartbeat is older than STALE_AFTER_SECONDS (3 min) is stale. This
  assumes the machines' clocks agree to well within that bound (NTP) and a live holder is never
  stalled longer than that (a suspended process, a frozen VM): a holder that resumes to find its
  lock taken over prints a warning that two runs now write the directory and stops refreshing.
* Taking over a stale lock on a local filesystem: the stale file is moved aside by an atomic
  rename and checked to be the very record judged stale before the new lock is created with
  O_EXCL, so runs taking over the same stale lock at once still end with one holder. (One
  narrower window remains: a run that finds it moved a fresh lock instead puts it back, and a
  third run creating its lock in the microseconds between would also hold; the heartbeat of the
  one whose lock was lost then warns.)
* Object stores (gs:// and any other tf.io.gfile filesystem) have no exclusive create: a run
  writes its record (an object write is atomic: readers see a whole record), waits
  OBJECT_STORE_SETTLE_SECONDS (2 s), reads the lock back and holds it only if its own token is
  there; otherwise it stops with the error naming the run whose record it read. Two runs can both
  win only if one of them wrote its record more than those 2 s after it saw no lock (or a stale
  one), i.e. a run stalled between the check and the write; that is the race window.
* Object stores, while holding: the record's token is the run's marker, checked before every
  save. Every atomic write of the process (`fileio.atomic_path`: result files, caches, export
  versions, and at each checkpoint save the input signature written before the model's files;
  `fileio.commit_check` is the hook) first reads the lock back, and a run whose token is no
  longer there (another run
  took the directory over: the race above, or a stale-looking holder that was only stalled)
  stops with a one-line AlbertError instead of overwriting the winner's files:

    error: gs://b/out: this run no longer holds its lock gs://b/out/albert_tf.lock (it is now
    held by pid 77 on host h2 (...)); stopped before writing, so as not to overwrite that run's
    files

  What remains: the check and the commit are two steps, so a takeover landing between them (the
  time of one object read plus the commit's copy) still lets that one write land; writes that
  are not atomic writes (TensorFlow's own checkpoint shards, TensorBoard events) are covered
  only through the atomic write that precedes them; and the loser notices at its next atomic
  write, not at once. Local locks are not checked this way (O_EXCL already keeps one holder;
  the heartbeat warns in the narrow takeover window above).

A run whose lock turns out to be unreadable (not a record of ours) is stopped with an error
asking the user to delete the file, never silently taken over.
"""

import contextlib
import functools
import json
import os
import shlex
import socket
import sys
import threading
import time
import uuid

from albert_tf.common import fileio, output_layout
from albert_tf.errors import AlbertError

LOCK_FILE = output_layout.LOCK_FILE
HEARTBEAT_SECONDS = 30.0
STALE_AFTER_SECONDS = 180.0
OBJECT_STORE_SETTLE_SECONDS = 2.0

# A lock being created with O_EXCL is empty for an instant: read again before calling it broken.
_READ_ATTEMPTS = 5
_READ_RETRY_SECONDS = 0.2
# Moving a stale lock aside can collide with other runs doing the same; each collision means
# another run made progress (took the lock, or moved the stale one), so a few rounds settle it.
_TAKEOVER_ROUNDS = 5
_COMMAND_CHARS = 300


@contextlib.contextmanager
def hold(output_dir, enabled=True):
  """Holds the lock of `output_dir` for the block (a no-op with enabled=False).

  Under MultiWorkerMirroredStrategy only the chief takes the lock (enabled=is_chief): the workers
  share the directory legitimately.

  Yields:
    the OutputLock held, or None when not enabled.
  Raises:
    AlbertError: another live run holds the lock (the message names it), or the lock file is
      unreadable.
  """
  if not enabled:
    yield None
    return
  lock = OutputLock(output_dir)
  lock.acquire()
  try:
    yield lock
  finally:
    lock.release()


class OutputLock:
  """The lock of one output directory, as held by this process (see the module docstring)."""

  def __init__(self, output_dir):
    self.output_dir = os.fspath(output_dir)
    self.path = os.path.join(self.output_dir, LOCK_FILE)
    self.record = None  # ours, once acquired
    self._lost_warned = False
    self._stop = threading.Event()
    self._heartbeat = None
    self._commit_checks = contextlib.ExitStack()  # the marker check while held on an object store

  # ---------------------------------------------------------------------- acquire / release
  def acquire(self):
    """Takes the lock (taking over a stale one); raises AlbertError if a live run holds it."""
    fileio.makedirs(self.output_dir)
    self.record = _new_record()
    if fileio.is_local(self.path):
      taken_over = self._acquire_local()
    else:
      taken_over = self._acquire_object_store()
    if taken_over:
      stale, reason = taken_over
      print(f"note: took over the lock of pid {stale['pid']} on {_one_line(stale['host'])}, "
            f"{reason}", flush=True)
    if not fileio.is_local(self.path):
      self._commit_checks.enter_context(fileio.commit_check(self.check_still_held))
    self._heartbeat = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                       name=f"{LOCK_FILE} heartbeat")
    self._heartbeat.start()

  def check_still_held(self):
    """Raises AlbertError unless the lock file still carries this run's token: run before every
    atomic write is committed while the lock is held on an object store (see the docstring)."""
    current = self._read_holder()
    if current is not None and current["token"] == self.record["token"]:
      return
    self._lost_warned = True  # the error says it: release adds no warning
    who = f"it is now held by {_describe(current)}" if current else "its lock file is gone"
    raise AlbertError(f"{self.output_dir}: this run no longer holds its lock {self.path} "
                      f"({who}); stopped before writing, so as not to overwrite that run's files")

  def release(self):
    """Removes the lock if it is still ours; never raises (it runs while a run unwinds)."""
    self._commit_checks.close()
    self._stop.set()
    if self._heartbeat is not None:
      self._heartbeat.join(timeout=HEARTBEAT_SECONDS)
    try:
      current = self._read_holder()
      if current is not None and current["token"] == self.record["token"]:
        fileio.remove(self.path)
      elif not self._lost_warned:
        self._warn_lost(current)
    except Exception as e:  # pylint: disable=broad-except
      print(f"warning: could not remove the lock {self.path} ({_one_line(e)}); delete it "
            f"before the next run on {self.output_dir}", file=sys.stderr, flush=True)

  def _acquire_local(self):
    """O_EXCL create; a stale lock is moved aside first. Returns (stale record, why) or None."""
    taken_over = None
    for _ in range(_TAKEOVER_ROUNDS):
      if _create_exclusive(self.path, _encode(self.record)):
        return taken_over
      holder = self._read_holder()
      if holder is None:  # released between our create and our read
        continue
      reason = _why_gone(holder)
      if reason is None:
        raise self._in_use(holder)
      if self._move_aside(holder):
        taken_over = (holder, reason)
    raise AlbertError(f"{self.output_dir}: could not take its lock {self.path}: other runs kept "
                      f"taking it over at the same time; try again")

  def _move_aside(self, stale):
    """Removes the lock file if it is still the `stale` record; True if this call removed it."""
    aside = f"{self.path}.stale-{self.record['token']}"
    try:
      os.rename(self.path, aside)
    except FileNotFoundError:  # another run moved it first
      return False
    moved = _read_record_or_none(aside)
    if moved is None or moved["token"] != stale["token"]:
      # Another run replaced the stale lock between our read and our rename: that lock is live,
      # put it back (the same file, so a record still being written into it lands there).
      os.replace(aside, self.path)
      return False
    os.remove(aside)
    return True

  def _acquire_object_store(self):
    """Write, wait, read back (no exclusive create on object stores). Returns as _acquire_local."""
    holder = self._read_holder()
    reason = None
    if holder is not None:
      reason = _why_gone(holder)
      if reason is None:
        raise self._in_use(holder)
    fileio.write_json(self.path, self.record, indent=2)
    time.sleep(OBJECT_STORE_SETTLE_SECONDS)
    winner = self._read_holder()
    if winner is None:
      raise AlbertError(f"{self.output_dir}: its lock {self.path} vanished right after this run "
                        f"wrote it; another run is starting there, try again")
    if winner["token"] != self.record["token"]:
      raise self._in_use(winner)  # a run that wrote after us: it holds the lock, we never did
    return (holder, reason) if holder is not None else None

  # ---------------------------------------------------------------------- heartbeat
  def _heartbeat_loop(self):
    failing = False
    while not self._stop.wait(HEARTBEAT_SECONDS):
      try:
        current = self._read_holder()
        if current is None or current["token"] != self.record["token"]:
          self._warn_lost(current)
          return
        self.record["heartbeat"] = time.time()
        fileio.write_json(self.path, self.record, indent=2)
        failing = False
      except Exception as e:  # pylint: disable=broad-except
        # E.g. a transient object-store error: the next beat tries again (3 min of slack).
        if not failing:
          print(f"warning: could not refresh the lock {self.path} ({_one_line(e)}); retrying",
                file=sys.stderr, flush=True)
        failing = True

  def _warn_lost(self, current):
    self._lost_warned = True
    who = f"it is now held by {_describe(current)}" if current else "its lock file is gone"
    print(f"warning: this run no longer holds the lock of {self.output_dir} ({who}); two runs "
          f"may be writing it: stop one of them", file=sys.stderr, flush=True)

  # ---------------------------------------------------------------------- reading the lock
  def _read_holder(self):
    """The record in the lock file; None if there is none. Raises AlbertError if unreadable."""
    problem = None
    for attempt in range(_READ_ATTEMPTS):
      if attempt:
        time.sleep(_READ_RETRY_SECONDS)
      try:
        return _read_record(self.path)
      except _Unreadable as e:
        problem = str(e)
      except Exception as e:  # pylint: disable=broad-except
        # FileNotFoundError / tf.errors.NotFoundError when it was just released.
        if not fileio.exists(self.path):
          return None
        problem = _one_line(e)
    raise AlbertError(f"{self.output_dir}: its lock file {self.path} is unreadable ({problem}); "
                      f"delete it if no other run is using {self.output_dir}")

  def _in_use(self, holder):
    return AlbertError(f"{self.output_dir} is in use by {_describe(holder)}; wait for it to "
                       f"finish, or delete {self.path} if that process is gone")


# -------------------------------------------------------------------------- lock records
class _Unreadable(Exception):
  """The lock file does not hold a lock record (yet)."""


@functools.lru_cache(maxsize=None)
def _machine():
  """What identifies this machine and PID namespace: pids are comparable only within them."""
  return {"host": socket.gethostname(),
          "boot_id": _read_or_none(lambda: _read_text("/proc/sys/kernel/random/boot_id")),
          "pid_namespace": _read_or_none(lambda: os.readlink("/proc/self/ns/pid"))}


def _same_machine(record):
  """True if `record` was written on this machine, in this PID namespace."""
  return all(record.get(key) == value for key, value in _machine().items())


def _read_text(path):
  with open(path, encoding="ascii") as f:
    return f.read().strip()


def _read_or_none(read_fn):
  try:
    return read_fn()
  except OSError:  # no /proc (macOS)
    return None


def _process_stat(pid):
  """(state, start time in clock ticks after boot) of a process from /proc; None if no entry."""
  try:
    with open(f"/proc/{pid}/stat", "rb") as f:
      text = f.read().decode("ascii", "replace")
  except OSError:
    return None
  fields = text[text.rindex(")") + 2:].split()  # the name (field 2) may hold spaces and ")"
  return fields[0], fields[19]  # fields 3 and 22


def _new_record():
  now = time.time()
  own = _process_stat(os.getpid())
  return dict(_machine(), pid=os.getpid(), process_start=own[1] if own else None,
              started=now, heartbeat=now, command=_command_line(), token=uuid.uuid4().hex)


def _command_line():
  argv = list(getattr(sys, "argv", None) or ["python"])
  argv[0] = os.path.basename(argv[0]) or argv[0]
  text = " ".join(shlex.quote(arg) for arg in argv)
  return text if len(text) <= _COMMAND_CHARS else text[:_COMMAND_CHARS - 3] + "..."


def _encode(record):
  return json.dumps(record, indent=2).encode("utf-8")


_FIELD_TYPES = {"host": str, "pid": int, "token": str, "started": (int, float),
                "heartbeat": (int, float)}


def _read_record(path):
  """The validated record in `path`; _Unreadable if it holds something else."""
  try:
    record = fileio.read_json(path)
  except (ValueError, UnicodeDecodeError) as e:  # json.JSONDecodeError is a ValueError
    raise _Unreadable("not a lock record: " + _one_line(e)) from None
  if not isinstance(record, dict):
    raise _Unreadable("not a lock record")
  for key, types in _FIELD_TYPES.items():
    if not isinstance(record.get(key), types) or isinstance(record.get(key), bool):
      raise _Unreadable(f"no valid {key!r}")
  if record["pid"] <= 0:
    raise _Unreadable("no valid 'pid'")
  return record


def _read_record_or_none(path):
  try:
    return _read_record(path)
  except (_Unreadable, OSError):
    return None


def _why_gone(record):
  """Why the holder of `record` is gone ("which is no longer running"), or None if it may live."""
  if _same_machine(record):
    return _why_process_gone(record)
  age = time.time() - record["heartbeat"]
  if age > STALE_AFTER_SECONDS:
    return f"whose last heartbeat was {age:.0f} s ago (stale after {STALE_AFTER_SECONDS:.0f} s)"
  return None


def _why_process_gone(record):
  pid = record["pid"]
  if os.path.isdir("/proc/self"):
    stat = _process_stat(pid)
    if stat is None or stat[0] in ("Z", "X"):  # no such process, or a zombie
      return "which is no longer running"
    if record.get("process_start") not in (None, stat[1]):
      return f"which is no longer running (pid {pid} is now another process)"
    return None
  try:  # no /proc (macOS): a running pid counts as the holder
    os.kill(pid, 0)
  except ProcessLookupError:
    return "which is no longer running"
  except PermissionError:  # runs, as another user
    pass
  return None


def _describe(record):
  """`pid 4242 on host h1 (started 2026-11-24 06:10:02 UTC: run_classifier.py ...)`."""
  started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(record["started"]))
  command = _one_line(record.get("command") or "unknown command")
  text = f"pid {record['pid']} on host {_one_line(record['host'])} (started {started}: {command}"
  if not _same_machine(record):  # liveness by heartbeat: say how fresh it is
    text += f"; last heartbeat {max(0, time.time() - record['heartbeat']):.0f} s ago"
  return text + ")"


def _one_line(value):
  return " ".join(str(value).split())


def _create_exclusive(path, data):
  """Creates `path` holding `data` if it does not exist (O_CREAT|O_EXCL); False if it does."""
  try:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
  except FileExistsError:
    return False
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(data)
      f.flush()
      os.fsync(f.fileno())  # a machine crash must not leave an empty lock behind
  except BaseException:
    os.remove(path)
    raise
  return True
