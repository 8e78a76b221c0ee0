"""Clean errors and quiet output through the real scripts: no TensorFlow C++ log lines (the
cuInit probe of a machine with the CUDA driver but no GPU), a broken TF_CONFIG, an unreachable
TPU (also spelled --tpu, as in the model garden) and a full disk give one `error:` line, exit 2.

(The TFLite converter's lines: test_official_workflows.py's quiet-output test; the filter
itself: tests/test_console.py.)
"""

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys

import pytest

from albert_tf import errors
from tests.helpers import finetune
from tests.helpers.paths import REPO
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import write_tiny_config


def _run(script, args, cwd, env=None, preexec_fn=None, timeout=180):
  """`python <script> <args>` as a user runs it (no TF_CPP_MIN_LOG_LEVEL, no TF_CONFIG)."""
  full_env = dict(os.environ, PYTHONPATH=REPO)
  for name in ("TF_CPP_MIN_LOG_LEVEL", "TF_CONFIG", "ALBERT_TF_VERBOSE", "TPU_NAME",
               "_ALBERT_TF_STDERR_FILTER"):
    full_env.pop(name, None)
  full_env.update(env or {})
  return subprocess.run([sys.executable, os.path.join(REPO, script)] + list(args),
                        capture_output=True, text=True, cwd=str(cwd), env=full_env, timeout=timeout,
                        preexec_fn=preexec_fn, check=False)


def _one_line_error(proc):
  """The `error: ...` line of a run that must have failed cleanly (exit 2, nothing else)."""
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
  lines = proc.stderr.strip().splitlines()
  assert lines[-1].startswith("error: "), proc.stderr[-3000:]
  return lines[-1]


def _closed_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]  # nothing listens there once the socket is closed


@pytest.fixture(scope="module")
def pretraining_flags(tmp_path_factory):
  """run_pretraining.py flags that get as far as choosing the strategy (then: no input)."""
  root = tmp_path_factory.mktemp("clean_errors")
  return [f"--albert_config_file={write_tiny_config(root / 'albert_config.json')}",
          f"--input_file={root / 'missing-*.tfrecord'}", f"--output_dir={root / 'out'}",
          "--max_seq_length=32", "--max_predictions_per_seq=5", "--train_batch_size=8",
          "--num_train_steps=2"]


NO_INPUT = "error: --input_file: no file matches"


# ------------------------------------------------------------------------------ quiet output
@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory):
  """A directory holding a libcuda.so.1 whose cuInit fails with 303, as the driver library of a
  machine without a GPU does (TensorFlow needs no other symbol before logging it)."""
  compiler = shutil.which("cc") or shutil.which("gcc")
  if not compiler:
    pytest.skip("no C compiler (cc/gcc) to build a fake libcuda.so.1")
  root = tmp_path_factory.mktemp("fake_cuda")
  (root / "cuda.c").write_text("int cuInit(unsigned int flags) { (void)flags; return 303; }\n")
  subprocess.run([compiler, "-shared", "-fPIC", "-o", str(root / "libcuda.so.1"),
                  str(root / "cuda.c")], check=True, capture_output=True)
  return str(root)


def test_no_cuinit_line_unless_verbose(fake_libcuda, pretraining_flags, tmp_path):
  # TF_CPP_MIN_LOG_LEVEL=2, as many users (and our test helpers) export it, still shows
  # TensorFlow's E lines; the absl-format lines (E0000 ...) ignore it altogether.
  env = {"LD_LIBRARY_PATH": os.pathsep.join(filter(None, [
      fake_libcuda, os.environ.get("LD_LIBRARY_PATH")])), "TF_CPP_MIN_LOG_LEVEL": "2"}
  proc = _run("run_pretraining.py", pretraining_flags, tmp_path, env=env)
  assert _one_line_error(proc).startswith(NO_INPUT)  # our line comes through the filter
  assert "cuInit" not in proc.stderr and "cuda" not in proc.stderr.lower(), proc.stderr
  # ALBERT_TF_VERBOSE=1 shows it: the fake driver library was loaded and failed.
  verbose = _run("run_pretraining.py", pretraining_flags, tmp_path,
                 env=dict(env, ALBERT_TF_VERBOSE="1"))
  assert verbose.returncode == 2
  assert "failed call to cuInit" in verbose.stderr and "(303)" in verbose.stderr, verbose.stderr


# ------------------------------------------------------------------------------ TF_CONFIG
def test_tf_config_with_a_task_outside_the_cluster_is_one_line(pretraining_flags, tmp_path):
  tf_config = {"cluster": {"worker": ["127.0.0.1:1111", "127.0.0.1:2222"]},
               "task": {"type": "worker", "index": 5}}
  proc = _run("run_pretraining.py", pretraining_flags, tmp_path,
              env={"TF_CONFIG": json.dumps(tf_config)})
  assert _one_line_error(proc) == (
      'error: TF_CONFIG: task index 5 is out of range: the cluster has 2 "worker" tasks')


