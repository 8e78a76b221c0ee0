"""albert_tf/common/console.py's stderr filter: TensorFlow's C++ log lines out, everything else through,
promptly, also from child processes and after a crash, with the script's exit code.

The process-level tests run a small program that starts as every script does
(`console.quiet_startup()` before anything else) and then writes what TensorFlow's C++ code, a
Python traceback and our own code write to fd 2.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from albert_tf.common import console
from tests.helpers.paths import REPO

# What TensorFlow 2.20 writes (copied from real runs): absl's format before absl::InitializeLog
# (the TFLite converter; XLA's CUDA probing), TSL's format, the CPU-feature notice on two lines.
ABSL_LINE = (b"W0000 00:00:1795501003.366980    4322 tf_tfl_flatbuffer_helpers.cc:364] "
             b"Ignored output_format.\n")
CUINIT_LINE = (b"E0000 00:00:1795501003.366980    4322 cuda_platform.cc:51] failed call to "
               b"cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)\n")
TSL_LINE = (b"2026-11-24 06:16:51.017477: E external/local_xla/xla/stream_executor/cuda/"
            b"cuda_platform.cc:51] failed call to cuInit: UNKNOWN ERROR (303)\n")
PREINIT_NOTICE = (b"WARNING: All log messages before absl::InitializeLog() is called are "
                  b"written to STDERR\n")
CPU_NOTICE = (b"2026-11-24 06:16:50.288261: I tensorflow/core/platform/cpu_feature_guard.cc:210] "
              b"This TensorFlow binary is optimized to use available CPU instructions.\n"
              b"To enable the following instructions: AVX2 FMA, in other operations, rebuild "
              b"TensorFlow with the appropriate compiler flags.\n")
TENSORFLOW_NOISE = [ABSL_LINE, CUINIT_LINE, TSL_LINE, PREINIT_NOTICE, CPU_NOTICE]
FATAL_LINE = b"F0000 00:00:1795501003.366980    4322 op_kernel.cc:1] Check failed: x == y\n"


def _filtered(chunks):
  out = []
  lines = console._LineFilter(out.append)  # pylint: disable=protected-access
  for chunk in chunks:
    lines.feed(chunk)
  lines.release()
  return b"".join(out)


# What a multi-worker survivor's stderr carried when its peer was SIGKILLed (TF 2.20): one log
# line whose message goes on over five lines (captured from a CI run that printed them).
PEER_CRASH = (
    b"E1126 21:40:01.123456    4321 coordination_service_agent.cc:332] Polled an error from "
    b"coordination service (this can be an error from this or another task).\n"
    b"/job:worker/replica:0/task:1\n"
    b"The tasks have crashed. Check the task logs for an earlier error, or scheduler events "
    b"(e.g. preemption, eviction) to debug further. [type.googleapis.com/tensorflow."
    b"CoordinationServiceError='\\\"\\n\\n\\x06worker\\x10\\x01']\n"
    b"/job:worker/replica:0/task:1\n"
    b"The tasks have crashed. Check the task logs for an earlier error, or scheduler events "
    b"(e.g. preemption, eviction) to debug further.\n"
    b"The error could be from a previous operation. Restart your program to reset. "
    b"[type.googleapis.com/tensorflow.DerivedStatus='']\n")


def test_line_filter_drops_a_lost_peers_multi_line_error():
  step = b"step 20/60 | loss 7.5382 | 127.1 examples/s | ETA 0:00:05\n"
  lost = (b"lost worker 1 (127.0.0.1:37455): it stopped sending heartbeats; the newest intact "
          b"checkpoint is out/ckpt-20: run the same command on every worker to resume\n")
  data = step + PEER_CRASH + lost
  for size in (1, 13, len(data)):
    assert _filtered([data[i:i + size] for i in range(0, len(data), size)]) == step + lost
  # Without the log line before them, such lines are not TensorFlow's to drop.
  assert _filtered([step, b"/job:worker is a path we print\n"]) == (
      step + b"/job:worker is a path we print\n")

def test_line_filter_drops_tensorflow_lines_only():
  ours = [b"error: --input_file: no file matches 'x'\n", b"Traceback (most recent call last):\n",
          b'  File "run_classifier.py", line 52, in <module>\n', b"E1 is not a log line\n",
          b"2026-11-24 is a date, not a log line\n", FATAL_LINE,
          b"W1124 06:16:52.685081 140212037610368 tokenization.py:361] absl, from Python\n"]
  written = [ours[0], ABSL_LINE, ours[1], CPU_NOTICE, ours[2], TSL_LINE + ours[3],
             PREINIT_NOTICE + CUINIT_LINE, ours[4], ours[5], ours[6]]
  assert _filtered(written) == b"".join(ours)
  # The same bytes cut anywhere (a pipe read returns what is there) give the same result.
  data = b"".join(written)
  for size in (1, 7, 100):
    assert _filtered([data[i:i + size] for i in range(0, len(data), size)]) == b"".join(ours)


PROGRAM = textwrap.dedent(r"""
    import os, signal, subprocess, sys
    from albert_tf.common import console
    console.quiet_startup()
    noise = {noise!r}
    for line in noise:
      os.write(2, line)
    print("ours 1", file=sys.stderr)
    if "child" in sys.argv:  # a subprocess inherits the filtered stderr, with no filter of its own
      subprocess.run([sys.executable, "-c", "import os, sys; from albert_tf.common import console; "
                      "console.quiet_startup(); os.write(2, sys.argv[1].encode()); "
                      "print('child filter', bool(console._filter), file=sys.stderr)",
                      noise[0].decode() + "from the child\n"], check=True)
    os.write(2, noise[1] + b"ours 2\n" + noise[2])
    mode = sys.argv[1]
    if mode == "raise":
      raise RuntimeError("boom")
    if mode == "abort":
      os.abort()
    if mode == "sigterm":  # Ctrl-C / kill of the whole process group: the filter stays
      os.killpg(0, signal.SIGTERM)
    sys.exit(3)
