"""The shared Trainer on a tiny task: accumulation, exact resume, non-finite loss, eval/predict,
mixed precision, recompute. Mixed precision, XLA, gradient accumulation and a 2-replica
MirroredStrategy with recompute run together in a subprocess (logical CPU devices must be set
before TensorFlow initialises)."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.training import optimizer as opt_lib, trainer as trainer_lib
from tests.helpers import training as helpers
from tests.helpers.tiny_config import tiny_config_dict, write_tiny_config


def _trainer(output_dir, task=None, steps=8, **kwargs):
  task = task or helpers.make_toy_task()
  kwargs.setdefault("log_every_n_steps", 2)
  kwargs.setdefault("save_checkpoints_steps", 2)
  return trainer_lib.Trainer(
      task, tf.distribute.get_strategy(), str(output_dir),
      optimizer_fn=lambda: opt_lib.create_optimizer("lamb", 0.05, steps, 2), **kwargs)


def _weights(trainer):
  return [v.numpy() for v in trainer.model.trainable_variables]


def _same_init(trainer, reference):
  """Copies `reference`'s initial weights, so two trainers differ only in how they train."""
  trainer.model.set_weights(reference.model.get_weights())


def test_gradient_accumulation_equals_the_full_batch(tmp_path):
  tf_keras.utils.set_random_seed(1)
  full = _trainer(tmp_path / "full")
  accumulated = _trainer(tmp_path / "accum", gradient_accumulation_steps=4)
  # Build both, then give them the same initial weights.
  full.build(full.inputs.training(16)[1])
  accumulated.build(accumulated.inputs.training(16)[1])
  _same_init(accumulated, full)
  a = full.train(4, 16)
  b = accumulated.train(4, 16)
  assert a["global_step"] == b["global_step"] == 4
  for x, y in zip(_weights(full), _weights(accumulated)):
    np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-6)
  assert abs(a["loss"] - b["loss"]) < 1e-5
  assert abs(a["twice_loss"] - 2 * a["loss"]) < 1e-5  # aux losses are logged too
  with pytest.raises(AlbertError, match="--train_batch_size=10 .* multiple of"):
    _trainer(tmp_path / "bad", gradient_accumulation_steps=4).train(4, 10)


def test_resume_continues_exactly(tmp_path):
  """Stopped at a checkpoint, a fresh Trainer resumes to the same weights, optimizer state,
  schedule position and data position as an uninterrupted run."""
  tf_keras.utils.set_random_seed(2)
  straight = _trainer(tmp_path / "straight")
  straight.train(8, 8)
  initial = tf.train.load_checkpoint(str(tmp_path / "straight" / "ckpt-2"))
  del initial

  tf_keras.utils.set_random_seed(2)
  first = _trainer(tmp_path / "resumed")
  first.train(4, 8)             # "killed" after the checkpoint at step 4
  second = _trainer(tmp_path / "resumed")
  second.train(8, 8)
  assert second.global_step == 8
  ref = helpers.checkpoint_values(str(tmp_path / "straight" / "ckpt-8"))
  got = helpers.checkpoint_values(str(tmp_path / "resumed" / "ckpt-8"))
  assert set(ref) == set(got)
  assert any("optimizer" in k and "/m/" in k for k in got), sorted(got)[:20]
  for key in ref:
    np.testing.assert_allclose(got[key], ref[key], rtol=1e-6, atol=1e-7, err_msg=key)
  # Checkpoints kept: keep_checkpoint_max (5) newest.
  assert tf.train.latest_checkpoint(str(tmp_path / "resumed")).endswith("ckpt-8")


def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
  task = helpers.make_toy_task()
  _trainer(tmp_path, task=task).train(2, 8)
  task.scale = float("nan")
  broken = _trainer(tmp_path, task=task)
  with pytest.raises(trainer_lib.NonFiniteLossError, match=r"non-finite loss at step 3; .*"
                     r"ckpt-2 moved to .*diverged_checkpoints/; no earlier checkpoint") as e:
    broken.train(8, 8)
  assert "\n" not in str(e.value)
  # ckpt-2's weights gave the NaN: set aside (kept), so a rerun does not resume into it again.
  assert tf.train.latest_checkpoint(str(tmp_path)) is None
  assert os.path.exists(tmp_path / "diverged_checkpoints" / "ckpt-2.index")
  assert not os.path.exists(tmp_path / "ckpt-4.index")


