"""An export SIGKILLed while it writes (issue 39): the next export removes everything the killed
one left, its `<name>.tmp-<pid>-assets` staging folder included, and writes a whole export."""

import os
import signal
import subprocess
import time

from albert_tf.export import saved_model_writer
from tests.export.test_export_interruptions import (  # pylint: disable=unused-import
    IDENTITY, _dead_pid, _env, _export_command, _fake_export, pretrained)


def test_leftover_staging_folders_of_dead_exports_are_removed(tmp_path):
  dead = _dead_pid()
  base = tmp_path / "serving"
  for name in (f"1700000000.tmp-{dead}", f"1700000000.tmp-{dead}-assets",
               f"1700000000.old-{dead}-assets"):
    (base / name).mkdir(parents=True)
  (base / "notes-assets").mkdir()  # not ours
  version = saved_model_writer.write_new_version(str(base), IDENTITY, _fake_export("v"))
  assert sorted(os.listdir(base)) == sorted([os.path.basename(version), "notes-assets"])


def test_export_killed_once_variables_appear_leaves_nothing_after_the_next_export(pretrained,
                                                                                 tmp_path):
  export_path = tmp_path / "hub"
  proc = subprocess.Popen(_export_command(pretrained, export_path), cwd=str(tmp_path),  # pylint: disable=consider-using-with
                          env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  deadline = time.monotonic() + 300
  killed = False
  while proc.poll() is None and time.monotonic() < deadline:
    if os.path.isdir(f"{export_path}.tmp-{proc.pid}/variables"):
      proc.send_signal(signal.SIGKILL)
      killed = True
      break
    time.sleep(0.002)
  _, stderr = proc.communicate(timeout=60)
  assert killed, f"the export finished before variables/ appeared:\n{stderr[-2000:]}"
  left = sorted(os.listdir(tmp_path))
  assert f"hub.tmp-{proc.pid}" in left and f"hub.tmp-{proc.pid}-assets" in left, left
  done = subprocess.run(_export_command(pretrained, export_path), cwd=str(tmp_path), env=_env(),
                        capture_output=True, text=True, timeout=300, check=False)
  assert done.returncode == 0, done.stderr[-2000:]
  assert sorted(os.listdir(tmp_path)) == ["hub"]
  assert (export_path / "saved_model.pb").exists()
