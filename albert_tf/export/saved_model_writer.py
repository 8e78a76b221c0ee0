"""Writing SavedModels safely: atomic writes, and never over or beside a different model.

An export holds `assets.extra/albert_export.json` describing what model it is (kind, task,
labels, architecture, vocabulary, sequence length).

Serving exports (`--export_dir` of the run_* scripts) use TF Serving's layout, as the official
Estimator export did: `--export_dir` is the model's base path and every export is a new numbered
version `<export_dir>/<version>/saved_model.pb` (version = seconds since the epoch, above any
existing one, chosen when the version is complete: exports into one base path at once each get
their own, in the order they finish), which a running TF Serving picks up. A base path whose versions hold a different
model is refused with a one-line AlbertError. The TF-Hub style encoder export is a single
SavedModel written in place (`write_atomically`).
Both write TF Serving's warm-up requests (`albert_tf.export.warmup`) into every SavedModel of
the export before it is renamed into place.

On an object store (`gs://`, and `ram://` in the tests) there is no directory rename: an export
is written under a staging name TF Serving ignores (`new_version@<host>.tmp-<pid>`, not a
number), then published file by file into `<base>/<version>/` with `saved_model.pb` copied last
(`fileio.publish_directory`), and the staging is removed. TF Serving cannot load a version
before its saved_model.pb is there (it logs a load error and retries), and once it is there the
version is whole. What a killed export leaves and what the next one does about it, and the race
that remains (two exports into one base path finishing in the same second), are in
docs/failure_behaviour.md, "Remote storage (gs://)".
"""

import errno
import json
import os
import re
import socket
import time

from absl import logging

from albert_tf.common import fileio
from albert_tf.errors import AlbertError
from albert_tf.export import warmup
from albert_tf.common.export_format import EXPORT_INFO

# Keys of an export's info that record how that export was made (the timings behind
# --export_precision=auto), not what model it is: they differ between two exports of the same
# model, so `check_export_dir` leaves them out of the comparison.
PRECISION_CHOICE = "precision_choice"  # --export_precision=auto: choice and timings
MEASURED_KEYS = (PRECISION_CHOICE,)
SAVED_MODEL_PB = "saved_model.pb"  # what TF Serving (and tf.saved_model.load) reads first


def read_export_info(export_dir):
  """The identity dict of an existing export, or None if `export_dir` is not one of ours."""
  path = os.path.join(export_dir, EXPORT_INFO)
  if not fileio.exists(path):
    return None
  return fileio.read_json(path)


def _describe_difference(old, new):
  for key in sorted(set(old) | set(new)):
    if old.get(key) != new.get(key):
      return f"{key}: existing {_short(old.get(key))} vs new {_short(new.get(key))}"
  return "unknown difference"


def _short(value):
  text = json.dumps(value, sort_keys=True)
  return text if len(text) <= 60 else text[:57] + "..."


def check_export_dir(export_dir, identity):
  """Raises AlbertError if `export_dir` exists, is non-empty and is not this same model."""
  if not fileio.exists(export_dir):
    return
  if not fileio.isdir(export_dir):
    raise AlbertError(f"export directory {export_dir} is a file, expected a directory")
  if not fileio.listdir(export_dir):
    return
  existing = read_export_info(export_dir)
  if existing is None:
    raise AlbertError(f"export directory {export_dir} already holds files that are not an "
                      f"albert_tf export; refusing to overwrite (choose an empty or new directory)")
  choice = existing.get(PRECISION_CHOICE)
  existing = {key: value for key, value in existing.items() if key not in MEASURED_KEYS}
  identity = json.loads(json.dumps(identity))
  if existing != identity:
    difference = _describe_difference(existing, identity)
    if difference.startswith("precision:") and isinstance(choice, dict) and choice.get("chosen"):
      # An --export_precision=auto export: name the precision it chose, not just "auto".
      difference = difference.replace('existing "auto"', f'existing "{choice["chosen"]}" '
                                      '(chosen by --export_precision=auto)', 1)
    raise AlbertError(f"export directory {export_dir} already holds a different model "
                      f"({difference}); choose another directory or delete it")


# `<name>.tmp-<pid>` (fileio's temporary), `<name>.old-<pid>` (a previous export moved aside),
# and what is named after them (`<version>.tmp-<pid>-assets`, the staging folder of assets). On
# an object store `<name>` ends with `@<host>` (`_staging_name`).
_LEFTOVER = re.compile(r"^(?P<name>.+?)\.(?P<kind>tmp|old)-(?P<pid>[0-9]+)(?P<rest>[-_.].*)?$")
_HOST = socket.gethostname()


