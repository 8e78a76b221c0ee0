"""Files written whole or not at all, and cheap or exact file identities.

Every result file, cache, checkpoint side-file and export of albert_tf is written through
`atomic_path` (write to a temporary name in the target directory, then rename over the final
name), so a run killed half-way never leaves a truncated file that a later run would trust.
Paths may be local or any filesystem tf.io.gfile knows (gs://...); TensorFlow is imported only
for non-local paths, so TensorFlow-free tools can use this module.
"""

import contextlib
import glob
import hashlib
import json
import os
import re
import shutil


def is_local(path):
  """True for a path on a local filesystem (no `scheme://`)."""
  return "://" not in os.fspath(path)


def _gfile():
  import tensorflow as tf  # lazy: only scheme:// paths need TensorFlow
  return tf.io.gfile


def exists(path):
  """True if the file or directory exists (local or tf.io.gfile path)."""
  return os.path.exists(path) if is_local(path) else _gfile().exists(path)


def glob_paths(pattern):
  """The paths a glob pattern matches, sorted: a local pattern by Python's glob (`~` expanded),
  any other (gs://...) by tf.io.gfile.glob."""
  if is_local(pattern):
    return sorted(glob.glob(os.path.expanduser(pattern)))
  return sorted(_gfile().glob(pattern))


def makedirs(path):
  """Creates `path` and its parents if missing."""
  if is_local(path):
    os.makedirs(path, exist_ok=True)
  else:
    _gfile().makedirs(path)


# What a command writes at an output path (`output_path_problem`): a directory (created if
# missing, files written inside), a file (written whole, its directory created if missing), or
# a prefix of files `<path>.<suffix>` (checkpoints, SentencePiece models).
DIRECTORY = "directory"
FILE = "file"
PREFIX = "prefix"


def _not_writable(directory):
  """Why nothing can be created in the existing `directory`, else None (asks, writes nothing:
  os.access also answers for root, on a read-only mount and for an immutable directory)."""
  if os.access(directory, os.W_OK | os.X_OK):
    return None
  try:
    if os.statvfs(directory).f_flag & os.ST_RDONLY:
      return "read-only file system"
  except OSError:
    pass
  return "permission denied"


def output_path_problem(path, kind, written_if_missing=False):
  """Why a command cannot write `path` as `kind` (DIRECTORY, FILE or PREFIX), else None.

  Checked before any work, and without writing anything: an existing file where a directory
  is expected or the reverse, a path under a regular file, a directory that is not writable
  (permissions, a read-only file system, `chattr +i`). Paths on other file systems
  (`scheme://`) are not checked.

  written_if_missing: the path is a cache, only read when it exists (its writability is then
    not needed).
  Returns:
    A few words (e.g. "is a file, expected a directory"), or None.
  """
  path = os.fspath(path)
  if not path or not is_local(path):
    return None
  if os.path.exists(path):
    if kind == DIRECTORY and not os.path.isdir(path):
      return "is a file, expected a directory"
    if kind != DIRECTORY and os.path.isdir(path):
      return ("is a directory, expected a file" if kind == FILE else
              "is a directory, expected a file prefix (e.g. <directory>/model.ckpt)")
    if written_if_missing:
      return None
    if kind == DIRECTORY:
      why = _not_writable(path)
      return f"is not writable ({why})" if why else None
    if kind == FILE and not os.access(path, os.W_OK):
      return f"exists and cannot be replaced ({_not_writable(path) or 'permission denied'})"
  # The nearest existing directory above: the missing part is created there.
  parent = os.path.dirname(os.path.abspath(path))
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent):
    return f"cannot be created: {parent} is a file, not a directory"
  why = _not_writable(parent)
  if why:
    return f"cannot be created: {parent} is not writable ({why})"
  return None


def temporary_name(path):
  """A sibling of `path` that no other process writing `path` uses."""
  return f"{os.fspath(path)}.tmp-{os.getpid()}"


def pid_running(pid):
  """True unless no process `pid` exists on this machine (another user's counts as running)."""
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except OSError:  # EPERM: it exists
    return True
  return True


_TEMPORARY = re.compile(r"\.tmp-(?P<pid>[0-9]+)(?![0-9])")  # temporary_name's mark


