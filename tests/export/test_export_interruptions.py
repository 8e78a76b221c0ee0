"""Exports end cleanly (issue 30): SIGTERM/SIGINT, leftovers of killed exports, replacing an export.

* export_savedmodel.py stopped by a real SIGTERM / SIGINT while it writes: one line, exit 42,
  nothing partial at --export_path (an existing export there stays whole).
* `<name>.tmp-<pid>` folders of exports whose process no longer runs are removed by the next
  export (those of running processes are left alone); a previous export a killed process had
  moved aside is put back.
* `write_atomically` replacing an export: the old export stays until the new one is complete and
  is restored when renaming the new one in fails (injected between the two renames).
"""

import os
import signal
import subprocess
import sys
import time

import pytest

from albert_tf.errors import StopRequested
from albert_tf.export import saved_model_writer
from tests.helpers import albert_numpy
from tests.helpers.paths import REPO
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_config_dict, write_tiny_config

IDENTITY = {"kind": "test_export", "size": 1}


def _fake_export(marker):
  """write_fn for write_atomically: a directory holding saved_model.pb with `marker`."""
  def write(tmp_dir):
    os.makedirs(tmp_dir)
    with open(os.path.join(tmp_dir, "saved_model.pb"), "w", encoding="utf-8") as f:
      f.write(marker)
  return write


def _marker(export_dir):
  with open(os.path.join(export_dir, "saved_model.pb"), encoding="utf-8") as f:
    return f.read()


def _dead_pid():
  """The pid of a process that has exited (and been reaped)."""
  proc = subprocess.Popen([sys.executable, "-c", "pass"])  # pylint: disable=consider-using-with
  proc.wait()
  return proc.pid


# --------------------------------------------------------------------- replacing an export
@pytest.mark.parametrize("failure", [OSError("injected: rename failed"),
                                     StopRequested("injected: stopped by SIGTERM", 42)])
def test_replacing_an_export_restores_the_old_one_when_the_swap_fails(tmp_path, monkeypatch,
                                                                      failure):
  export_dir = str(tmp_path / "hub")
  saved_model_writer.write_atomically(export_dir, IDENTITY, _fake_export("old"))
  seen = {}

  def failing_rename(new_dir, target):
    # Between the two renames: the old export was moved aside, the new one is complete.
    seen["new complete"] = _marker(new_dir) == "new"
    seen["old aside"] = [n for n in os.listdir(tmp_path) if ".old-" in n]
    raise failure

  monkeypatch.setattr(saved_model_writer, "_rename_new_export", failing_rename)
  with pytest.raises(type(failure)):
    saved_model_writer.write_atomically(export_dir, IDENTITY, _fake_export("new"))
  assert seen == {"new complete": True, "old aside": [f"hub.old-{os.getpid()}"]}
  assert _marker(export_dir) == "old"
  assert sorted(os.listdir(tmp_path)) == ["hub"], "temporary folders left behind"
  monkeypatch.undo()
  saved_model_writer.write_atomically(export_dir, IDENTITY, _fake_export("new"))
  assert _marker(export_dir) == "new"
  assert sorted(os.listdir(tmp_path)) == ["hub"]


def test_a_failing_write_leaves_the_old_export_untouched(tmp_path):
  export_dir = str(tmp_path / "hub")
  saved_model_writer.write_atomically(export_dir, IDENTITY, _fake_export("old"))

  def write(tmp_dir):
    _fake_export("half")(tmp_dir)
    assert _marker(export_dir) == "old"  # the old export is in place while the new one is written
    raise RuntimeError("injected: write failed")

  with pytest.raises(RuntimeError):
    saved_model_writer.write_atomically(export_dir, IDENTITY, write)
  assert _marker(export_dir) == "old"
  assert sorted(os.listdir(tmp_path)) == ["hub"]


# --------------------------------------------------------------------- leftovers of killed runs
def test_leftovers_of_dead_processes_are_removed_by_the_next_export(tmp_path):
  dead = _dead_pid()
  live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # pylint: disable=consider-using-with
  try:
    # write_atomically's siblings.
    hub = tmp_path / "hub"
    for name in (f"hub.tmp-{dead}", f"other.tmp-{dead}", f"hub.tmp-{live.pid}"):
      (tmp_path / name).mkdir()
      (tmp_path / name / "variables").mkdir()
    saved_model_writer.write_atomically(str(hub), IDENTITY, _fake_export("new"))
    assert sorted(os.listdir(tmp_path)) == ["hub", f"hub.tmp-{live.pid}"]
    # write_new_version's temporary versions.
    base = tmp_path / "serving"
    (base / f"1700000000.tmp-{dead}").mkdir(parents=True)
    (base / f"1700000001.tmp-{live.pid}").mkdir()
    version = saved_model_writer.write_new_version(str(base), IDENTITY, _fake_export("v"))
    assert sorted(os.listdir(base)) == sorted([os.path.basename(version),
                                               f"1700000001.tmp-{live.pid}"])
  finally:
    live.kill()
    live.wait()


