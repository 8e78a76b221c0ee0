"""Writing SavedModels safely: atomic replace, and never over a different model.

An export directory holds `assets.extra/albert_export.json` describing what model it is (kind,
task, labels, architecture, vocabulary, sequence length). Exporting again into a directory
that holds the *same* model (e.g. newer weights of the same fine-tuning) replaces it; a
directory holding anything else is refused with a one-line AlbertError.
"""

import hashlib
import json
import os
import shutil

from absl import logging

from albert_tf.errors import AlbertError

EXPORT_INFO = os.path.join("assets.extra", "albert_export.json")


def file_sha1(path):
  """sha1 of a file's bytes (None for no file)."""
  if not path:
    return None
  digest = hashlib.sha1()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
      digest.update(chunk)
  return digest.hexdigest()


def read_export_info(export_dir):
  """The identity dict of an existing export, or None if `export_dir` is not one of ours."""
  path = os.path.join(export_dir, EXPORT_INFO)
  if not os.path.exists(path):
    return None
  with open(path, "r", encoding="utf-8") as f:
    return json.load(f)


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
  identity = json.loads(json.dumps(identity))
  if existing != identity:
    raise AlbertError(f"export directory {export_dir} already holds a different model "
                      f"({_describe_difference(existing, identity)}); choose another directory "
                      f"or delete it")


def write_atomically(export_dir, identity, write_fn):
  """Calls write_fn(tmp_dir) to fill a sibling temp dir, then swaps it into `export_dir`.

  Readers (TF Serving polling the directory) see either the old model or the new one, never a
  half-written directory.
  """
  export_dir = os.path.abspath(export_dir.rstrip("/\\"))
  check_export_dir(export_dir, identity)
  parent = os.path.dirname(export_dir)
  os.makedirs(parent, exist_ok=True)
  tmp_dir = f"{export_dir}.tmp-{os.getpid()}"
  old_dir = f"{export_dir}.old-{os.getpid()}"
  shutil.rmtree(tmp_dir, ignore_errors=True)
  try:
    write_fn(tmp_dir)
    info_path = os.path.join(tmp_dir, EXPORT_INFO)
    os.makedirs(os.path.dirname(info_path), exist_ok=True)
    with open(info_path, "w", encoding="utf-8") as f:
      json.dump(identity, f, indent=2, sort_keys=True)
    if os.path.exists(export_dir):
      os.replace(export_dir, old_dir)
    os.replace(tmp_dir, export_dir)
  finally:
    shutil.rmtree(tmp_dir, ignore_errors=True)
    shutil.rmtree(old_dir, ignore_errors=True)
  logging.info("Exported SavedModel to %s", export_dir)
  return export_dir
