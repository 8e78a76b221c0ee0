"""Shared pytest setup: quiet TensorFlow, policy reset.

Tests mirror the package (tests/layers/ for albert_tf/layers/, ...); tests/integration/ runs the
top-level scripts end to end; tests/helpers/ holds what several of them share.
"""

import os

# Before TensorFlow is imported anywhere: no info logs.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402


@pytest.fixture
def restore_precision_policy():
  """Resets the global tf_keras mixed-precision policy after the test."""
  import tf_keras  # pylint: disable=g-import-not-at-top
  yield
  tf_keras.mixed_precision.set_global_policy("float32")
