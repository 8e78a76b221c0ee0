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
# Longest first (seconds of one CI run, 2 cores), then the other files of the folders that run
# scripts, then the rest; within each group the file with more tests first.
SLOW_FILES = (
    "tests/integration/test_tasks_end_to_end.py",
    "tests/integration/test_flag_matrix.py",
    "tests/integration/test_readme.py",
    "tests/export/test_precision.py",
    "tests/training/test_official_trajectory.py",
    "tests/integration/test_official_workflows.py",
    "tests/training/test_trainer.py",
    "tests/integration/test_preemption.py",
    "tests/training/test_distributed.py",
    "tests/training/test_tpu_simulation.py",
    "tests/export/test_strict_inputs.py",
)
_SCRIPT_FOLDERS = ("tests/integration/", "tests/training/", "tests/export/", "tests/tools/")


def pytest_collection_modifyitems(items):
  files = [item.nodeid.split("::")[0] for item in items]
  counts = {f: files.count(f) for f in set(files)}

  def rank(path):
    slow = SLOW_FILES.index(path) if path in SLOW_FILES else len(SLOW_FILES)
    return (slow, not path.startswith(_SCRIPT_FOLDERS), -counts[path])
  order = {f: rank(f) for f in counts}
  items.sort(key=lambda item: order[item.nodeid.split("::")[0]])  # stable: a file keeps its order