""")


def _run_program(tmp_path, *args, env=None):
  program = tmp_path / "program.py"
  program.write_text(PROGRAM.format(noise=TENSORFLOW_NOISE), encoding="utf-8")
  full_env = dict(os.environ, PYTHONPATH=REPO)
  for name in ("ALBERT_TF_VERBOSE", "TF_CPP_MIN_LOG_LEVEL", "_ALBERT_TF_STDERR_FILTER"):
    full_env.pop(name, None)
  full_env.update(env or {})
  return subprocess.run([sys.executable, str(program)] + list(args), capture_output=True,
                        cwd=str(tmp_path), env=full_env, timeout=60, check=False,
                        start_new_session=True)


@pytest.mark.parametrize("mode, exit_code", [
    ("exit", 3), ("raise", 1), ("abort", -signal.SIGABRT), ("sigterm", -signal.SIGTERM)])
def test_everything_but_tensorflow_lines_comes_through_with_the_exit_code(
    tmp_path, mode, exit_code):
  proc = _run_program(tmp_path, mode)
  assert proc.returncode == exit_code, proc.stderr
  expected = b"ours 1\nours 2\n"
  if mode == "raise":
    expected += b"Traceback (most recent call last):\n"
  assert proc.stderr.startswith(expected), proc.stderr
  if mode == "raise":
    assert proc.stderr.endswith(b"RuntimeError: boom\n"), proc.stderr
  for line in TENSORFLOW_NOISE:
    assert line.splitlines()[0] not in proc.stderr, proc.stderr
  assert b"To enable the following instructions" not in proc.stderr


def test_child_processes_write_through_the_same_filter(tmp_path):
  proc = _run_program(tmp_path, "exit", "child")
  assert proc.returncode == 3, proc.stderr
  assert proc.stderr == b"ours 1\nfrom the child\nchild filter False\nours 2\n", proc.stderr


def test_verbose_leaves_tensorflow_lines_in(tmp_path):
  proc = _run_program(tmp_path, "exit", env={"ALBERT_TF_VERBOSE": "1"})
  assert proc.returncode == 3
  for line in TENSORFLOW_NOISE:
    assert line in proc.stderr
  assert console.verbose_requested(["run_classifier.py", "-v", "1"])
  assert console.verbose_requested(["run_classifier.py", "--verbosity=1"])
  assert not console.verbose_requested(["run_classifier.py", "--vocab_file=v"])


def test_an_unfinished_line_is_passed_on_promptly(tmp_path):
  program = tmp_path / "prompt.py"
  program.write_text(textwrap.dedent("""
      import os, sys
      from albert_tf.common import console
      console.quiet_startup()
      os.write(2, b"Overwrite out/? [y/N] ")  # no newline: a prompt waiting for the answer
      sys.stdin.readline()
  """), encoding="utf-8")
  env = dict(os.environ, PYTHONPATH=REPO)
  env.pop("ALBERT_TF_VERBOSE", None)
  proc = subprocess.Popen([sys.executable, str(program)], stdin=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env)
  try:
    os.set_blocking(proc.stderr.fileno(), False)
    seen, deadline = b"", time.monotonic() + 20
    while b"[y/N] " not in seen and time.monotonic() < deadline:
      seen += proc.stderr.read() or b""
      time.sleep(0.02)
    assert seen == b"Overwrite out/? [y/N] "
  finally:
    proc.communicate(b"n\n", timeout=30)


def test_startup_points_tf_keras_at_tf_keras_and_spares_keras_3(tmp_path):
  """A script's tf.keras is tf_keras (our models' Keras), and `import tensorflow` no longer
  imports Keras 3 at every start."""
  program = tmp_path / "keras_program.py"
  program.write_text(textwrap.dedent("""
      import sys
      from albert_tf.common import console
      console.quiet_startup()
      import tensorflow as tf
      import tf_keras
      print(tf.keras.layers.Dense is tf_keras.layers.Dense, "keras" in sys.modules)
      """), encoding="utf-8")
  env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
  env["PYTHONPATH"] = REPO
  proc = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, env=env,
                        timeout=300, check=False)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.split() == ["True", "False"]
