"""create_pretraining_data on Apache Beam (issue 51): the local tool's bytes from the DirectRunner,
in-process and with 2 worker processes; NSP negatives from the whole corpus; bad input, a failed
worker and a signal as the local tool's rules say.

The local tool is the reference: each Beam run is compared byte for byte with
creation.create_pretraining_data on the same input, flags and seed.
"""

import dataclasses
import os
import signal
import subprocess
import sys
import time

import pytest

from albert_tf.data.pretraining import beam_pipeline
from albert_tf.data.pretraining import creation
from albert_tf.data.pretraining import instances as pi
from albert_tf.errors import AlbertError
from tests.data.pretraining import nsp_topics
from tests.helpers import text as text_helpers
from tests.helpers.paths import FIXTURES_DIR, REPO
from tests.helpers.scripts import describe, run_script

NSP_FIXTURE = FIXTURES_DIR / "official_nsp"  # 8 topics of 8 documents, in topic order
NSP_CORPUS, NSP_VOCAB = str(NSP_FIXTURE / "corpus.txt"), str(NSP_FIXTURE / "vocab.txt")
NSP_ARGS = ["--max_seq_length=64", "--max_predictions_per_seq=10", "--dupe_factor=4",
            "--random_seed=7", "--chunk_mb=0.001", "--random_next_sentence"]
NSP_OPTIONS = pi.InstanceOptions(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=4,
                                 random_next_sentence=True)
SOP_OPTIONS = pi.InstanceOptions(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2)
IN_PROCESS = ["--runner=DirectRunner"]


def _bytes(paths):
  return [open(p, "rb").read() for p in paths]


def _local(tmp, name, input_file, options, shards, **kwargs):
  prefix = str(tmp / "local" / name)
  creation.create_pretraining_data(input_file, prefix, options=options, output_shards=shards,
                                   show_progress=False, **kwargs)
  return creation.output_paths(prefix, shards)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
  return tmp_path_factory.mktemp("beam")


@pytest.fixture(scope="module")
def sop_input(workdir):
  """Two files with SentencePiece text, an empty document and a line that is not UTF-8."""
  model = text_helpers.make_tiny_spm_model(workdir / "spm")
  first = text_helpers.write_tiny_corpus(str(workdir / "a.txt"), repeats=1,
                                         docstring_bytes=12_000)
  second = workdir / "b.txt"
  second.write_bytes(b"\n\nthe first line of b.\nthe second \xff line.\nthird line here.\n\n"
                     b"another document.\nwith two lines.\n")
  return f"{first},{second}", model


@pytest.fixture(scope="module")
def nsp_script_run(workdir):
  """The real script, Beam DirectRunner in multi_processing mode with 2 workers, NSP."""
  out = workdir / "nsp_beam"
  proc = run_script("create_pretraining_data.py", [
      f"--input_file={NSP_CORPUS}", f"--vocab_file={NSP_VOCAB}", f"--output_file={out}/nsp",
      "--output_shards=3", "--progress=false", "--runner=DirectRunner",
      "--direct_running_mode=multi_processing", "--direct_num_workers=2"] + NSP_ARGS,
                    cwd=str(workdir))
  assert proc.returncode == 0, describe(proc)
  return proc, creation.output_paths(f"{out}/nsp", 3)


def test_nsp_two_worker_processes_write_the_local_tools_bytes(workdir, nsp_script_run):
  proc, paths = nsp_script_run
  # The shards and the vocabulary record beside them (<prefix>.vocab.json).
  assert sorted(os.listdir(os.path.dirname(paths[0]))) == sorted(
      [os.path.basename(p) for p in paths] + ["nsp.vocab.json"])
  local = _local(workdir, "nsp", NSP_CORPUS, NSP_OPTIONS, 3, vocab_file=NSP_VOCAB,
                 random_seed=7, chunk_mb=0.001, num_workers=1)
  assert _bytes(paths) == _bytes(local)
  assert all(len(b) > 1000 for b in _bytes(paths))
  assert "wrote" in proc.stderr and "instances" in proc.stderr  # the local tool's report


def test_nsp_negatives_come_from_the_whole_corpus(nsp_script_run):
  # Chunks hold ~4 documents (half a topic): a B from the chunk would stay in its topic.
  summary = nsp_topics.summarize(nsp_topics.segment_documents(nsp_script_run[1]))
  assert summary["negatives"] > 200
  assert 0.35 < summary["negative_share"] < 0.65, summary
  assert summary["other_topic_share"] > 0.75, summary  # 7 of 8 topics are other topics
  assert summary["same_document_share"] < 0.01
  assert summary["positives_same_document_share"] == 1.0


def test_sop_in_process_writes_the_local_tools_bytes(workdir, sop_input):
  input_file, model = sop_input
  kwargs = dict(spm_model_file=model, random_seed=3, chunk_mb=0.004, invalid_utf8="skip")
  local = _local(workdir, "sop", input_file, SOP_OPTIONS, 2, num_workers=2, **kwargs)
  prefix = str(workdir / "sop_beam" / "sop")
  report = beam_pipeline.create_pretraining_data(input_file, prefix, IN_PROCESS,
                                                 options=SOP_OPTIONS, output_shards=2, **kwargs)
  assert _bytes(creation.output_paths(prefix, 2)) == _bytes(local)
  assert report["invalid_utf8_lines"] == 1 and report["instances"] > 50
  assert report["empty_documents"] >= 1


