"""Shared pytest setup: quiet TensorFlow, tiny configs, policy reset."""

import os

# Before TensorFlow is imported anywhere: no info logs.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import json  # noqa: E402
import pathlib  # noqa: E402

import pytest  # noqa: E402

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
CONFIG_DIR = REPO_ROOT / "configs"


def tiny_config_dict(**overrides):
  """The tiny test config (H=32, L=2, vocab 1000) with overrides."""
  cfg = json.loads((CONFIG_DIR / "albert_tiny.json").read_text())
  cfg.update(overrides)
  return cfg


@pytest.fixture
def repo_root():
  return REPO_ROOT


@pytest.fixture
def restore_precision_policy():
  """Resets the global tf_keras mixed-precision policy after the test."""
  import tf_keras  # pylint: disable=g-import-not-at-top
  yield
  tf_keras.mixed_precision.set_global_policy("float32")
