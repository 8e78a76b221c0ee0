"""The one door to files: every path a user gives may be local or a tf.io.gfile URL.

A TPU reads its input and writes its checkpoints through Cloud Storage, so every file albert_tf
reads or writes on a user's path goes through this module: `open_file`, `read_bytes`,
`read_text`, `exists`, `isdir`, `isfile`, `listdir`, `walk`, `getsize`, `glob_paths`,
`makedirs`, `copy`, `copytree`, `remove`, `replace`, `abspath`. Local paths use Python's own
calls; any `scheme://` path (gs://, and ram:// which the tests use as a stand-in bucket) goes
through tf.io.gfile, and TensorFlow is imported only then, so TensorFlow-free tools can use this
module. `tests/test_local_only_calls.py` scans albert_tf/ for local-only file calls outside this
module (with a list of the places that must stay local, each with its reason).

Every result file, cache, checkpoint side-file and export of albert_tf is written through
`atomic_path` (write to a temporary name in the target directory, then rename over the final
name), so a run killed half-way never leaves a truncated file that a later run would trust. On
an object store a file rename is a copy and a delete, but the copy is one object write, so a
reader still sees the old object or the whole new one (never half of it). Directories cannot be
renamed whole there: see `publish_directory`.

Where TensorFlow's in-memory filesystem (ram://) differs from Cloud Storage:
* ram:// calls every prefix of a file's name an existing directory (`ckpt-4` once
  `ckpt-4.index` exists); `isdir` and `exists` here ask the parent's listing instead, which is
  right on both.
* ram:// lists a directory by bare prefix (`run/train` shows "_input_state" for a sibling
  `run/train_input_state/`); `listdir` keeps only real children there.
* ram:// lists only directories made with `makedirs`: a file written into a directory nobody
  made is found by its path but not by `listdir` of its parent; every writer here makes the
  parents first (as on a local disk).
* ram:// renames a directory's own entry but not the files below it; Cloud Storage renames
  each object. Neither is atomic, so nothing here renames a directory off the local disk.
* ram:// lists, in a directory `d`, the rest of every sibling name that starts with `d`'s
  name: `assets/` of a SavedModel lists `.extra` (from `assets.extra/`). `listdir` and `walk`
  leave out such names that do not exist (on ram:// only), and `remove` deletes a ram://
  tree itself (tf.io.gfile.rmtree trips over them).
"""

import builtins
import contextlib
import errno
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
  """True if the file or directory exists (local or tf.io.gfile path; on ram:// a mere prefix
  of a file's name does not count, see `isdir`)."""
  path = os.fspath(path)
  return os.path.exists(path) if is_local(path) else isfile(path) or isdir(path)


def isdir(path):
  """True if `path` is a directory. On object stores: a name its parent lists as a directory
  (ram:// alone would also call `run/ckpt-4` a directory once `run/ckpt-4.index` exists)."""
  path = os.fspath(path)
  if is_local(path):
    return os.path.isdir(path)
  path = path.rstrip("/")
  if not _gfile().isdir(path):
    return False
  parent, name = path.rsplit("/", 1)
  if parent.endswith(":/") or parent.endswith("://"):  # a bucket: "gs://b"
    return True
  try:
    return name in {entry.rstrip("/") for entry in _gfile().listdir(parent)}
  except Exception:  # pylint: disable=broad-except
    return True


def isfile(path):
  """True if `path` is a regular file (local or tf.io.gfile path)."""
  path = os.fspath(path)
  if is_local(path):
    return os.path.isfile(path)
  try:
    return not _gfile().stat(path).is_directory
  except Exception:  # pylint: disable=broad-except  (tf.errors.NotFoundError)
    return False


def getsize(path):
  """A file's size in bytes."""
  path = os.fspath(path)
  return os.path.getsize(path) if is_local(path) else _gfile().stat(path).length


def listdir(path):
  """The names in a directory, sorted (sub-directories without a trailing "/")."""
  path = os.fspath(path)
  if is_local(path):
    return sorted(os.listdir(path))
  path = path.rstrip("/")
  names = sorted({name.rstrip("/") for name in _gfile().listdir(path)})
  if path.startswith("ram://"):
    # ram:// lists by bare prefix: `run/train` also yields "_input_state" for a sibling
    # `run/train_input_state/...`. Keep only real children (Cloud Storage lists by "dir/").
    names = [name for name in names if isfile(f"{path}/{name}")
             or _gfile().isdir(f"{path}/{name}")]
  return names


def walk(top):
  """os.walk's (dirpath, dirnames, filenames), top-down, for any path."""
  top = os.fspath(top)
  if is_local(top):
    yield from os.walk(top)
    return
  top = top.rstrip("/")
  names = listdir(top)
  files = [name for name in names if isfile(f"{top}/{name}")]
  dirs = [name for name in names if name not in files]
  yield top, dirs, files
  for name in dirs:
    yield from walk(f"{top}/{name}")


def abspath(path):
  """An absolute local path; a URL as it is."""
  path = os.fspath(path)
  return os.path.abspath(path) if is_local(path) else path


def open_file(path, mode="r", encoding="utf-8"):
  """A file object for any path: Python's `open` locally (text modes decode `encoding`), else
  tf.io.gfile.GFile (text is UTF-8 there). Use it as a context manager.

  A missing file raises FileNotFoundError on every filesystem (GFile alone would open lazily and
  raise TensorFlow's NotFoundError at the first read), so callers handle OSError once."""
  path = os.fspath(path)
  if is_local(path):
    if "b" in mode:
      return builtins.open(path, mode)
    return builtins.open(path, mode, encoding=encoding)
  if "r" in mode and not isfile(path):
    raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
  return _gfile().GFile(path, mode)


