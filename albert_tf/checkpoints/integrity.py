"""Is a checkpoint whole? And writing one so that no reader ever sees half of it.

A checkpoint `<prefix>` is `<prefix>.index` plus `<prefix>.data-NNNNN-of-MMMMM` shards. A save that
was killed, a disk that filled up or a copy that was cut short leave a prefix whose index is
missing, whose data is shorter than the index says, or whose bytes fail their CRC. TensorFlow
reports those cases late and deep (an `IndexError` in the middle of a restore, a checksum
`OpError`), or not at all (a missing `.index` just makes the checkpoint invisible, and a run
starts from scratch beside it). Everything that reads a checkpoint here asks `checkpoint_problem`
/ `verify_checkpoint` first, which reads every tensor once (the bytes and their CRCs).

`checkpoint_reader` is the one way albert_tf opens a checkpoint to read its tensors, on any
filesystem: `tf.train.load_checkpoint(prefix)` takes a prefix for a directory when the
filesystem calls every prefix of a file name a directory (ram://, the tests' stand-in for
gs://, does once `<prefix>.index` exists) and then fails; `NewCheckpointReader` takes the
prefix as it is, and a directory is resolved here with `fileio.isdir`, right on both.

`atomic_checkpoint_prefix` is the write side for the checkpoints we write by name
(`model.ckpt-best`, converted checkpoints): the files are written under a temporary prefix and
moved into place index last, with the old index removed first, so a reader sees the old
checkpoint, no checkpoint, or the new one, never a mix.
"""

import contextlib
import os
import re

import tensorflow as tf

from albert_tf.common import fileio
from albert_tf.errors import AlbertError

INDEX_SUFFIX = ".index"
DATA_INFIX = ".data-"

# prefix -> (index size, index mtime, problem or None): one verification per version of a file.
_VERIFIED = {}


def checkpoint_files(prefix):
  """The files of a checkpoint prefix that exist: its index (if any) and its data shards."""
  prefix = os.fspath(prefix)
  return sorted(tf.io.gfile.glob(_glob_escape(prefix) + DATA_INFIX + "*")
                + tf.io.gfile.glob(_glob_escape(prefix) + INDEX_SUFFIX))


def _glob_escape(path):
  return "".join(f"[{c}]" if c in "*?[" else c for c in path)


def latest_prefix(path, what="checkpoint"):
  """The checkpoint prefix `path` names: itself, or for a directory its newest checkpoint (the
  `checkpoint` state file's, else the highest-numbered `<name>-<step>` files).

  Raises:
    AlbertError: a directory that holds no checkpoint (naming `what` and `path`).
  """
  path = os.fspath(path)
  if not fileio.isdir(path):
    return path
  latest = tf.train.latest_checkpoint(path)
  if latest is None:
    numbered = numbered_checkpoints(path)
    if not numbered:
      raise AlbertError(f"{what} {path}: directory holds no checkpoint")
    latest = numbered[-1][1]
  return latest


def checkpoint_reader(path, what="checkpoint"):
  """A CheckpointReader (get_tensor, has_tensor, get_variable_to_shape_map / _dtype_map) of the
  checkpoint at `path`, a prefix or a directory (its newest checkpoint), on any filesystem.

  Raises:
    AlbertError: one line naming `what` and `path`, when no checkpoint is there or its index
      does not read.
  """
  prefix = latest_prefix(path, what)
  try:
    return tf.compat.v1.train.NewCheckpointReader(prefix)
  except (tf.errors.OpError, ValueError) as e:
    if not fileio.exists(prefix + INDEX_SUFFIX):
      raise AlbertError(f"{what} {prefix}: no checkpoint there (expected "
                        f"{prefix}{INDEX_SUFFIX})") from None
    raise AlbertError(f"{what} {prefix}: unreadable ({first_line(e)})") from None


def first_line(error):
  """The first line of a TensorFlow error, without its `{{function_node ...}}` and `[Op:...]`."""
  text = re.sub(r"\{\{[^}]*\}\}\s*|\s*\[Op:\w+\]", "", str(error)).strip()
  return text.splitlines()[0][:300] if text else type(error).__name__


