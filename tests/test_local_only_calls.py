"""No local-only file call on a user's path: every path a user gives may be a gs:// URL, so
albert_tf reads and writes files through albert_tf/common/fileio.py alone.

The test parses every module of albert_tf/ (but fileio itself) and lists the calls that work on
a local disk only: builtin open(), os.path.exists/isdir/isfile/getsize, os.makedirs/replace/
rename/remove/listdir/stat/walk/..., shutil, glob, fcntl, pathlib. It also lists the calls that
go wrong on an object store stand-in: tf.io.gfile.isdir/exists (on ram:// a prefix of a file's
name is a directory; fileio.isdir/exists ask the parent's listing) and tf.train.load_checkpoint
(fails on a ram:// prefix; integrity.checkpoint_reader). Each place that must stay local is in
ALLOWED with its reason; a new call elsewhere fails the test, and so does an ALLOWED entry that
no longer matches anything (remove it).
"""

import ast
import os

from tests.helpers.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "albert_tf"
FILEIO = "albert_tf/common/fileio.py"

_OS_CALLS = {"makedirs", "mkdir", "replace", "rename", "renames", "remove", "unlink", "rmdir",
             "removedirs", "listdir", "scandir", "walk", "stat", "truncate"}
_OS_PATH_CALLS = {"exists", "lexists", "isdir", "isfile", "getsize", "getmtime"}
_LOCAL_MODULES = {"shutil", "glob", "fcntl", "pathlib"}
_GFILE_CALLS = {"isdir", "exists"}

# "<module path>:<function qualname>" (every flagged call in that function) or "<module path>"
# (the whole module) -> why it stays local.
ALLOWED = {
    "albert_tf/common/cpu.py:cpu_info":
        "reads /proc/cpuinfo of this machine (a test passes a local copy)",
    "albert_tf/training/gpu_check.py":
        "reads /proc/driver/nvidia and finds nvidia-smi (shutil.which) on this machine, never a "
        "user's path (a test passes local stand-ins)",
    "albert_tf/data/pretraining/creation.py:private_memory_mb":
        "reads /proc/self/smaps_rollup: this process's own memory",
    "albert_tf/tools/docstring_corpus.py:_iter_python_files":
        "walks the local Python installation's source folders (sysconfig), never a user's path",
    "albert_tf/tools/public_data.py":
        "downloads over HTTP(S) into a local data dir: resumable .partial files appended to "
        "(object stores have no append) and archives unpacked member by member; users copy "
        "the prepared dir to a bucket (gsutil cp -r), and every script reads it there",
    # One writer per output dir: O_EXCL and the atomic stale-lock takeover exist on a local disk
    # only (a lock on a bucket is written, read back and checked before every commit instead).
    "albert_tf/training/output_lock.py:OutputLock._move_aside":
        "the local stale-lock takeover by atomic rename (acquire takes it only for local paths)",
    "albert_tf/training/output_lock.py:_create_exclusive": "O_CREAT|O_EXCL: a local disk's",
    "albert_tf/training/output_lock.py:_read_text": "/proc: this machine's boot id",
    "albert_tf/training/output_lock.py:_process_stat": "/proc/<pid>/stat: a process of this machine",
    "albert_tf/training/output_lock.py:_why_process_gone": "/proc: this machine's processes",
    # Exports on a local disk appear by one directory rename; on a URL they are published file
    # by file with saved_model.pb last (fileio.publish_directory), and these branches never run.
    "albert_tf/export/saved_model_writer.py:remove_stale_leftovers":
        "puts back a local export moved aside (.old-<pid>) by a killed swap (is_local branch)",
    "albert_tf/export/saved_model_writer.py:_swap_in": "the local directory swap (is_local branch)",
    "albert_tf/export/saved_model_writer.py:_rename_new_export":
        "the local directory rename (is_local branch)",
    "albert_tf/export/saved_model_writer.py:_claim_version":
        "claims a version number by a rename that fails if taken: a local disk's (is_local)",

}


def _dotted(node):
  """'a.b.c' of a Name/Attribute chain, else None."""
  parts = []
  while isinstance(node, ast.Attribute):
    parts.append(node.attr)
    node = node.value
  if isinstance(node, ast.Name):
    parts.append(node.id)
    return ".".join(reversed(parts))
  return None


