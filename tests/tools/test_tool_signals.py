"""SIGTERM/SIGINT in the long-running tools (issue 39, part 1): the converter, build_corpus and
train_spm (create_pretraining_data: tests/data). Real signals to real processes:

* one line (`stopped by SIGTERM: ...`), exit status 42, no traceback;
* no process of the command left (its stderr filter included), no output and no temporary left
  in the output's directory;
* temporaries that killed runs left (every name one can have) are removed by the next run,
  those of running processes and unrelated files are not;
* the rerun writes the same bytes as a run never interrupted.
"""

import filecmp
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import albert_numpy
from tests.helpers.paths import REPO
from tests.helpers.text import write_tiny_corpus
from tests.helpers.tiny_config import tiny_config_dict, write_tiny_config

STOPPED = ("stopped by {sig}: its files are written whole or not at all, and none of its "
           "temporaries is left; run the same command again (exit status 42)")


def _env():
  return dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")


def _run(argv, cwd):
  return subprocess.run([sys.executable] + argv, cwd=cwd, env=_env(), capture_output=True,
                        text=True, timeout=600, check=False)


def _handles_sigterm(pid):
  """Whether the process has installed a SIGTERM handler (the command's StopCommand is on)."""
  try:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
      caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
  except (OSError, StopIteration):
    return False
  return bool(caught & (1 << (signal.SIGTERM - 1)))


def _children(pid):
  """Pids of the processes whose parent is `pid` (from the process table)."""
  found = []
  for entry in os.listdir("/proc"):
    if entry.isdigit():
      try:
        with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
          fields = f.read().rsplit(")", 1)[1].split()
      except OSError:
        continue
      if int(fields[1]) == pid:
        found.append(int(entry))
  return found


def _alive(pid):
  try:
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except OSError:
    return False


