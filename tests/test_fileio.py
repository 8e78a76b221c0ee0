"""fileio: whole files or none (a failed write leaves the old file and no temporary), identities."""

import hashlib
import os
import subprocess
import sys

import pytest

from albert_tf.common import fileio
from tests.helpers.paths import REPO_ROOT


def test_write_text_and_json_round_trip_and_make_parents(tmp_path):
  path = tmp_path / "a" / "b" / "results.json"
  fileio.write_json(path, {"f1": 91.5, "exact": [1, 2]}, indent=2)
  assert fileio.read_json(path) == {"f1": 91.5, "exact": [1, 2]}
  assert oct(os.stat(path).st_mode & 0o777) == oct(0o644)  # as a plain open() would make it
  fileio.write_text(path, "replaced\n")
  assert path.read_text() == "replaced\n"
  assert os.listdir(path.parent) == ["results.json"]  # no temporary left behind


def test_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path):
  path = tmp_path / "eval_results.txt"
  path.write_text("old\n")
  with pytest.raises(RuntimeError):
    with fileio.atomic_path(path) as temp:
      with open(temp, "w") as f:
        f.write("half a fi")
      raise RuntimeError("killed half-way")
  assert path.read_text() == "old\n"
  assert os.listdir(tmp_path) == ["eval_results.txt"]


def test_atomic_directory_replaces_the_whole_tree(tmp_path):
  target = tmp_path / "export"
  with fileio.atomic_path(target) as temp:
    os.makedirs(os.path.join(temp, "variables"))
    with open(os.path.join(temp, "saved_model.pb"), "wb") as f:
      f.write(b"pb")
  assert sorted(os.listdir(target)) == ["saved_model.pb", "variables"]
  fileio.remove(target)
  assert not target.exists()
  fileio.remove(target)  # removing what is not there is not an error


def test_sha1_and_fingerprint(tmp_path):
  path = tmp_path / "30k-clean.model"
  data = os.urandom(3 << 20)  # more than one read chunk
  path.write_bytes(data)
  assert fileio.file_sha1(path) == hashlib.sha1(data).hexdigest()
  assert fileio.file_sha1(None) is None and fileio.file_fingerprint(None) is None
  assert fileio.file_fingerprint(tmp_path / "missing") is None
  before = fileio.file_fingerprint(str(path))
  assert before == {"path": str(path), "size": 3 << 20, "mtime": int(os.stat(path).st_mtime)}
  path.write_bytes(data + b"x")
  assert fileio.file_fingerprint(str(path))["size"] == before["size"] + 1


def test_local_paths_do_not_import_tensorflow(tmp_path):
  code = ("import sys; from albert_tf.common import fileio; "
          f"fileio.write_json({str(tmp_path / 'x.json')!r}, [1]); "
          f"fileio.read_json({str(tmp_path / 'x.json')!r}); print('tensorflow' in sys.modules)")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=REPO_ROOT, timeout=120)
  assert out.returncode == 0, out.stderr[-1000:]
  assert out.stdout.strip() == "False"