def read_bytes(path):
  """The bytes of a file (a failure on any filesystem is an OSError: FileNotFoundError,
  PermissionError, ...)."""
  path = os.fspath(path)
  if is_local(path):
    with builtins.open(path, "rb") as f:
      return f.read()
  import tensorflow as tf  # lazy: only scheme:// paths need TensorFlow
  try:
    with open_file(path, "rb") as f:
      return f.read()
  except tf.errors.NotFoundError:
    raise FileNotFoundError(errno.ENOENT, "No such file or directory", path) from None
  except tf.errors.PermissionDeniedError:
    raise PermissionError(errno.EACCES, "Permission denied", path) from None
  except tf.errors.OpError as e:
    raise OSError(errno.EIO, " ".join(str(e.message or type(e).__name__).split()),
                  path) from None


def read_text(path, encoding="utf-8"):
  """The text of a file (UTF-8 unless `encoding`; a bad byte raises UnicodeDecodeError)."""
  return read_bytes(path).decode(encoding)


def copy(source, target):
  """Copies the file `source` to `target` (replacing it), across filesystems too."""
  source, target = os.fspath(source), os.fspath(target)
  if is_local(source) and is_local(target):
    shutil.copyfile(source, target)
  else:
    _gfile().copy(source, target, overwrite=True)


def copytree(source, target):
  """Copies the directory `source` into `target` (created; existing files replaced)."""
  source, target = os.fspath(source).rstrip("/"), os.fspath(target).rstrip("/")
  makedirs(target)
  for dirpath, dirnames, filenames in walk(source):
    relative = os.path.relpath(dirpath, source) if is_local(source) else dirpath[len(source):]
    relative = relative.strip("/")
    here = os.path.join(target, relative) if relative not in ("", ".") else target
    for name in dirnames:
      makedirs(os.path.join(here, name))
    for name in filenames:
      copy(os.path.join(dirpath, name), os.path.join(here, name))


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
  if not isdir(directory):
    return []
  removed = []
  for entry in listdir(directory):
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
  path = os.fspath(path)
  if is_local(path):
    if os.path.isdir(path):
      shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
      os.remove(path)
  elif isdir(path):
    if path.startswith("ram://"):
      _remove_ram_tree(path)
    else:
      _gfile().rmtree(path)
  elif isfile(path):
    _gfile().remove(path)


def _remove_ram_tree(path):
  """tf.io.gfile.rmtree for ram://, whose own stops at a listed name that is not there: every
  file, then every directory entry (ram:// deletes a directory's entry as it deletes a file)."""
  files, directories = [], []
  for dirpath, _, filenames in walk(path):
    directories.append(dirpath)
    files.extend(f"{dirpath.rstrip('/')}/{name}" for name in filenames)
  for name in files + sorted(directories, reverse=True):
    _gfile().remove(name)


def replace(source, target):
  """Renames `source` over `target` (atomic on one local filesystem)."""
  if is_local(target):
    os.replace(source, target)
  else:
    _gfile().rename(source, target, overwrite=True)


def publish_directory(staging, target, last=None):
  """Makes the directory `staging` appear as `target` (replacing it) and removes `staging`.

  Locally one rename: `target` appears whole at once. An object store has no directory rename,
  so the files are copied into `target` one by one with `last` (a name relative to `staging`,
  e.g. "saved_model.pb") copied after all others: a reader that waits for `last` (TF Serving
  cannot load a SavedModel before its saved_model.pb is there) never sees a partial directory.
  An old `target` is removed first.
  """
  staging, target = os.fspath(staging).rstrip("/"), os.fspath(target).rstrip("/")
  if is_local(target) and is_local(staging):
    if os.path.isdir(target):
      remove(target)
    os.replace(staging, target)
    return
  remove(target)
  files = []
  for dirpath, _, filenames in walk(staging):
    relative = dirpath[len(staging):].strip("/")
    files.extend(os.path.join(relative, name) if relative else name for name in filenames)
  files.sort(key=lambda name: (name == last, name))
  for name in files:
    makedirs(os.path.dirname(os.path.join(target, name)))
    copy(os.path.join(staging, name), os.path.join(target, name))
  remove(staging)


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
    if not is_local(temp) and isdir(temp):
      publish_directory(temp, path)
    else:
      replace(temp, path)
  finally:
    if exists(temp):
      remove(temp)


def write_text(path, text):
  """Writes `text` (UTF-8) to `path` atomically. Returns `path`."""
  return write_bytes(path, text.encode("utf-8"))


def write_bytes(path, data):
  """Writes `data` to `path` atomically. Returns `path`."""
  with atomic_path(path) as temp:
    with open_file(temp, "wb") as f:
      f.write(data)
  return path


def write_json(path, value, **dump_kwargs):
  """Writes `value` as JSON to `path` atomically (json.dumps keyword arguments pass through)."""
  return write_text(path, json.dumps(value, **dump_kwargs))


def read_json(path):
  """The JSON value in `path`."""
  return json.loads(read_text(path))


def file_sha1(path):
  """Hex SHA-1 of a file's bytes; None when `path` is empty."""
  if not path:
    return None
  digest = hashlib.sha1()
  with open_file(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
      digest.update(chunk)
  return digest.hexdigest()


def file_fingerprint(path):
  """Cheap identity of an input file: absolute path (or URL), size and mtime (None: no file).
  (ram:// keeps no mtime: there it is 0, and the size alone tells versions apart.)"""
  if not path or not exists(path):
    return None
  path = os.fspath(path)
  if is_local(path):
    stat = os.stat(path)
    return {"path": os.path.abspath(path), "size": stat.st_size, "mtime": int(stat.st_mtime)}
  stat = _gfile().stat(path)
  return {"path": path, "size": stat.length, "mtime": int(stat.mtime_nsec // 10**9)}
