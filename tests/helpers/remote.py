"""ram:// stand-ins for a bucket: TensorFlow's in-memory filesystem takes the place of gs:// in
the tests (its differences from Cloud Storage are in albert_tf/common/fileio.py's docstring)."""

import os
import uuid

from albert_tf.common import fileio


def ram_bucket():
  """A new, empty ram:// "bucket" (a unique name: tests never see each other's files)."""
  return f"ram://{uuid.uuid4().hex}"


def copied_to_ram(local_path):
  """Copies a local file or directory into a new bucket; returns its ram:// path (same name)."""
  remote = f"{ram_bucket()}/{os.path.basename(os.fspath(local_path).rstrip(os.sep))}"
  if fileio.isdir(local_path):
    fileio.copytree(local_path, remote)
  else:
    fileio.copy(local_path, remote)
  return remote
