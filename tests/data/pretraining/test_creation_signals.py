"""create_pretraining_data.py under real signals (issue 39): SIGTERM/SIGINT give one line and exit
42 with no worker process and no temporary file left; a SIGKILLed run leaves no worker behind
(they die with their parent), and the next run removes the temporaries of dead runs (only those)
and writes the same bytes as an uninterrupted run. Checked on the process table (/proc) and the
output directory.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

from albert_tf.data.pretraining import creation
from albert_tf.data.pretraining import instances as pi
from albert_tf.errors import EXIT_STOPPED_BY_SIGNAL
from tests.data.pretraining import nsp_topics
from tests.helpers.paths import REPO
from tests.helpers.scripts import describe, last_line

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")

WORKERS = 2
OUTPUTS = ("a.tfrecord", "b.tfrecord")
FLAGS = dict(max_seq_length=64, max_predictions_per_seq=8, dupe_factor=6, random_seed=7)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  """~0.7 MB of the topic corpus (WordPiece: tokenized in Python, a few seconds of work)."""
  root = tmp_path_factory.mktemp("signals_corpus")
  vocab = str(root / "vocab.txt")
  nsp_topics.write_vocab(vocab)
  parts = []
  for seed in range(40):
    part = root / f"part{seed}.txt"
    nsp_topics.write_corpus(str(part), seed=seed)
    parts.append(part.read_text(encoding="utf-8"))
  path = root / "corpus.txt"
  path.write_text("\n".join(parts), encoding="utf-8")
  return str(path), vocab


def _start(corpus, out_dir, new_session=False):
  text, vocab = corpus
  args = [sys.executable, os.path.join(REPO, "create_pretraining_data.py"),
          f"--input_file={text}", f"--vocab_file={vocab}",
          f"--output_file={','.join(os.path.join(out_dir, o) for o in OUTPUTS)}",
          f"--num_workers={WORKERS}", "--chunk_mb=0.02", "--progress=false"]
  args += [f"--{k}={v}" for k, v in FLAGS.items()]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO)
  return subprocess.Popen(args, cwd=out_dir, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=new_session)


def _stat(pid):
  """(state, parent pid) of a process from /proc, or None when there is no such process."""
  try:
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
      fields = f.read().rsplit(")", 1)[1].split()
  except OSError:
    return None
  return fields[0], int(fields[1])


def _alive(pid):
  stat = _stat(pid)
  return stat is not None and stat[0] != "Z"  # a zombie has ended (only not reaped yet)


def _children(pid):
  return sorted(int(e) for e in os.listdir("/proc") if e.isdigit() and
                (_stat(e) or ("", -1))[1] == pid)


def _name(pid):
  try:
    with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
      return f.read().strip()
  except OSError:
    return None


def _wait_until_working(proc, out_dir):
  """Waits until the workers run and the temporary outputs exist (the run is under way);
  returns the pids of all the run's child processes (the workers, and the stderr filter of
  albert_tf.common.console)."""
  temporaries = {f"{o}.tmp-{proc.pid}" for o in OUTPUTS}
  deadline = time.time() + 300
  while time.time() < deadline:
    if proc.poll() is not None:
      pytest.fail(f"the run ended before it could be signalled: exit {proc.returncode}\n"
                  f"{proc.stderr.read()[-2000:]}")
    children = _children(proc.pid)
    workers = [p for p in children if _name(p) == creation.WORKER_NAME]
    if len(workers) == WORKERS and temporaries <= set(os.listdir(out_dir)):
      return children
    time.sleep(0.05)
  proc.kill()
  pytest.fail("the run did not start its workers and outputs within 300 s")


def _wait_gone(pids, seconds=15):
  deadline = time.time() + seconds
  while time.time() < deadline and any(_alive(p) for p in pids):
    time.sleep(0.05)
  return [p for p in pids if _alive(p)]


@pytest.mark.parametrize("signum,whole_group", [
    (signal.SIGTERM, False),  # kill <pid> (a scheduler's preemption)
    (signal.SIGINT, True),  # Ctrl-C: the terminal signals the whole process group
])
def test_signal_stops_workers_and_removes_temporaries(tmp_path, corpus, signum, whole_group):
  proc = _start(corpus, str(tmp_path), new_session=whole_group)
  children = _wait_until_working(proc, str(tmp_path))
  if whole_group:
    os.killpg(proc.pid, signum)
  else:
    os.kill(proc.pid, signum)
  _, err = proc.communicate(timeout=120)
  assert proc.returncode == EXIT_STOPPED_BY_SIGNAL, describe(proc)
  name = signal.Signals(signum).name
  assert last_line(err).startswith(f"stopped by {name}: no output file was written"), err
  assert f"(exit status {EXIT_STOPPED_BY_SIGNAL})" in last_line(err)
  assert "Traceback" not in err and err.count(f"stopped by {name}") == 1, err  # one line
  assert _wait_gone(children, seconds=2) == []  # stopped by the parent before it exited
  assert os.listdir(tmp_path) == []  # no output, no temporary file


def test_sigkill_leaves_no_worker_and_the_next_run_cleans_up(tmp_path, corpus):
  out = str(tmp_path)
  proc = _start(corpus, out)
  children = _wait_until_working(proc, out)
  proc.kill()  # SIGKILL: no handler runs
  proc.communicate(timeout=60)
  assert _wait_gone(children) == []  # each worker died with its parent (PR_SET_PDEATHSIG)
  killed_temporaries = {f"{o}.tmp-{proc.pid}" for o in OUTPUTS}
  assert set(os.listdir(out)) == killed_temporaries  # what a rerun must clean up

  # A temporary of a live process (this test's) is kept.
  live_temporary = f"{OUTPUTS[0]}.tmp-{os.getpid()}"
  open(os.path.join(out, live_temporary), "wb").close()
  rerun = _start(corpus, out)
  _, err = rerun.communicate(timeout=600)
  assert rerun.returncode == 0, describe(rerun)
  assert sorted(os.listdir(out)) == sorted(list(OUTPUTS) + [live_temporary] +
                                          [f"{name}.vocab.json" for name in OUTPUTS])
  for name in killed_temporaries:
    assert f"note: removed {os.path.join(out, name)}, left by an interrupted run" in err

  # The same bytes as an uninterrupted run (in-process, one worker).
  text, vocab = corpus
  reference = tmp_path.parent / (tmp_path.name + "_reference")
  reference.mkdir()
  options = pi.InstanceOptions(max_seq_length=FLAGS["max_seq_length"],
                               max_predictions_per_seq=FLAGS["max_predictions_per_seq"],
                               dupe_factor=FLAGS["dupe_factor"])
  creation.create_pretraining_data(text, ",".join(str(reference / o) for o in OUTPUTS),
                                   vocab_file=vocab, options=options,
                                   random_seed=FLAGS["random_seed"], chunk_mb=0.02,
                                   show_progress=False)
  for name in OUTPUTS:
    with open(os.path.join(out, name), "rb") as a, open(reference / name, "rb") as b:
      assert a.read() == b.read(), name