def _staging_name(path):
  """Where the export that becomes `path` is written first: a sibling TF Serving ignores (not a
  number). On an object store it names the host too, since a pid says nothing about a process
  on another machine writing the same bucket."""
  path = os.fspath(path)
  return fileio.temporary_name(path if fileio.is_local(path) else f"{path}@{_HOST}")


def _left_by_dead_process(parent, match):
  """True if the leftover `match` (of _LEFTOVER) was written by a process no longer running: one
  of this machine's (on an object store, the `@<host>` of its name says which machine)."""
  pid = int(match["pid"])
  if pid == os.getpid() or fileio.pid_running(pid):
    return False
  return fileio.is_local(parent) or match["name"].endswith(f"@{_HOST}")


def remove_stale_leftovers(parent, restore_to=None):
  """Removes the `<name>.tmp-<pid>` (and `<name>.old-<pid>`, and `<name>.tmp-<pid>-assets`)
  folders in `parent` that exports of processes no longer running left (killed half-way, e.g.
  by SIGKILL). On an object store only this machine's are judged (`_left_by_dead_process`):
  another machine's staging is left alone (it may be an export still being written).

  restore_to: the export path `write_atomically` replaces: a dead process's `<it>.old-<pid>` (the
    previous export, moved aside just before the new one was renamed in) is put back when the
    path itself is missing, instead of being deleted (local disks only: an object store's
    export is never moved aside).
  """
  if not fileio.isdir(parent):
    return
  for entry in fileio.listdir(parent):
    match = _LEFTOVER.match(entry)
    if not match or not _left_by_dead_process(parent, match):
      continue
    path = os.path.join(parent, entry)
    if (match["kind"] == "old" and not match["rest"] and restore_to is not None
        and fileio.is_local(parent)
        and os.path.join(parent, match["name"]) == restore_to and not os.path.exists(restore_to)
        and os.path.isdir(path)):
      os.replace(path, restore_to)
      logging.warning("%s: restored the previous export that an interrupted export (pid %s) "
                      "had moved aside", restore_to, match["pid"])
      continue
    logging.info("removing %s, left by an interrupted export (pid %s no longer runs)", path,
                 match["pid"])
    fileio.remove(path)


def write_atomically(export_dir, identity, write_fn):
  """Calls write_fn(tmp_dir) to fill a sibling temp dir, then swaps it into `export_dir`.

  Readers (TF Serving polling the directory) see either the old model or the new one, never a
  half-written directory. An existing export stays in place until the new one is complete; a
  directory cannot be renamed over a non-empty one, so the old one is then moved aside, the new
  one renamed in and the old one deleted; if renaming the new one in fails (or a signal stops
  the process between the two renames), the old one is put back.
  On an object store the old export is removed and the new one published file by file, its
  saved_model.pb last (`fileio.publish_directory`): a reader finds no SavedModel while that runs.
  """
  export_dir = fileio.abspath(export_dir.rstrip("/\\"))
  check_export_dir(export_dir, identity)
  remove_stale_leftovers(os.path.dirname(export_dir), restore_to=export_dir)
  check_export_dir(export_dir, identity)  # a restored previous export is checked too
  fileio.makedirs(os.path.dirname(export_dir))
  tmp_dir = _staging_name(export_dir)
  old_dir = f"{export_dir}.old-{os.getpid()}"
  try:
    fileio.remove(tmp_dir)  # a leftover of a killed run with our pid
    write_fn(tmp_dir)
    _write_export_info(tmp_dir, identity)
    warmup.write_warmup_requests(tmp_dir, identity)
    fileio.run_commit_checks()
    if fileio.is_local(export_dir):
      _swap_in(tmp_dir, export_dir, old_dir)
    else:
      fileio.publish_directory(tmp_dir, export_dir, last=SAVED_MODEL_PB)
  finally:
    fileio.remove(tmp_dir)
  logging.info("Exported SavedModel to %s", export_dir)
  return export_dir


def _swap_in(new_dir, export_dir, old_dir):
  """Renames the complete `new_dir` to `export_dir`; an existing export is moved aside first and
  deleted after, or put back if the rename fails. (Local disks only: directory renames.)"""
  if not os.path.exists(export_dir):
    os.replace(new_dir, export_dir)
    return
  fileio.remove(old_dir)
  try:
    os.replace(export_dir, old_dir)
    _rename_new_export(new_dir, export_dir)
  except BaseException:  # incl. StopRequested raised by a signal between the two renames
    if not os.path.exists(export_dir) and os.path.exists(old_dir):
      os.replace(old_dir, export_dir)
    raise
  fileio.remove(old_dir)


def _rename_new_export(new_dir, export_dir):
  """The second rename of `_swap_in` (a separate function so a test can make it fail)."""
  os.replace(new_dir, export_dir)


