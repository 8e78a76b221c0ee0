"""Connecting to a TPU through the real script (run_pretraining.py), without a TPU: an address
that accepts and never answers (a real socket on 127.0.0.1) ends with one line, exit 2, after
--tpu_connect_timeout, or with one line, exit 42, on SIGTERM, the address named first; a TPU
name without credentials, and --strategy=tpu alone, are one line naming the flag as typed."""

import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.helpers.paths import REPO
from tests.helpers.scripts import describe, last_line, run_script
from tests.helpers.tiny_config import write_tiny_config


@pytest.fixture(scope="module")
def silent_port():
  """A port on 127.0.0.1 whose connections the kernel accepts and nobody ever answers."""
  server = socket.socket()
  server.bind(("127.0.0.1", 0))
  server.listen(16)
  yield server.getsockname()[1]
  server.close()


def _args(tmp_path, *extra):
  config = write_tiny_config(tmp_path / "albert_config.json")
  return [f"--input_file={tmp_path}/absent.tfrecord", f"--output_dir={tmp_path}/out",
          f"--albert_config_file={config}", "--do_train", "--max_seq_length=32", *extra]


def _one_line(proc, exit_code):
  assert proc.returncode == exit_code, describe(proc)
  assert "Traceback" not in proc.stderr and proc.stdout == "", describe(proc)
  return last_line(proc.stderr)


def test_silent_address_times_out_with_one_line(tmp_path, silent_port):
  address = f"grpc://127.0.0.1:{silent_port}"
  started = time.monotonic()
  proc = run_script("run_pretraining.py", _args(tmp_path, f"--tpu={address}",
                                                "--tpu_connect_timeout=2"), str(tmp_path))
  assert time.monotonic() - started < 60
  assert f"connecting to the TPU at {address} (--tpu={address}; giving up after 2 s" \
      in proc.stderr, describe(proc)
  assert _one_line(proc, 2) == (f"error: --tpu={address}: the TPU at {address} did not "
                                f"answer within 2 s (--tpu_connect_timeout)")


def test_sigterm_while_connecting_is_one_line_and_exit_42(tmp_path, silent_port):
  address = f"grpc://127.0.0.1:{silent_port}"
  proc = subprocess.Popen([sys.executable, f"{REPO}/run_pretraining.py",
                           *_args(tmp_path, f"--tpu_name={address}")], cwd=str(tmp_path),
                          env=dict(__import__("os").environ, PYTHONPATH=REPO),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  first = ""
  while "connecting to the TPU" not in first:  # the start-up line: the wait has begun
    first = proc.stderr.readline()
    assert first or proc.poll() is None, "ended before connecting"
  assert f"at {address} (--tpu_name={address}; giving up after 300 s" in first, first
  time.sleep(1)  # inside TensorFlow's connect
  proc.send_signal(signal.SIGTERM)
  stdout, rest = proc.communicate(timeout=60)
  done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, first + rest)
  assert _one_line(done, 42) == (
      f"stopped by SIGTERM while connecting to the TPU at {address} (--tpu_name={address}): "
      f"nothing was started (exit status 42)")


@pytest.mark.parametrize("flags,expected", [
    (("--tpu=my-tpu", "--tpu_zone=us-central1-b", "--gcp_project=my-project"),
     "error: --tpu=my-tpu: cannot look up the TPU my-tpu in zone us-central1-b of project "
     "my-project: "),
    (("--strategy=tpu",), "error: --strategy=tpu: cannot look up the TPU (local): no TPU is "
     "named and this host has none: name it with --tpu_name=<TPU name>; or give its address: "
     "--tpu_name=grpc://<TPU address>:8470")])
def test_no_tpu_here_is_one_line_naming_the_flag_as_typed(tmp_path, flags, expected):
  line = _one_line(run_script("run_pretraining.py", _args(tmp_path, *flags), str(tmp_path)), 2)
  assert line.startswith(expected), line
  assert "--use_tpu" not in line
  if flags[0].startswith("--tpu="):  # named as typed; what to do: credentials or a client
    assert "--tpu_name" not in line and line.endswith("; or give its address: "
                                                      "--tpu=grpc://<TPU address>:8470"), line
    assert "GOOGLE_APPLICATION_CREDENTIALS" in line or "pip install" in line, line