def test_evaluate_and_predict(tmp_path):
  tf_keras.utils.set_random_seed(3)
  trainer = _trainer(tmp_path, steps=4)
  trainer.train(4, 8)
  results = trainer.evaluate(10, results_file=str(tmp_path / "eval_results.txt"))
  assert results["global_step"] == 4
  assert results["num_examples"] == 64          # 6 full batches + the partial one
  assert results["aggregated_examples"] == 64.0
  # The per-example mean loss equals a direct computation over the 64 examples.
  task = trainer.task
  (features, labels), = task.build_inputs("eval", 64).take(1)
  logits = trainer.model(features, training=False)["logits"]
  expected = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels["label_ids"], logits))
  np.testing.assert_allclose(results["loss"], float(expected), rtol=1e-5)
  expected_acc = np.mean(np.argmax(logits.numpy(), -1) == labels["label_ids"].numpy())
  np.testing.assert_allclose(results["accuracy"], expected_acc, rtol=1e-6)
  text = (tmp_path / "eval_results.txt").read_text().splitlines()
  assert text == sorted(text) and "global_step = 4" in text

  outputs = [out["logits"] for _, out in trainer.predict(10, checkpoint_path=str(tmp_path))]
  np.testing.assert_allclose(np.concatenate(outputs), logits.numpy(), rtol=1e-5, atol=1e-6)

  # An evaluate-only trainer (no optimizer) restores the step and weights of a checkpoint.
  evaluator = trainer_lib.Trainer(task, None, str(tmp_path))
  again = evaluator.evaluate(10, checkpoint_path=str(tmp_path / "ckpt-2"))
  assert again["global_step"] == 2
  with pytest.raises(AlbertError, match="no such checkpoint"):
    evaluator.evaluate(10, checkpoint_path=str(tmp_path / "ckpt-3"))


def test_another_batch_size_on_the_same_trainer_divides_by_it(tmp_path):
  """The compiled train loop and eval step divide the loss by their batch size: a second
  train() or evaluate() on the same Trainer with another batch size must use its own (a fresh
  Trainer resuming the same checkpoint is the reference; the eval loss is a per-example mean)."""
  tf_keras.utils.set_random_seed(4)
  same = _trainer(tmp_path / "same")
  same.train(2, 8)
  shutil.copytree(tmp_path / "same", tmp_path / "fresh")
  fresh = _trainer(tmp_path / "fresh")
  # Both resume ckpt-2 and restart the input (another batch size): the same 2 steps of 16.
  again, reference = same.train(4, 16), fresh.train(4, 16)
  np.testing.assert_allclose(again["loss"], reference["loss"], rtol=1e-5)
  for x, y in zip(_weights(same), _weights(fresh)):
    np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
  small, large = same.evaluate(8), same.evaluate(32)
  assert small["num_examples"] == large["num_examples"] == 64
  np.testing.assert_allclose(large["loss"], small["loss"], rtol=1e-5)
  np.testing.assert_allclose(large["loss"], fresh.evaluate(32)["loss"], rtol=1e-5)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_mixed_precision_trains_with_float32_variables(tmp_path, precision,
                                                       restore_precision_policy):
  del restore_precision_policy
  trainer = _trainer(tmp_path, precision=precision)
  result = trainer.train(4, 8)
  assert np.isfinite(result["loss"])
  assert all(v.dtype == tf.float32 for v in trainer.model.trainable_variables)
  assert tf_keras.mixed_precision.global_policy().name == "float32"  # not leaked
  if precision == "fp16":
    assert isinstance(trainer.optimizer, tf_keras.mixed_precision.LossScaleOptimizer)


def test_jit_compile_matches_graph_mode(tmp_path):
  tf_keras.utils.set_random_seed(4)
  graph = _trainer(tmp_path / "graph")
  xla = _trainer(tmp_path / "xla", jit_compile=True)
  graph.build(graph.inputs.training(8)[1])
  xla.build(xla.inputs.training(8)[1])
  _same_init(xla, graph)
  graph.train(2, 8)
  xla.train(2, 8)
  for x, y in zip(_weights(graph), _weights(xla)):
    np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)