def test_a_failed_worker_leaves_nothing_and_a_rerun_writes_the_same_bytes(workdir, sop_input,
                                                                          monkeypatch):
  input_file, model = sop_input
  kwargs = dict(spm_model_file=model, random_seed=3, chunk_mb=0.004, invalid_utf8="skip")
  local = _local(workdir, "fail", input_file, SOP_OPTIONS, 2, num_workers=1, **kwargs)
  real = creation.pass_records
  calls = []

  def dies_once(*args, **kw):  # the third (chunk, pass) a worker finishes raises, once
    calls.append(1)
    if len(calls) == 3:
      raise MemoryError("the worker ran out of memory")
    return real(*args, **kw)

  monkeypatch.setattr(creation, "pass_records", dies_once)
  out = workdir / "fail_beam"
  prefix = str(out / "sop")
  with pytest.raises(Exception, match="out of memory"):
    beam_pipeline.create_pretraining_data(input_file, prefix, IN_PROCESS, options=SOP_OPTIONS,
                                          output_shards=2, **kwargs)
  assert not out.exists() or os.listdir(out) == []  # no output, no temporary file
  beam_pipeline.create_pretraining_data(input_file, prefix, IN_PROCESS, options=SOP_OPTIONS,
                                        output_shards=2, **kwargs)
  assert len(calls) > 3
  assert _bytes(creation.output_paths(prefix, 2)) == _bytes(local)
  assert sorted(os.listdir(out)) == ["sop-00000-of-00002", "sop-00001-of-00002"]


@pytest.mark.parametrize("content, expected", [
    (b"fine line.\nsecond line.\n\n\x89PNG\r\n\x1a\n\x00\x00binary\n", "not UTF-8 text"),
    (b"\n\n   \n", "no instances created"),
])
def test_bad_input_is_the_local_tools_one_line_error(workdir, sop_input, content, expected):
  _, model = sop_input
  bad = workdir / f"bad_{len(content)}.txt"
  bad.write_bytes(content)
  messages = []
  for run in (lambda prefix: creation.create_pretraining_data(
      str(bad), prefix, spm_model_file=model, options=SOP_OPTIONS, show_progress=False),
              lambda prefix: beam_pipeline.create_pretraining_data(
                  str(bad), prefix, IN_PROCESS, spm_model_file=model, options=SOP_OPTIONS)):
    out = workdir / f"bad_out_{len(content)}_{len(messages)}"
    with pytest.raises(AlbertError) as raised:
      run(str(out / "x.tfrecord"))
    messages.append(str(raised.value))
    assert not out.exists() or os.listdir(out) == []
  assert messages[0] == messages[1] and expected in messages[0]
  assert "\n" not in messages[1]


def test_unknown_flags_are_one_line_errors(workdir):
  proc = run_script("create_pretraining_data.py", [
      f"--input_file={NSP_CORPUS}", f"--vocab_file={NSP_VOCAB}", "--output_file=x",
      "--runner=DirectRunner", "--direct_num_wrokers=2"], cwd=str(workdir))
  assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == (
      "error: unknown flag --direct_num_wrokers: neither a flag of create_pretraining_data.py "
      "nor an Apache Beam pipeline option"), describe(proc)


def test_a_signal_during_the_run_leaves_nothing_and_a_rerun_writes_the_same_bytes(workdir):
  # The real script, in-process runner, SIGTERM once Beam is loaded and the pipeline starts:
  # the local tool's stop (one line, exit 42, no output file, no temporary); then the same
  # command again writes the local tool's bytes.
  out = workdir / "nsp_signal"
  args = [os.path.join(REPO, "create_pretraining_data.py"), f"--input_file={NSP_CORPUS}",
          f"--vocab_file={NSP_VOCAB}", f"--output_file={out}/nsp", "--output_shards=2",
          "--runner=DirectRunner"] + NSP_ARGS[:2] + ["--dupe_factor=24"] + NSP_ARGS[3:]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO)
  proc = subprocess.Popen([sys.executable] + args, cwd=str(workdir), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  deadline = time.time() + 120
  while time.time() < deadline and proc.poll() is None:
    with open(f"/proc/{proc.pid}/maps", encoding="utf-8") as f:
      if "apache_beam/coders" in f.read():  # Beam imported: the pipeline is being built or run
        break
    time.sleep(0.05)
  time.sleep(0.5)
  proc.send_signal(signal.SIGTERM)
  _, stderr = proc.communicate(timeout=120)
  assert proc.returncode == 42, stderr[-2000:]
  assert stderr.strip().splitlines()[-1].startswith("stopped by SIGTERM")
  assert not out.exists() or os.listdir(out) == []
  subprocess.run([sys.executable] + args, cwd=str(workdir), env=env, check=True,
                 capture_output=True)
  options = dataclasses.replace(NSP_OPTIONS, dupe_factor=24)
  local = _local(workdir, "nsp24", NSP_CORPUS, options, 2, vocab_file=NSP_VOCAB, random_seed=7,
                 chunk_mb=0.001, num_workers=1)
  assert _bytes(creation.output_paths(f"{out}/nsp", 2)) == _bytes(local)