def export_versions(export_base):
  """[(version, path)] of the numbered version directories under a serving base path."""
  if not fileio.isdir(export_base):
    return []
  return sorted((int(name), os.path.join(export_base, name))
                for name in fileio.listdir(export_base)
                if name.isdigit() and fileio.isdir(os.path.join(export_base, name)))


def _is_whole(version_dir):
  """True if a version directory holds its saved_model.pb (on an object store it is published
  last, so a version without it is one whose export was killed while publishing)."""
  return fileio.isfile(os.path.join(version_dir, SAVED_MODEL_PB))


def latest_export(path):
  """`path` itself if it is a SavedModel, else its newest whole version directory, else None."""
  if fileio.exists(os.path.join(path, SAVED_MODEL_PB)):
    return path
  whole = [p for _, p in export_versions(path) if _is_whole(p)]
  return whole[-1] if whole else None


def write_new_version(export_base, identity, write_fn, measured=None):
  """Calls write_fn(tmp_dir), then renames it to `<export_base>/<version>`; returns that path.

  TF Serving (`--model_base_path=<export_base>`) sees only whole versions: the version is
  written under a non-numeric temporary name first (on an object store it is then published
  with its saved_model.pb last, see the module docstring).
  measured: optional {key in MEASURED_KEYS: value} written into the info beside the identity.
  Raises:
    AlbertError: export_base is a file, holds a SavedModel directly (not TF Serving's layout),
      or its newest version is a different model (or not an albert_tf export).
  """
  export_base = fileio.abspath(export_base.rstrip("/\\"))
  if fileio.exists(export_base) and not fileio.isdir(export_base):
    raise AlbertError(f"export directory {export_base} is a file, expected a directory")
  if fileio.exists(os.path.join(export_base, SAVED_MODEL_PB)):
    raise AlbertError(f"export directory {export_base} holds a SavedModel directly; TF Serving "
                      f"expects numbered versions (<dir>/<version>/saved_model.pb): choose a new "
                      f"directory")
  whole = []
  for _, path in export_versions(export_base):
    if _is_whole(path):
      whole.append(path)
    else:
      logging.warning("%s has no %s (an export stopped while publishing it?): TF Serving cannot "
                      "load it; the new version is numbered above it; delete it", path,
                      SAVED_MODEL_PB)
  if whole:
    check_export_dir(whole[-1], identity)
  remove_stale_leftovers(export_base)
  fileio.makedirs(export_base)
  # The temporary name is not a number, so TF Serving never loads it; the version number is
  # chosen only when the export is complete (`_claim_version`).
  tmp_dir = _staging_name(os.path.join(export_base, _NEW_VERSION))
  try:
    fileio.remove(tmp_dir)  # a leftover of a killed run with our pid
    write_fn(tmp_dir)
    _write_export_info(tmp_dir, identity, measured)
    warmup.write_warmup_requests(tmp_dir, identity)
    fileio.run_commit_checks()
    version, target = _claim_version(tmp_dir, export_base)
  finally:
    fileio.remove(tmp_dir)
  logging.info("Exported SavedModel version %d to %s", version, target)
  return target


_NEW_VERSION = "new_version"


def _claim_version(tmp_dir, export_base):
  """Moves the complete `tmp_dir` to the next version `<export_base>/<version>`: seconds since
  the epoch, above every existing version. Returns (version, path).

  Locally, exports into one base path at once each get a version of their own, numbered in the
  order they finish: a directory is never renamed over a non-empty one, so when another export
  took the number first (between listing and renaming) the rename fails and the next number is
  tried. An object store has no such rename: the version is published file by file
  (saved_model.pb last), and two exports finishing in the same second could pick one number
  (docs/failure_behaviour.md).
  """
  while True:
    versions = export_versions(export_base)
    version = max(int(time.time()), versions[-1][0] + 1 if versions else 0)
    target = os.path.join(export_base, str(version))
    if not fileio.is_local(export_base):
      fileio.publish_directory(tmp_dir, target, last=SAVED_MODEL_PB)
      return version, target
    try:
      os.rename(tmp_dir, target)
      return version, target
    except OSError as e:
      if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
        raise


def _write_export_info(directory, identity, measured=None):
  info = dict(identity)
  for key, value in (measured or {}).items():
    if key not in MEASURED_KEYS:  # anything else would take part in the identity comparison
      raise ValueError(f"export info: {key!r} is not one of MEASURED_KEYS {MEASURED_KEYS}")
    info[key] = value
  fileio.write_json(os.path.join(directory, EXPORT_INFO), info, indent=2, sort_keys=True)