def _signal_when(argv, cwd, sig, ready, timeout=300):
  """Starts the command, sends `sig` once `ready(pid)` holds (polled), waits. Returns
  (exit status, stdout, stderr, pids of its child processes seen before the signal)."""
  proc = subprocess.Popen([sys.executable] + argv, cwd=cwd, env=_env(),  # pylint: disable=consider-using-with
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  deadline = time.monotonic() + timeout
  children = []
  sent = False
  while proc.poll() is None and time.monotonic() < deadline:
    if _handles_sigterm(proc.pid) and ready(proc.pid):
      children = _children(proc.pid)
      proc.send_signal(sig)
      sent = True
      break
    time.sleep(0.005)
  stdout, stderr = proc.communicate(timeout=timeout)
  assert sent, f"finished before it could be signalled:\n{stderr[-2000:]}"
  return proc.returncode, stdout, stderr, children


def _assert_stopped(code, stderr, sig, children):
  assert code == 42, f"exit {code}:\n{stderr[-3000:]}"
  assert stderr.splitlines() == [STOPPED.format(sig=sig.name)], stderr[-3000:]
  deadline = time.monotonic() + 10
  while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
    time.sleep(0.05)
  assert not [pid for pid in children if _alive(pid)], "a process of the command is left"


def _dead_pid():
  proc = subprocess.Popen([sys.executable, "-c", "pass"])  # pylint: disable=consider-using-with
  proc.wait()
  return proc.pid


@pytest.fixture(scope="module")
def live_pid():
  proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # pylint: disable=consider-using-with
  yield proc.pid
  proc.kill()
  proc.wait()


# ------------------------------------------------------------------------------ build_corpus
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_build_corpus_signal_leftovers_and_rerun(tmp_path, sig, live_pid):
  out = tmp_path / "out"
  out.mkdir()
  dead = _dead_pid()
  leftovers = [f"corpus.txt.tmp-{dead}"]
  kept = [f"corpus.txt.tmp-{live_pid}", "notes.txt", f"other.txt.tmp-{dead}"]
  argv = ["-m", "albert_tf.cli.build_corpus", "--output_file=out/corpus.txt", "--max_mb=3"]
  # Signalled while the corpus is being written (its temporary exists).
  code, _, stderr, children = _signal_when(
      argv, tmp_path, sig, lambda pid: (out / f"corpus.txt.tmp-{pid}").exists())
  _assert_stopped(code, stderr, sig, children)
  assert os.listdir(out) == []
  # A killed run's temporary is removed by the next run; the result is a clean run's.
  for name in leftovers + kept:
    (out / name).write_text("left\n")
  done = _run(argv, tmp_path)
  assert done.returncode == 0, done.stderr[-2000:]
  assert sorted(os.listdir(out)) == sorted(kept + ["corpus.txt"])
  clean = _run(["-m", "albert_tf.cli.build_corpus", "--output_file=clean.txt", "--max_mb=3"],
               tmp_path)
  assert clean.returncode == 0, clean.stderr[-2000:]
  assert filecmp.cmp(out / "corpus.txt", tmp_path / "clean.txt", shallow=False)


# ------------------------------------------------------------------------------ train_spm
@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  return write_tiny_corpus(str(tmp_path_factory.mktemp("spm_corpus") / "corpus.txt"),
                           repeats=40, docstring_bytes=1_500_000)


def test_train_spm_signal_during_training_leftovers_and_rerun(tmp_path, corpus, live_pid):
  """SentencePiece trains inside one C++ call, where Python's handler cannot run: the command
  still stops within seconds with its line, and leaves nothing."""
  out = tmp_path / "spm"
  out.mkdir()
  argv = ["-m", "albert_tf.cli.train_spm", f"--input_file={corpus}",
          "--model_prefix=spm/30k-clean", "--vocab_size=2000"]
  started = {}

  def training(pid):  # a second thread runs once SentencePiece starts (its trainer threads)
    started.setdefault(pid, time.monotonic())
    return time.monotonic() - started[pid] > 1.0

  code, _, stderr, children = _signal_when(argv, tmp_path, signal.SIGTERM, training)
  _assert_stopped(code, stderr, signal.SIGTERM, children)
  assert os.listdir(out) == []
  dead = _dead_pid()
  leftovers = [f"30k-clean.tmp-{dead}.model", f"30k-clean.tmp-{dead}.vocab",
               f"30k-clean.model.tmp-{dead}"]
  kept = [f"30k-clean.tmp-{live_pid}.model", "readme.txt"]
  for name in leftovers + kept:
    (out / name).write_text("left\n")
  done = _run(argv, tmp_path)
  assert done.returncode == 0, done.stderr[-2000:]
  assert sorted(os.listdir(out)) == sorted(kept + ["30k-clean.model", "30k-clean.vocab"])
  # A run never interrupted, with the same command elsewhere: the same bytes (the model
  # records its prefix, trainer_spec.model_prefix: the final one, not the temporary).
  (tmp_path / "clean" / "spm").mkdir(parents=True)
  clean = _run(argv, tmp_path / "clean")
  assert clean.returncode == 0, clean.stderr[-2000:]
  for name in ("30k-clean.model", "30k-clean.vocab"):
    assert filecmp.cmp(out / name, tmp_path / "clean" / "spm" / name, shallow=False), name


# ------------------------------------------------------------------------------ the converter
@pytest.fixture(scope="module")
def official(tmp_path_factory):
  """A tiny official TF1 checkpoint and its config."""
  root = tmp_path_factory.mktemp("convert_signals")
  albert_numpy.write_official_checkpoint(
      albert_numpy.make_official_weights(tiny_config_dict(), seed=1),
      str(root / "model.ckpt-best"))
  write_tiny_config(root / "albert_config.json")
  return root


def _convert_argv(official_dir, output, *extra):
  return ["-m", "albert_tf.cli.convert",
          f"--albert_config_file={official_dir / 'albert_config.json'}",
          f"--input_checkpoint={official_dir / 'model.ckpt-best'}",
          f"--output_checkpoint={output}"] + list(extra)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_converter_signal(tmp_path, official, sig):
  out = tmp_path / "tf2"
  out.mkdir()
  code, _, stderr, children = _signal_when(_convert_argv(official, "tf2/ckpt"), tmp_path, sig,
                                           lambda pid: True)
  _assert_stopped(code, stderr, sig, children)
  assert os.listdir(out) == []


@pytest.mark.parametrize("output_format", ["tf2", "tf1"])
def test_converter_removes_killed_runs_temporaries_and_reruns_identically(
    tmp_path, official, live_pid, output_format):
  out = tmp_path / "out"
  out.mkdir()
  dead = _dead_pid()
  # Every name a killed save leaves: the atomic prefix's files, TensorFlow's temporaries of
  # them, its `_temp` folder, a beside-config's temporary.
  leftovers = [f".ckpt.tmp-{dead}.index", f".ckpt.tmp-{dead}.data-00000-of-00001",
               f".ckpt.tmp-{dead}.data-00000-of-00001.tempstate123456",
               f".ckpt.tmp-{dead}.index.tempstate99", f".ckpt.tmp-{dead}_temp",
               f"checkpoint.tmp-{dead}", f"albert_config.json.tmp-{dead}"]
  kept = [f".ckpt.tmp-{live_pid}.index", "ckpt.notes"]
  for name in leftovers + kept:
    if name.endswith("_temp"):
      (out / name).mkdir()
      (out / name / "part-00000-of-00001.index").write_text("left")
    else:
      (out / name).write_text("left\n")
  argv = _convert_argv(official, "out/ckpt", f"--output_format={output_format}")
  done = _run(argv, tmp_path)
  assert done.returncode == 0, done.stderr[-2000:]
  written = sorted(set(os.listdir(out)) - set(kept))
  # (albert_config.json beside the checkpoint: written by the converter's config step.)
  assert set(written) - {"albert_config.json"} == {
      "checkpoint", "ckpt.data-00000-of-00001", "ckpt.index"}, written
  assert sorted(set(os.listdir(out)) - set(written)) == sorted(kept)
  (tmp_path / "clean").mkdir()
  clean = _run(_convert_argv(official, "clean/ckpt", f"--output_format={output_format}"),
               tmp_path)
  assert clean.returncode == 0, clean.stderr[-2000:]
  for name in written:
    assert filecmp.cmp(out / name, tmp_path / "clean" / name, shallow=False), name