def test_unknown_flag_and_bad_flag_value_are_one_line(pretraining_flags, tmp_path):
  proc = _run("run_pretraining.py", pretraining_flags + ["--tpu_nam=x"], tmp_path)
  assert _one_line_error(proc).startswith("error: Unknown command line flag 'tpu_nam'")
  proc = _run("run_pretraining.py", pretraining_flags + ["--train_batch_size=many"], tmp_path)
  assert _one_line_error(proc).startswith("error: flag --train_batch_size=many: ")


# ------------------------------------------------------------------------------ TPUs
def test_unreachable_tpu_is_one_line_and_fast(pretraining_flags, tmp_path):
  port = _closed_port()
  proc = _run("run_pretraining.py", pretraining_flags + [f"--tpu_name=grpc://127.0.0.1:{port}"],
              tmp_path, timeout=90)  # TensorFlow alone waits for it forever
  assert _one_line_error(proc) == (f"error: --tpu_name=grpc://127.0.0.1:{port}: cannot reach "
                                   f"the TPU at 127.0.0.1:{port} (Connection refused)")


def test_tpu_flag_of_the_model_garden_names_the_tpu(pretraining_flags, tmp_path):
  # `--tpu=my-tpu` is --tpu_name (and named as typed). Off Google Cloud a TPU name cannot be looked up: the GCE
  # metadata server is pointed at a closed port (as on a machine without one; no DNS wait).
  proc = _run("run_pretraining.py", pretraining_flags + ["--tpu=my-tpu"], tmp_path,
              env={"GCE_METADATA_HOST": f"127.0.0.1:{_closed_port()}"}, timeout=90)
  line = _one_line_error(proc)
  assert line.startswith("error: --tpu=my-tpu: cannot look up the TPU my-tpu: the GCE "
                         "metadata server is not reachable (Connection refused)"), line
  assert line.endswith("--tpu=grpc://<TPU address>:8470")  # what to do instead


# ------------------------------------------------------------------------------ a full disk
def _file_size_limit(limit):
  """preexec_fn: files may not grow past `limit` bytes; writes fail with EFBIG (no SIGXFSZ)."""
  def apply():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
  return apply


def test_full_disk_while_caching_features_is_one_line(tmp_path):
  spm = make_tiny_spm_model(str(tmp_path))
  # The run first copies the SentencePiece model (~250 KB) beside its checkpoints; the limit
  # lets that through and stops the training cache (~1 KB a record at 128 tokens).
  assert os.path.getsize(spm) < 400_000
  finetune.write_mrpc(str(tmp_path / "glue"), n_train=2000, n_dev=4, n_test=3)
  out = tmp_path / "out"
  proc = _run("run_classifier.py", [
      "--task_name=MRPC", f"--data_dir={tmp_path / 'glue'}", f"--output_dir={out}",
      f"--albert_config_file={write_tiny_config(tmp_path / 'albert_config.json')}",
      f"--spm_model_file={spm}", "--max_seq_length=128", "--train_batch_size=4", "--do_train",
      "--train_step=1"], tmp_path, preexec_fn=_file_size_limit(400_000))
  line = _one_line_error(proc)
  assert line.startswith(f"error: file too large (a file size limit: `ulimit -f`, or the file "
                         f"system's) writing {out}/mrpc_train.tf_record: the files written "
                         f"before are intact"), line
  assert not [name for name in os.listdir(out) if "mrpc_train" in name]  # no partial cache


def test_full_disk_in_python_and_tensorflow_writes_is_one_line(capsys):
  """run_main around writes to /dev/full (ENOSPC for real), from Python and from TensorFlow;
  an out-of-memory ResourceExhaustedError is not mistaken for one."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def python_write(argv):
    del argv
    with open("/dev/full", "w", encoding="utf-8") as f:
      f.write("x" * 10)

  def tensorflow_write(argv):
    del argv
    with tf.io.gfile.GFile("/dev/full", "w") as f:
      f.write("x" * 10)

  for main in (python_write, tensorflow_write):
    with pytest.raises(SystemExit) as e:
      errors.run_main(main)(["script.py"])
    assert e.value.code == 2
    assert capsys.readouterr().err == (
        "error: no space left on device writing /dev/full: the files written before are "
        "intact (each file is written whole or not at all); free some space and run the same "
        "command again\n")

  def out_of_memory(argv):
    del argv
    raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")

  with pytest.raises(tf.errors.ResourceExhaustedError):
    errors.run_main(out_of_memory)(["script.py"])
