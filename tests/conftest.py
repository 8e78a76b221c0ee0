"""Shared pytest setup: quiet TensorFlow, policy reset, the order files run in (slowest first).

Tests mirror the package (tests/layers/ for albert_tf/layers/, ...); tests/integration/ runs the
top-level scripts end to end; tests/helpers/ holds what several of them share.
"""

import os

# Before TensorFlow is imported anywhere: no info logs.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# tf.keras = tf_keras, as the scripts set it (console.quiet_startup); inherited by every process a
# test starts (a SavedModel client too), it spares each the import of Keras 3.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pytest  # noqa: E402


@pytest.fixture
def restore_precision_policy():
  """Resets the global tf_keras mixed-precision policy after the test."""
  import tf_keras  # pylint: disable=g-import-not-at-top
  yield
  tf_keras.mixed_precision.set_global_policy("float32")


# ------------------------------------------------------------------ the order of `make test`
# pytest-xdist (--dist loadfile) hands whole files to the 2 workers in collection order
# (`make test` passes --no-loadscope-reorder; xdist's default order is "most tests first", which
# puts a slow file of few tests, such as test_preemption.py, last while the other worker idles).
# Longest first, by the CPU seconds of the committed profile (tests/suite_cpu_profile.txt, written
# by tests.helpers.cpu_profile from a whole-suite run): the longest-first rule keeps the two
# workers' ends close. A file the profile does not list (new, or under its cut-off) ranks after
# the listed ones: as the smallest listed file when it runs scripts, else as none.
PROFILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "suite_cpu_profile.txt")
_SCRIPT_FOLDERS = ("tests/integration/", "tests/training/", "tests/export/", "tests/tools/")


def profile_cpu_seconds(path=None):
  """{test file: CPU seconds} from a profile's `cpu wall tests file` rows (default: PROFILE)."""
  seconds = {}
  with open(path or PROFILE, encoding="utf-8") as f:
    for line in f:
      fields = line.split()
      if len(fields) == 4 and fields[0].isdigit() and fields[3].startswith("tests/"):
        seconds[fields[3]] = float(fields[0])
  return seconds


def pytest_collection_modifyitems(items):
  files = [item.nodeid.split("::")[0] for item in items]
  counts = {f: files.count(f) for f in set(files)}
  cpu = profile_cpu_seconds()
  smallest = min(cpu.values(), default=0.0)

  def rank(path):
    assumed = smallest if path.startswith(_SCRIPT_FOLDERS) else 0.0
    return (-cpu.get(path, assumed), -counts[path], path)
  order = {f: rank(f) for f in counts}
  items.sort(key=lambda item: order[item.nodeid.split("::")[0]])  # stable: a file keeps its order


# ------------------------------------------------------------------ where the suite's CPU goes
# ALBERT_TF_TEST_CPU_PROFILE=<prefix>: each worker appends, per test, the CPU seconds its own
# process and its reaped children (the scripts a test runs) spent, and the wall seconds, to
# <prefix>.<pid>.jsonl; `python -m tests.helpers.cpu_profile <prefix>` sums them per file. CPU
# seconds do not depend on what else the machine runs, so they rank files on a busy machine.
_CPU_PROFILE = os.environ.get("ALBERT_TF_TEST_CPU_PROFILE")


def _cpu_seconds():
  import resource  # pylint: disable=g-import-not-at-top
  own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                        resource.RUSAGE_CHILDREN))
  return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
  if not _CPU_PROFILE:
    yield
    return
  import json  # pylint: disable=g-import-not-at-top
  import time  # pylint: disable=g-import-not-at-top
  cpu, wall = _cpu_seconds(), time.monotonic()
  yield
  record = {"test": item.nodeid, "cpu": round(_cpu_seconds() - cpu, 2),
            "wall": round(time.monotonic() - wall, 2)}
  with open(f"{_CPU_PROFILE}.{os.getpid()}.jsonl", "a", encoding="utf-8") as f:
    f.write(json.dumps(record) + "\n")
