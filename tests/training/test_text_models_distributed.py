"""TextClassifier.fit() under strategy.scope(), as Keras users distribute it: two real
MultiWorkerMirroredStrategy workers on 127.0.0.1, and a TPU's recipe simulated (8
logical CPU devices fed by a tf.data that preprocesses, static shapes; the step compiled by XLA).
Each run trains the same seeded model on the same batches as one device does, and must end with
its weights (tests/helpers/keras_fit.py runs them, each in a fresh process). MirroredStrategy on
raw texts: tests/training/test_text_models.py."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import training as helpers
from tests.helpers.model_dirs import TARBALL, write_model_directories
from tests.helpers.paths import REPO
from tests.helpers.text import make_tiny_spm_model

# The runs sum the same floats in another order (per replica, then across). Adam moves each
# weight by about the learning rate per step whatever its gradient's size, so that rounding, on
# a gradient element near 0, becomes a different step: a few weights in ten thousand end up to
# 2.1e-4 apart on one machine, under 1e-4 on another (0.2 % of the ~0.1 the weights move). So: every weight
# within WEIGHT_ATOL, nearly all within BULK_ATOL, the losses within LOSS_RTOL: a run on other
# batches, or without the other replicas' gradients, takes other steps of about 1e-2 each.
WEIGHT_ATOL, BULK_ATOL, BULK_SHARE, LOSS_RTOL = 1e-3, 1e-4, 0.99, 1e-4


@pytest.fixture(scope="module")
def init(tmp_path_factory):
  root = tmp_path_factory.mktemp("keras_distributed")
  return write_model_directories(root, make_tiny_spm_model(root))[TARBALL]


@pytest.fixture(scope="module")
def devices_run(init, tmp_path_factory):
  out = tmp_path_factory.mktemp("keras_devices")
  proc = subprocess.run([sys.executable, "-m", "tests.helpers.keras_fit", "devices", init,
                         str(out)], cwd=str(REPO), env=helpers.subprocess_env(),
                        capture_output=True, text=True, timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr[-4000:]
  return out


def _weights(out, run):
  """(before, after): the model's weights before and after its fit."""
  count = json.loads((out / f"{run}.json").read_text())["weights"]
  saved = np.load(out / f"{run}.npz")
  values = [saved[f"arr_{i}"] for i in range(2 * count)]
  return values[:count], values[count:]


def _assert_trained_alike(out, run, reference_out, reference="one"):
  before, after = _weights(out, run)
  ref_before, ref_after = _weights(reference_out, reference)
  for got, want in zip(before, ref_before):  # the same initial model (seeded head)
    np.testing.assert_array_equal(got, want)
  # (the loss metric's scalar total and count left out: they are not trained weights)
  moved = max(float(np.abs(a - b).max()) for a, b in zip(ref_after, ref_before) if np.ndim(a))
  assert moved > 50 * WEIGHT_ATOL, moved  # the fit moved the weights: equal ends mean something
  for got, want in zip(after, ref_after):
    np.testing.assert_allclose(got, want, rtol=0, atol=WEIGHT_ATOL)
  apart = np.concatenate([np.abs(got - want).ravel() for got, want in zip(after, ref_after)])
  assert np.mean(apart <= BULK_ATOL) >= BULK_SHARE, np.sort(apart)[-20:]
  got_loss = json.loads((out / f"{run}.json").read_text())["loss"]
  want_loss = json.loads((reference_out / f"{reference}.json").read_text())["loss"]
  np.testing.assert_allclose(got_loss, want_loss, rtol=LOSS_RTOL)


@pytest.mark.parametrize("run", ["tpu_input", "tpu_xla"])
def test_strategy_scope_trains_as_one_device(devices_run, run):
  _assert_trained_alike(devices_run, run, devices_run)


def test_two_multi_worker_workers_train_as_one_device(init, devices_run, tmp_path):
  ports = [helpers.free_port() for _ in range(2)]
  workers = []
  for index in range(2):
    log = open(tmp_path / f"worker{index}.log", "w", encoding="utf-8")  # pylint: disable=consider-using-with
    workers.append((subprocess.Popen(  # pylint: disable=consider-using-with
        [sys.executable, "-m", "tests.helpers.keras_fit", "worker", init, str(tmp_path)],
        cwd=str(REPO), env=helpers.subprocess_env({"TF_CONFIG": helpers.tf_config(ports, index)}),
        stdout=log, stderr=subprocess.STDOUT), log))
  try:
    for proc, _ in workers:
      proc.wait(timeout=600)
  finally:
    for proc, log in workers:
      if proc.poll() is None:
        proc.kill()
      log.close()
  for index, (proc, _) in enumerate(workers):
    assert proc.returncode == 0, (tmp_path / f"worker{index}.log").read_text()[-4000:]
  for index in range(2):
    _assert_trained_alike(tmp_path, f"worker{index}", devices_run)
