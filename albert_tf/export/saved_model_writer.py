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
"""

import errno
import json
import os
import re
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


def read_export_info(export_dir):
  """The identity dict of an existing export, or None if `export_dir` is not one of ours."""
  path = os.path.join(export_dir, EXPORT_INFO)
  if not os.path.exists(path):
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
  if not os.path.exists(export_dir):
    return
  if not os.path.isdir(export_dir):
    raise AlbertError(f"export directory {export_dir} is a file, expected a directory")
  if not os.listdir(export_dir):
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
# and what is named after them (`<version>.tmp-<pid>-assets`, the staging folder of assets).
_LEFTOVER = re.compile(r"^(?P<name>.+?)\.(?P<kind>tmp|old)-(?P<pid>[0-9]+)(?P<rest>[-_.].*)?$")


def remove_stale_leftovers(parent, restore_to=None):
  """Removes the `<name>.tmp-<pid>` (and `<name>.old-<pid>`, and `<name>.tmp-<pid>-assets`)
  folders in `parent` that exports of processes no longer running left (killed half-way, e.g.
  by SIGKILL).

  restore_to: the export path `write_atomically` replaces: a dead process's `<it>.old-<pid>` (the
    previous export, moved aside just before the new one was renamed in) is put back when the
    path itself is missing, instead of being deleted.
  """
  if not os.path.isdir(parent):
    return
  for entry in sorted(os.listdir(parent)):
    match = _LEFTOVER.match(entry)
    if not match or int(match["pid"]) == os.getpid() or fileio.pid_running(int(match["pid"])):
      continue
    path = os.path.join(parent, entry)
    if (match["kind"] == "old" and not match["rest"] and restore_to is not None
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
  """
  export_dir = os.path.abspath(export_dir.rstrip("/\\"))
  check_export_dir(export_dir, identity)
  remove_stale_leftovers(os.path.dirname(export_dir), restore_to=export_dir)
  check_export_dir(export_dir, identity)  # a restored previous export is checked too
  fileio.makedirs(os.path.dirname(export_dir))
  tmp_dir = fileio.temporary_name(export_dir)
  old_dir = f"{export_dir}.old-{os.getpid()}"
  try:
    fileio.remove(tmp_dir)  # a leftover of a killed run with our pid
    write_fn(tmp_dir)
    _write_export_info(tmp_dir, identity)
    warmup.write_warmup_requests(tmp_dir, identity)
    _swap_in(tmp_dir, export_dir, old_dir)
  finally:
    fileio.remove(tmp_dir)
  logging.info("Exported SavedModel to %s", export_dir)
  return export_dir


def _swap_in(new_dir, export_dir, old_dir):
  """Renames the complete `new_dir` to `export_dir`; an existing export is moved aside first and
  deleted after, or put back if the rename fails."""
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
  if not os.path.isdir(export_base):
    return []
  return sorted((int(name), os.path.join(export_base, name)) for name in os.listdir(export_base)
                if name.isdigit() and os.path.isdir(os.path.join(export_base, name)))


def latest_export(path):
  """`path` itself if it is a SavedModel, else its newest version directory, else None."""
  if os.path.exists(os.path.join(path, "saved_model.pb")):
    return path
  versions = export_versions(path)
  return versions[-1][1] if versions else None


def write_new_version(export_base, identity, write_fn, measured=None):
  """Calls write_fn(tmp_dir), then renames it to `<export_base>/<version>`; returns that path.

  TF Serving (`--model_base_path=<export_base>`) sees only whole versions: the version is
  written under a non-numeric temporary name first.
  measured: optional {key in MEASURED_KEYS: value} written into the info beside the identity.
  Raises:
    AlbertError: export_base is a file, holds a SavedModel directly (not TF Serving's layout),
      or its newest version is a different model (or not an albert_tf export).
  """
  export_base = os.path.abspath(export_base.rstrip("/\\"))
  if os.path.exists(export_base) and not os.path.isdir(export_base):
    raise AlbertError(f"export directory {export_base} is a file, expected a directory")
  if os.path.exists(os.path.join(export_base, "saved_model.pb")):
    raise AlbertError(f"export directory {export_base} holds a SavedModel directly; TF Serving "
                      f"expects numbered versions (<dir>/<version>/saved_model.pb): choose a new "
                      f"directory")
  versions = export_versions(export_base)
  if versions:
    check_export_dir(versions[-1][1], identity)
  remove_stale_leftovers(export_base)
  fileio.makedirs(export_base)
  # The temporary name is not a number, so TF Serving never loads it; the version number is
  # chosen only when the export is complete (`_claim_version`).
  tmp_dir = fileio.temporary_name(os.path.join(export_base, _NEW_VERSION))
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
  """Renames the complete `tmp_dir` to the next version `<export_base>/<version>`: seconds
  since the epoch, above every existing version. Returns (version, path).

  Exports into one base path at once each get a version of their own, numbered in the order
  they finish: a directory is never renamed over a non-empty one, so when another export took
  the number first (between listing and renaming) the rename fails and the next number is tried.
  """
  while True:
    versions = export_versions(export_base)
    version = max(int(time.time()), versions[-1][0] + 1 if versions else 0)
    target = os.path.join(export_base, str(version))
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