def test_trainer_sets_recompute_on_the_built_model():
  task = helpers.make_toy_task()
  with pytest.raises(AlbertError, match="recompute='layer' needs"):
    trainer_lib.Trainer(task, recompute="layer")
  with pytest.raises(AlbertError, match="recompute='all' is invalid"):
    trainer_lib.Trainer(task, recompute="all")
  from albert_tf.tasks import pretraining as pretraining_task  # pylint: disable=g-import-not-at-top
  task = pretraining_task.PretrainingTask(pretraining_task.PretrainingConfig(
      AlbertConfig.from_dict(tiny_config_dict()), max_seq_length=32,
      max_predictions_per_seq=5))
  assert trainer_lib.Trainer(task).model.encoder.recompute == "none"
  assert trainer_lib.Trainer(task, recompute="layer").model.encoder.recompute == "layer"


# Trains the same run with recompute none and layer: mixed_float16 (loss scaling), XLA,
# gradient_accumulation_steps=2, MirroredStrategy over 2 logical CPUs. No dropout: XLA compiles
# TF's stateful random ops to its own generator, which ignores TF seeds, so two runs with
# dropout cannot draw the same masks there (dropout equality is tested above, without XLA).
_COMBINED_SCRIPT = """
import os, sys
import numpy as np
import tensorflow as tf
import tf_keras
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from albert_tf.config import AlbertConfig
from albert_tf.tasks import pretraining as pretraining_task
from albert_tf.training import optimizer as opt_lib, trainer as trainer_lib
config, data, out = sys.argv[1:4]
""" + helpers.INIT_CHECKPOINT_SCRIPT + """\
for mode in ("none", "layer"):
  tf_keras.utils.set_random_seed(5)
  task = pretraining_task.PretrainingTask(pretraining_task.PretrainingConfig(
      init_checkpoint=init, **params))
  trainer = trainer_lib.Trainer(
      task, tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), os.path.join(out, mode),
      optimizer_fn=lambda: opt_lib.create_optimizer("lamb", 0.01, 4, 1), precision="fp16",
      jit_compile=True, gradient_accumulation_steps=2, recompute=mode,
      save_checkpoints_steps=4, log_every_n_steps=2)
  assert trainer.model.encoder.recompute == mode
  assert trainer.model.encoder.compute_dtype == "float16"
  summary = trainer.train(4, 8)
  print("RESULT", mode, trainer.strategy.num_replicas_in_sync, summary["loss"], flush=True)
"""


def test_mixed_precision_xla_accumulation_mirrored(tmp_path):
  # (Two layers in two groups of two inner layers: every sharing path, half the XLA compile
  # time of four layers.)
  config = write_tiny_config(tmp_path / "albert_config.json", num_hidden_groups=2,
                             num_hidden_layers=2, inner_group_num=2)
  data = helpers.write_synthetic_pretraining_data(str(tmp_path / "synthetic.tfrecord"), 64)
  # XLA still compiles every step (its HLO passes, fusion, the CPU code); only LLVM's own
  # optimisation of that code is skipped: ~20% less CPU time, the test's largest cost.
  xla_flags = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()
  result = subprocess.run([sys.executable, "-c", _COMBINED_SCRIPT, config, data,
                           str(tmp_path / "runs")],
                          env=helpers.subprocess_env({"XLA_FLAGS": xla_flags}),
                          capture_output=True, text=True, timeout=1200,
                          cwd=str(helpers.REPO_ROOT))
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
  runs = {}
  for line in result.stdout.splitlines():
    if line.startswith("RESULT "):
      _, mode, replicas, loss = line.split()
      assert replicas == "2"
      runs[mode] = float(loss)
  assert set(runs) == {"none", "layer"}
  # (Not bit-identical run to run: float16 sums in XLA/oneDNN kernels vary with threading.)
  assert np.isfinite(runs["none"]) and abs(runs["layer"] - runs["none"]) <= 1e-5 * runs["none"]
  # The progress lines carry the memory report.
  assert "peak RSS " in result.stdout
  init = helpers.checkpoint_values(str(tmp_path / "runs" / "init" / "ckpt-0"))
  none = helpers.checkpoint_values(str(tmp_path / "runs" / "none"))
  layer = helpers.checkpoint_values(str(tmp_path / "runs" / "layer"))
  keys = [k for k in init if k.startswith("model/") and "VARIABLE_VALUE" in k]
  assert len(keys) > 20 and set(keys) <= set(layer)
  moved = [k for k in keys if np.abs(init[k] - layer[k]).max() > 1e-3]
  assert len(moved) > len(keys) // 2
  # The two runs took the same steps (the same gradients every step), to float16 noise: far
  # below the size of the updates.
  for key in keys:
    assert np.abs(layer[key] - none[key]).max() <= 1e-4, key