def checkpoint_problem(prefix):
  """What is wrong with the checkpoint at `prefix` (one phrase), or None when it reads whole.

  Reads every tensor once, so a truncated shard or a flipped byte is found here rather than in
  the middle of a restore. Results are cached per index file version.
  """
  prefix = os.fspath(prefix)
  index = prefix + INDEX_SUFFIX
  if not fileio.exists(index):
    if checkpoint_files(prefix):
      return f"{os.path.basename(index)} is missing (the save did not finish)"
    return f"no checkpoint there (expected {index})"
  stat = tf.io.gfile.stat(index)
  key = (stat.length, stat.mtime_nsec)
  cached = _VERIFIED.get(prefix)
  if cached and cached[0] == key:
    return cached[1]
  problem = None
  try:
    reader = tf.compat.v1.train.NewCheckpointReader(prefix)  # as checkpoint_reader opens it
    for name, dtype in reader.get_variable_to_dtype_map().items():
      # RestoreV2 checks the CRC of every tensor, iterator states (variant) included.
      tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=[name], shape_and_slices=[""],
                           dtypes=[dtype])
  except (tf.errors.OpError, IndexError, ValueError, OSError, RuntimeError) as e:
    problem = f"unreadable ({first_line(e)})"
  _VERIFIED[prefix] = (key, problem)
  return problem


def verify_checkpoint(prefix, what="checkpoint"):
  """Raises AlbertError naming `prefix` unless the checkpoint there reads whole.

  `what` names the checkpoint's role in the message (e.g. "--init_checkpoint").
  """
  problem = checkpoint_problem(prefix)
  if problem:
    raise AlbertError(f"{what} {prefix}: {problem}")


@contextlib.contextmanager
def atomic_checkpoint_prefix(prefix):
  """Yields a temporary prefix to save to; on success moves its files to `prefix`.

  The old `<prefix>.index` is removed before any new file moves in and the new index moves in
  last, so readers find either the old checkpoint, none, or the new one. On an exception the
  temporary files are removed and `prefix` is left as it was.
  """
  prefix = os.fspath(prefix)
  directory, name = os.path.split(prefix)
  temp = os.path.join(directory, f".{name}.tmp-{os.getpid()}")
  try:
    yield temp
    fileio.run_commit_checks()  # e.g. a run that lost its output directory's lock: no commit
    new_files = checkpoint_files(temp)
    if not any(f.endswith(INDEX_SUFFIX) for f in new_files):
      raise AlbertError(f"{prefix}: the save wrote no index")
    if fileio.exists(prefix + INDEX_SUFFIX):
      tf.io.gfile.remove(prefix + INDEX_SUFFIX)
    for old in checkpoint_files(prefix):  # shards of another shard count
      tf.io.gfile.remove(old)
    for path in sorted(new_files, key=lambda f: f.endswith(INDEX_SUFFIX)):
      tf.io.gfile.rename(path, prefix + path[len(temp):], overwrite=True)
  finally:
    for leftover in checkpoint_files(temp):
      tf.io.gfile.remove(leftover)


def numbered_checkpoints(directory):
  """[(step, prefix)] of every `<name>-<step>` checkpoint in `directory`, by step.

  Found from the files themselves (an index or a data shard), not from the `checkpoint` state
  file, so a checkpoint whose save was cut short, or a directory whose state file is gone, is
  still seen. At equal steps, `ckpt-N` (ours) comes after `model.ckpt-N` (official).
  """
  found = {}
  for path in tf.io.gfile.glob(os.path.join(_glob_escape(os.fspath(directory)), "*-*")):
    base = os.path.basename(path)
    if base.endswith(INDEX_SUFFIX):
      stem = base[:-len(INDEX_SUFFIX)]
    elif DATA_INFIX in base:
      stem = base[:base.index(DATA_INFIX)]
    else:
      continue
    name, _, step = stem.rpartition("-")
    if name and step.isdigit() and not stem.startswith("."):
      found[(int(step), name == "ckpt", stem)] = os.path.join(os.fspath(directory), stem)
  return [(key[0], prefix) for key, prefix in sorted(found.items())]
