"""TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1: oneDNN matmul kernels keep the weights they first saw.

Serving processes may set it (README, "Serving": 0.8-0.9x the time at batch 1 with the looped
export, bench/peers/shared_weights.py); a training run must not: every step would compute with
the first step's weights. These tests run the real scripts and real TensorFlow in subprocesses
with oneDNN forced on (TF_ENABLE_ONEDNN_OPTS=1).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import finetune
from tests.helpers.paths import REPO
from tests.helpers.scripts import describe, last_line

_ONEDNN = {"TF_ENABLE_ONEDNN_OPTS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
_FROZEN = {"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "1"}


def _python(code, *args, frozen):
  env = dict(os.environ, PYTHONPATH=REPO, **_ONEDNN, **(_FROZEN if frozen else {}))
  if not frozen:
    env.pop("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS", None)
  return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                        text=True, timeout=600, check=False)


_FIT = """
import json, numpy as np, tensorflow as tf, tf_keras
from tensorflow.python.util import _pywrap_util_port
tf.random.set_seed(0)
x = np.random.RandomState(0).randn(256, 64).astype("float32")
y = (x[:, 0] > 0).astype("int32")
model = tf_keras.Sequential([tf_keras.layers.Dense(256, activation="relu"),
                             tf_keras.layers.Dense(2)])
model.compile(tf_keras.optimizers.SGD(0.5),
              tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
history = model.fit(x, y, batch_size=256, epochs=12, verbose=0)
print(json.dumps({"onednn": bool(_pywrap_util_port.IsMklEnabled()),
                  "loss": history.history["loss"]}))
"""


def test_the_setting_really_breaks_training():
  """The premise of the guard: with it, fit() keeps computing with its first weights."""
  runs = {}
  for frozen in (False, True):
    proc = _python(_FIT, frozen=frozen)
    assert proc.returncode == 0, describe(proc)
    runs[frozen] = json.loads(last_line(proc.stdout))
  if not runs[True]["onednn"]:
    pytest.skip("this TensorFlow build has no oneDNN ops: the setting does nothing")
  plain, frozen = runs[False]["loss"], runs[True]["loss"]
  assert plain[-1] < 0.3 * plain[0], plain  # it learns
  # With the setting the loss stalls near 0.8x its start (only what bypasses the cached
  # matmul weights, e.g. the biases, still moves: 0.925 -> 0.739 in one CI run, 0.80x), far
  # above the plain run's.
  assert frozen[-1] > 0.6 * frozen[0] and frozen[-1] > 2 * plain[-1], (
      f"training with TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 learned ({frozen}; without: {plain}): "
      f"TensorFlow no longer keeps stale weights; the guard in albert_tf/common/cpu.py may go")


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory):
  root = tmp_path_factory.mktemp("frozen_weights")
  finetune.mrpc_setup(root, n_train=16, n_dev=8, n_test=5)
  return root


def _classifier(cwd, *flags, frozen):
  env = dict(os.environ, PYTHONPATH=REPO, **_ONEDNN, **(_FROZEN if frozen else {}))
  if not frozen:
    env.pop("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS", None)
  args = ["--task_name=MRPC", "--data_dir=glue", "--output_dir=out",
          "--albert_config_file=albert_config.json", "--spm_model_file=tiny_spm.model",
          "--do_lower_case", "--max_seq_length=24", "--train_step=2", "--warmup_step=0",
          "--save_checkpoints_steps=2", "--train_batch_size=4", "--learning_rate=1e-3", *flags]
  return subprocess.run([sys.executable, os.path.join(REPO, "run_classifier.py"), *args],
                        cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                        check=False)


def test_training_with_the_setting_stops_before_any_work(task_dir):
  proc = _classifier(str(task_dir), "--do_train", frozen=True)
  assert proc.returncode == 2, describe(proc)
  assert last_line(proc.stderr) == (
      "error: --do_train: TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 makes TensorFlow's oneDNN matmuls "
      "keep the weights they first saw, so training would run on stale weights; it is a "
      "setting for serving processes only: unset it for this run"), describe(proc)
  assert "Traceback" not in proc.stderr
  assert not (task_dir / "out").exists()


_SERVE = """
import json, sys, numpy as np, tensorflow as tf
fn = tf.saved_model.load(sys.argv[1]).signatures["token_ids"]
rng = np.random.default_rng(0)
out = []
for _ in range(3):  # different requests through the same kept weights
  ids = rng.integers(5, 100, size=(2, 24)).astype(np.int32)
  out.append(fn(input_ids=tf.constant(ids), input_mask=tf.ones_like(ids),
                segment_ids=tf.zeros_like(ids))["probabilities"].numpy().tolist())
print(json.dumps(out))
"""


def test_an_export_serves_the_same_answers_with_the_setting(task_dir):
  """Trained and exported without it (as the guard demands), served with and without it."""
  proc = _classifier(str(task_dir), "--do_train", "--export_dir=serving", frozen=False)
  assert proc.returncode == 0, describe(proc)
  version = [p for p in os.listdir(task_dir / "serving") if p.isdigit()][0]
  answers = {}
  for frozen in (False, True):
    # core_ops/: the version's copy without the tensorflow-text ops (plain TensorFlow loads it).
    proc = _python(_SERVE, str(task_dir / "serving" / version / "core_ops"), frozen=frozen)
    assert proc.returncode == 0, describe(proc)
    answers[frozen] = np.array(json.loads(last_line(proc.stdout)))
  assert answers[False].shape == (3, 2, 2)
  assert not np.allclose(answers[False][0], answers[False][1])  # the requests differ
  np.testing.assert_allclose(answers[True], answers[False], atol=1e-5)
