"""Runs the repository's scripts inside one process with their paths on `ram://`, the stand-in
for a Cloud Storage bucket (TensorFlow's in-memory filesystem lives and dies with the process).

  python -m tests.helpers.on_ram <plan.json>

The plan (JSON) says, in order:
  "inputs":  [[local path, ram:// path], ...]   files or directories copied in first
  "runs":    [{"name": ..., "script": "run_classifier.py" | "-m albert_tf.cli.convert",
               "argv": [...], "signal_at": optional}, ...]
  "collect": [[ram:// path, local path], ...]   copied out at the end, for the test to compare
  "logical_devices": 8                           optional: that many logical CPU devices (a
                                                 v3-8's core count), set before TensorFlow starts

Each run is the script's own `__main__` (runpy), as `python <script> <argv>` would run it, and
its exit status is recorded (a SystemExit; 0 when main returns). Between runs the flags the
previous script defined and its cli modules are dropped, so every run parses its command line
afresh with its own defaults, as a new process would. A run with "signal_at": "<text>" gets a
SIGTERM as soon as a line holding <text> is printed (e.g. a progress line), the way a
preemptible VM stops a job mid-run.

The result is written to `<plan.json>.result.json`: {"runs": [{"name", "exit", "stdout",
"stderr"}]}. Nothing here writes outside the ram:// paths, the collect targets and the result
file; the test checks the working directory stays empty.
"""

import contextlib
import io
import json
import os
import runpy
import signal
import sys
import threading
import traceback

from tests.helpers.paths import REPO


class _Tee(io.TextIOBase):
  """Stands in for sys.stdout or sys.stderr for the driver's whole life (a logging handler made
  during one run keeps writing to it in the next): writes go to the real stream and to the
  current run's copy, and each piece is shown to `watch`."""

  def __init__(self, stream):
    super().__init__()
    self._stream = stream
    self.copy = io.StringIO()
    self.watch = lambda text: None

  def write(self, text):
    self._stream.write(text)
    self.copy.write(text)
    self.watch(text)
    return len(text)

  def flush(self):
    self._stream.flush()

  def isatty(self):
    return False

  def fileno(self):
    return self._stream.fileno()


def _reset_flags(baseline):
  """Drops every absl flag defined since `baseline` and the cli modules that defined them."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  for name in list(flags.FLAGS):
    if name not in baseline:
      delattr(flags.FLAGS, name)
  for module in list(sys.modules):
    if module.startswith("albert_tf.cli"):
      del sys.modules[module]


def run_one(run, baseline, out, err):
  """Runs one plan entry in this process; returns its record."""
  script, argv = run["script"], list(run["argv"])
  signal_at = run.get("signal_at")
  sent = threading.Event()

  def watch(text):
    if signal_at and not sent.is_set() and signal_at in text:
      sent.set()
      os.kill(os.getpid(), signal.SIGTERM)

  for stream in (out, err):
    stream.copy = io.StringIO()
    stream.watch = watch
  exit_code = 0
  print(f"=== {run['name']}: {script} {' '.join(argv)}", file=sys.stderr, flush=True)
  try:
    if script.startswith("-m "):
      module = script[3:]
      sys.argv = [module] + argv
      runpy.run_module(module, run_name="__main__", alter_sys=False)
    else:
      path = os.path.join(REPO, script)
      sys.argv = [path] + argv
      runpy.run_path(path, run_name="__main__")
  except SystemExit as e:
    exit_code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
  except BaseException:  # pylint: disable=broad-except  (a traceback: what the test reports)
    traceback.print_exc()
    exit_code = 1
  sys.stdout.flush()
  sys.stderr.flush()
  _reset_flags(baseline)
  for stream in (out, err):
    stream.watch = lambda text: None
  return {"name": run["name"], "exit": exit_code, "stdout": out.copy.getvalue(),
          "stderr": err.copy.getvalue(), "signalled": sent.is_set()}


def main(plan_path):
  with open(plan_path, encoding="utf-8") as f:  # the plan itself is a local test file
    plan = json.load(f)
  from absl import flags  # pylint: disable=g-import-not-at-top
  from albert_tf.common import console  # pylint: disable=g-import-not-at-top
  console.quiet_startup()
  if plan.get("logical_devices"):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * plan["logical_devices"])
  from albert_tf.common import fileio  # pylint: disable=g-import-not-at-top
  for local, remote in plan.get("inputs", []):
    if os.path.isdir(local):
      fileio.copytree(local, remote)
    else:
      fileio.makedirs(os.path.dirname(remote))
      fileio.copy(local, remote)
  baseline = set(flags.FLAGS)
  out, err = _Tee(sys.stdout), _Tee(sys.stderr)
  from absl import logging  # pylint: disable=g-import-not-at-top
  logging.get_absl_handler().python_handler.stream = err  # bound to sys.stderr at import
  records = []
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    for run in plan.get("runs", []):
      records.append(run_one(run, baseline, out, err))
  for remote, local in plan.get("collect", []):
    if fileio.isdir(remote):
      fileio.copytree(remote, local)
    elif fileio.exists(remote):
      fileio.copy(remote, local)
  listing = sorted(path for top in plan.get("list", []) for dirpath, _, names in
                   fileio.walk(top) for path in (f"{dirpath}/{n}" for n in names))
  with open(plan_path + ".result.json", "w", encoding="utf-8") as f:
    json.dump({"runs": records, "listing": listing}, f, indent=1)


if __name__ == "__main__":
  main(sys.argv[1])