def remove_temporaries(directory, names=None, of_pid=None):
  """Removes the temporaries of writes in `directory`: every file or folder whose name holds
  `.tmp-<pid>` (see `temporary_name`), by default those of processes no longer running (killed
  half-way, e.g. by SIGKILL).

  names: only entries whose name starts with one of these (or with "." and one of these).
  of_pid: only this process's (a command stopped by a signal, before it exits).
  Returns:
    The paths removed.
  """
  directory = os.fspath(directory) or "."
  if not is_local(directory) or not os.path.isdir(directory):
    return []
  removed = []
  for entry in sorted(os.listdir(directory)):
    match = _TEMPORARY.search(entry)
    if not match or (names is not None and not any(
        entry.startswith((name, "." + name)) for name in names)):
      continue
    pid = int(match["pid"])
    if pid != of_pid if of_pid is not None else (pid == os.getpid() or pid_running(pid)):
      continue
    path = os.path.join(directory, entry)
    remove(path)
    removed.append(path)
  return removed


def remove(path):
  """Deletes a file or a whole directory tree; nothing happens if `path` does not exist."""
  if is_local(path):
    if os.path.isdir(path):
      shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
      os.remove(path)
  elif _gfile().exists(path):
    if _gfile().isdir(path):
      _gfile().rmtree(path)
    else:
      _gfile().remove(path)


def replace(source, target):
  """Renames `source` over `target` (atomic on one local filesystem)."""
  if is_local(target):
    os.replace(source, target)
  else:
    _gfile().rename(source, target, overwrite=True)


# Called before every atomic write is committed (innermost writes first); one that raises
# abandons the write. training/preemption.py uses it to stop at a safe point.
_COMMIT_CHECKS = []


@contextlib.contextmanager
def commit_check(check):
  """While active, `check()` runs before each atomic_path rename; raising abandons the write."""
  _COMMIT_CHECKS.append(check)
  try:
    yield
  finally:
    _COMMIT_CHECKS.remove(check)


def run_commit_checks():
  """Runs the active commit checks: called just before a write is committed by a rename."""
  for check in list(_COMMIT_CHECKS):
    check()


@contextlib.contextmanager
def atomic_path(path):
  """Yields a temporary path to write; renames it to `path` if the block succeeds.

  On an exception the temporary file (or directory) is removed and `path` is left as it was;
  so it is when a `commit_check` raises just before the rename.
  """
  path = os.fspath(path)
  parent = os.path.dirname(path)
  if parent:
    makedirs(parent)
  temp = temporary_name(path)
  try:
    yield temp
    run_commit_checks()
    if is_local(temp) and os.path.isfile(temp):
      os.chmod(temp, 0o644)  # as a plain open() would have made it
    replace(temp, path)
  finally:
    if exists(temp):
      remove(temp)


def write_text(path, text):
  """Writes `text` (UTF-8) to `path` atomically. Returns `path`."""
  with atomic_path(path) as temp:
    if is_local(temp):
      with open(temp, "w", encoding="utf-8") as f:
        f.write(text)
    else:
      with _gfile().GFile(temp, "w") as f:
        f.write(text)
  return path


def write_bytes(path, data):
  """Writes `data` to `path` atomically. Returns `path`."""
  with atomic_path(path) as temp:
    if is_local(temp):
      with open(temp, "wb") as f:
        f.write(data)
    else:
      with _gfile().GFile(temp, "wb") as f:
        f.write(data)
  return path


def write_json(path, value, **dump_kwargs):
  """Writes `value` as JSON to `path` atomically (json.dumps keyword arguments pass through)."""
  return write_text(path, json.dumps(value, **dump_kwargs))


def read_json(path):
  """The JSON value in `path`."""
  if is_local(path):
    with open(path, "r", encoding="utf-8") as f:
      return json.load(f)
  with _gfile().GFile(path, "r") as f:
    return json.load(f)


def file_sha1(path):
  """Hex SHA-1 of a file's bytes; None when `path` is empty."""
  if not path:
    return None
  digest = hashlib.sha1()
  opener = (lambda: open(path, "rb")) if is_local(path) else (
      lambda: _gfile().GFile(path, "rb"))
  with opener() as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
      digest.update(chunk)
  return digest.hexdigest()


def file_fingerprint(path):
  """Cheap identity of a local input file: absolute path, size and mtime (None: no file)."""
  if not path or not os.path.exists(path):
    return None
  stat = os.stat(path)
  return {"path": os.path.abspath(path), "size": stat.st_size, "mtime": int(stat.st_mtime)}