def test_a_previous_export_moved_aside_by_a_killed_process_is_restored(tmp_path):
  hub = tmp_path / "hub"
  saved_model_writer.write_atomically(str(hub), IDENTITY, _fake_export("old"))
  dead = _dead_pid()
  os.replace(hub, tmp_path / f"hub.old-{dead}")  # killed between the two renames
  (tmp_path / f"hub.tmp-{dead}").mkdir()
  saved_model_writer.write_atomically(str(hub), IDENTITY, _fake_export("new"))
  assert _marker(str(hub)) == "new"
  assert sorted(os.listdir(tmp_path)) == ["hub"]


# --------------------------------------------------------------------- real signals
@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
  """albert_base/ as the official tarball (config, TF1 model.ckpt-best, 30k-clean.model)."""
  root = tmp_path_factory.mktemp("export_signals")
  directory = root / "albert_base"
  albert_numpy.write_official_checkpoint(
      albert_numpy.make_official_weights(tiny_config_dict(), seed=1),
      str(directory / "model.ckpt-best"))
  write_tiny_config(directory / "albert_config.json")
  spm = make_tiny_spm_model(str(root))
  os.replace(spm, directory / "30k-clean.model")
  return directory


def _export_command(directory, export_path):
  return [sys.executable, os.path.join(REPO, "export_savedmodel.py"),
          f"--albert_directory={directory}", f"--export_path={export_path}"]


def _env():
  return dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2")


def _signal_while_writing(command, temporary, sig, cwd, timeout=240):
  """Starts `command`, sends `sig` as soon as the path `temporary(pid)` exists (the export is
  being written), and returns (exit status, stderr)."""
  proc = subprocess.Popen(command, cwd=cwd, env=_env(), stdout=subprocess.PIPE,  # pylint: disable=consider-using-with
                          stderr=subprocess.PIPE, text=True)
  deadline = time.monotonic() + timeout
  sent = False
  while proc.poll() is None and time.monotonic() < deadline:
    if os.path.exists(temporary(proc.pid)):
      os.kill(proc.pid, sig)
      sent = True
      break
    time.sleep(0.005)
  _, stderr = proc.communicate(timeout=timeout)
  assert sent, f"the export finished before it could be signalled:\n{stderr[-2000:]}"
  return proc.returncode, stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_export_savedmodel_stops_cleanly_on_a_signal(pretrained, tmp_path, sig):
  export_path = tmp_path / "hub" / "albert_base"
  code, stderr = _signal_while_writing(
      _export_command(pretrained, export_path), lambda pid: f"{export_path}.tmp-{pid}",
      sig, str(tmp_path))
  lines = [l for l in stderr.strip().splitlines() if l.strip()]
  assert code == 42, f"exit {code}:\n{stderr[-2000:]}"
  assert "Traceback" not in stderr
  assert lines[-1].startswith(f"stopped by {sig.name}:"), lines[-3:]
  assert not export_path.exists()
  assert os.listdir(export_path.parent) == [], "temporary folders left behind"


def test_export_savedmodel_signal_while_replacing_keeps_the_old_export(pretrained, tmp_path):
  export_path = tmp_path / "albert_hub"
  command = _export_command(pretrained, export_path)
  first = subprocess.run(command, cwd=str(tmp_path), env=_env(), capture_output=True, text=True,
                         timeout=240, check=False)
  assert first.returncode == 0, first.stderr[-2000:]
  before = {name: os.path.getmtime(export_path / name) for name in os.listdir(export_path)}
  code, stderr = _signal_while_writing(command, lambda pid: f"{export_path}.tmp-{pid}",
                                       signal.SIGTERM, str(tmp_path))
  assert code == 42, f"exit {code}:\n{stderr[-2000:]}"
  assert {name: os.path.getmtime(export_path / name)
          for name in os.listdir(export_path)} == before
  assert os.path.exists(export_path / "saved_model.pb")
  assert sorted(os.listdir(tmp_path)) == ["albert_hub"]
