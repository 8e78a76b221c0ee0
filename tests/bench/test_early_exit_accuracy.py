"""bench/experiments/early_exit_accuracy/run.sh's EE_REUSE_PRETRAINING=1 reruns only the
fine-tunings of a finished run: on a directory that does not hold one (no marker, or other
settings) it stops with one line and exit 2, before anything runs, and deletes nothing (a first
version deleted it)."""

import subprocess

from tests.helpers.paths import REPO_ROOT

SCRIPT = str(REPO_ROOT / "bench" / "experiments" / "early_exit_accuracy" / "run.sh")


def _run(directory, **env):
  return subprocess.run(["bash", SCRIPT], capture_output=True, text=True, timeout=60,
                        env={"PATH": "/usr/bin:/bin", "EE_DIR": str(directory),
                             "EE_REUSE_PRETRAINING": "1", **env})


def test_reuse_without_a_finished_run_is_one_line_and_deletes_nothing(tmp_path):
  work = tmp_path / "ee"
  work.mkdir()
  (work / "pretrain").mkdir()
  (work / "pretrain" / "ckpt-1500.index").write_text("weights")
  proc = _run(work)
  assert proc.returncode == 2
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: EE_REUSE_PRETRAINING=1: "), proc.stderr
  assert "nothing deleted" in lines[0] and not proc.stdout
  assert (work / "pretrain" / "ckpt-1500.index").read_text() == "weights"


def test_reuse_of_a_run_with_other_settings_is_refused(tmp_path):
  work = tmp_path / "ee"
  work.mkdir()
  (work / "pretrain_done").write_text("8 9600 1500\n")
  proc = _run(work, EE_CORPUS_MB="8", EE_SHALLOW_STEPS="9600", EE_PRETRAIN_STEPS="1000")
  assert proc.returncode == 2 and "EE_PRETRAIN_STEPS=1000" in proc.stderr, proc.stderr
  assert sorted(p.name for p in work.iterdir()) == ["pretrain_done"]