def _flagged(node):
  """What local-only (or ram://-unsafe) call or import `node` is, else None."""
  if isinstance(node, ast.Import):
    names = [a.name for a in node.names if a.name.split(".")[0] in _LOCAL_MODULES]
    return f"import {names[0]}" if names else None
  if isinstance(node, ast.ImportFrom):
    module, names = node.module or "", {a.name for a in node.names}
    if (module.split(".")[0] in _LOCAL_MODULES or (module == "os" and names & _OS_CALLS)
        or (module == "os.path" and names & _OS_PATH_CALLS)):
      return f"from {module} import {', '.join(sorted(names))}"
    return None
  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
      node.value.id in _LOCAL_MODULES):
    return f"{node.value.id}.{node.attr}"
  if not isinstance(node, ast.Call):
    return None
  name = _dotted(node.func)
  if name == "open":
    return "open()"
  head, _, last = (name or "").rpartition(".")
  if (head == "os" and last in _OS_CALLS) or (head == "os.path" and last in _OS_PATH_CALLS):
    return f"{name}()"
  if head in ("tf.io.gfile", "tf.gfile") and last in _GFILE_CALLS:
    return f"{name}() (use fileio.{last}: right on ram:// too)"
  if name == "tf.train.load_checkpoint":
    return f"{name}() (use checkpoints.integrity.checkpoint_reader)"
  return None


def local_only_calls(source, module):
  """[(where, what, line)] of a module's source: where is "<module>:<function qualname>"."""
  found = []

  def visit(node, scope):
    for child in ast.iter_child_nodes(node):
      if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        visit(child, scope + [child.name])
        continue
      what = _flagged(child)
      if what:
        found.append((f"{module}:{'.'.join(scope) or '<module>'}", what, child.lineno))
      visit(child, scope)

  visit(ast.parse(source), [])
  return found


def _all_calls():
  calls = []
  for dirpath, _, filenames in os.walk(PACKAGE):
    for name in sorted(filenames):
      path = os.path.join(dirpath, name)
      module = os.path.relpath(path, REPO_ROOT).replace(os.sep, "/")
      if name.endswith(".py") and module != FILEIO:
        with open(path, encoding="utf-8") as f:
          calls.extend(local_only_calls(f.read(), module))
  return calls


def _allowed_by(where):
  module = where.split(":")[0]
  return where if where in ALLOWED else module if module in ALLOWED else None


def test_no_local_only_file_calls():
  calls = _all_calls()
  unlisted = [f"{where.split(':')[0]}:{line}: {what} in {where.split(':')[1]}"
              for where, what, line in calls if _allowed_by(where) is None]
  assert not unlisted, (
      "local-only file calls on what may be a user's gs:// path (use albert_tf/common/fileio.py, "
      "or add the place to ALLOWED with why it must stay local):\n  " + "\n  ".join(unlisted))
  used = {_allowed_by(where) for where, _, _ in calls}
  stale = sorted(set(ALLOWED) - used)
  assert not stale, f"ALLOWED entries that match no call any more (remove them): {stale}"


def test_the_scan_finds_each_kind_of_call():
  source = '''
import shutil
from glob import glob
from os.path import join
from os.path import isfile
def read(path):
  with open(path) as f:
    return f.read()
class Writer:
  def write(self, path):
    if not os.path.exists(path):
      os.makedirs(path)
    os.replace(path + ".tmp", path)
    tf.io.gfile.isdir(path)
    tf.train.load_checkpoint(path)
    fileio.exists(path)  # fine
    os.path.join(path, "x")  # fine
'''
  found = [(where, what.split(" ")[0]) for where, what, _ in local_only_calls(source, "m.py")]
  assert found == [("m.py:<module>", "import"), ("m.py:<module>", "from"),
                   ("m.py:<module>", "from"),
                   ("m.py:read", "open()"), ("m.py:Writer.write", "os.path.exists()"),
                   ("m.py:Writer.write", "os.makedirs()"), ("m.py:Writer.write", "os.replace()"),
                   ("m.py:Writer.write", "tf.io.gfile.isdir()"),
                   ("m.py:Writer.write", "tf.train.load_checkpoint()")]
