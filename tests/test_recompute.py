"""AlbertEncoder(recompute=...): same gradients as storing activations, recomputed for real.

Gradients are compared in float32 against recompute="none" (max abs difference <= 1e-6) for
one group and for G=2 / K=2, without and with dropout (same seed); the backward pass is shown
to re-run exactly the blocks each mode recomputes. Mixed precision, XLA, gradient accumulation
and a 2-replica MirroredStrategy run together in a subprocess (logical CPU devices must be set
before TensorFlow initialises).
"""

import functools
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.layers.attention import AlbertAttentionBlock
from albert_tf.layers.feedforward import AlbertFeedForwardBlock
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.networks import encoder as encoder_lib
from albert_tf.networks.encoder import AlbertEncoder
from albert_tf.training import trainer as trainer_lib
from tests.conftest import tiny_config_dict
from tests.helpers import training as helpers

SEQ, BATCH = 12, 2
DROPOUT = dict(hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.2)
SHAPES = {"G1": dict(), "G2K2": dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)}


def _inputs(seed=0, with_positions=True):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, 1000, size=(BATCH, SEQ)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, SEQ - 3:] = 0  # padding: the additive mask is part of the recomputed layer
  features = dict(input_ids=ids, input_mask=mask,
                  segment_ids=np.concatenate([np.zeros((BATCH, SEQ // 2)),
                                              np.ones((BATCH, SEQ // 2))], 1).astype(np.int32))
  if with_positions:
    features["masked_lm_positions"] = np.array([[1, 4, 7], [2, 3, 5]], np.int32)
  return features


def _pretrainer_grads(model, mode, seed=7, fn=None):
  """Gradients of an MLM + SOP style loss in `mode` (dropout seeded by `seed`)."""
  model.encoder.recompute = mode
  features = _inputs()
  labels = tf.constant([[3, 9, 27], [81, 243, 729]])

  def compute():
    with tf.GradientTape() as tape:
      out = model(features, training=True)
      mlm = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels, out["mlm_logits"]))
      sop = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          tf.constant([0, 1]), out["sop_logits"]))
      loss = mlm + sop
    return loss, tape.gradient(loss, model.trainable_variables)

  tf.random.set_seed(seed)
  loss, grads = (fn(compute) if fn else compute)()
  return float(loss), [tf.convert_to_tensor(g).numpy() for g in grads]


def _max_diff(a, b):
  return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("dropout", [False, True], ids=["no_dropout", "dropout"])
def test_gradients_equal_none(shape, dropout):
  cfg = tiny_config_dict(**SHAPES[shape], **(DROPOUT if dropout else {}))
  tf_keras.utils.set_random_seed(1)
  model = AlbertPretrainer(AlbertConfig.from_dict(cfg))
  ref_loss, ref = _pretrainer_grads(model, "none")
  assert all(np.abs(g).max() > 0 for g in ref[:3])  # a real, non-trivial gradient
  for mode in ("layer", "attention"):
    loss, got = _pretrainer_grads(model, mode)
    assert loss == ref_loss
    assert _max_diff(got, ref) <= 1e-6, mode
  if dropout:
    # Dropout is live: another seed changes the loss and the gradients ...
    other_loss, other = _pretrainer_grads(model, "layer", seed=8)
    assert other_loss != ref_loss and _max_diff(other, ref) > 1e-3
    # ... and each call draws fresh masks (no mask is reused across calls).
    tf.random.set_seed(7)
    first = model(_inputs(), training=True)["sequence_output"]
    second = model(_inputs(), training=True)["sequence_output"]
    assert np.abs(first - second).max() > 1e-3


def test_gradients_equal_none_in_a_tf_function():
  """Graph mode, dropout on. Grappler's remapper fuses MatMul + BiasAdd + GELU only where no
  gradient reads the pre-activation (the forward pass of a recomputed layer), which changes
  the last bits; without that fusion graph mode is exact as well."""
  cfg = tiny_config_dict(**SHAPES["G2K2"], **DROPOUT)
  tf_keras.utils.set_random_seed(1)
  model = AlbertPretrainer(AlbertConfig.from_dict(cfg))
  previous = tf.config.optimizer.get_experimental_options()
  tf.config.optimizer.set_experimental_options({"remapping": False})
  try:
    ref_loss, ref = _pretrainer_grads(model, "none", fn=tf.function)
    for mode in ("layer", "attention"):
      loss, got = _pretrainer_grads(model, mode, fn=tf.function)
      assert abs(loss - ref_loss) <= 1e-6
      assert _max_diff(got, ref) <= 1e-6, mode
  finally:
    tf.config.optimizer.set_experimental_options(previous)


def test_pooled_only_gradients_equal_none():
  cfg = AlbertConfig.from_dict(tiny_config_dict(**SHAPES["G2K2"], **DROPOUT))
  tf_keras.utils.set_random_seed(2)
  model = AlbertClassifier(cfg, num_classes=3)
  features = _inputs(with_positions=False)

  def grads(mode):
    model.encoder.recompute = mode
    tf.random.set_seed(11)
    with tf.GradientTape() as tape:
      logits = model(features, training=True)["logits"]
      loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits([0, 2], logits))
    return [tf.convert_to_tensor(g).numpy() for g in tape.gradient(
        loss, model.trainable_variables)]

  ref = grads("none")
  for mode in ("layer", "attention"):
    assert _max_diff(grads(mode), ref) <= 1e-6, mode


def _counting(cls, counts, key, monkeypatch):
  original = cls.call

  @functools.wraps(original)
  def call(self, *args, **kwargs):
    counts[key] += 1
    return original(self, *args, **kwargs)
  monkeypatch.setattr(cls, "call", call)


@pytest.mark.parametrize("mode,attention_reruns,ffn_reruns",
                         [("none", 0, 0), ("attention", 8, 0), ("layer", 8, 8)])
def test_backward_pass_recomputes_the_blocks_of_its_mode(mode, attention_reruns, ffn_reruns,
                                                         monkeypatch):
  counts = {"attention": 0, "ffn": 0}
  _counting(AlbertAttentionBlock, counts, "attention", monkeypatch)
  _counting(AlbertFeedForwardBlock, counts, "ffn", monkeypatch)
  encoder = AlbertEncoder(AlbertConfig.from_dict(tiny_config_dict(**SHAPES["G2K2"])),
                          recompute=mode)
  with tf.GradientTape() as tape:
    out = encoder(_inputs(with_positions=False), training=True)
    loss = tf.reduce_sum(out["sequence_output"] ** 2)
  assert counts == {"attention": 8, "ffn": 8}  # L * K = 8 applied layers
  tape.gradient(loss, encoder.trainable_variables)
  assert counts == {"attention": 8 + attention_reruns, "ffn": 8 + ffn_reruns}
  # Inference never recomputes (nothing to differentiate): no wrapper, same outputs.
  encoder(_inputs(with_positions=False), training=False)
  assert counts == {"attention": 16 + attention_reruns, "ffn": 16 + ffn_reruns}


def test_bfloat16_gradients_match_none(restore_precision_policy):
  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  cfg = tiny_config_dict(**SHAPES["G2K2"], **DROPOUT)
  tf_keras.utils.set_random_seed(1)
  model = AlbertPretrainer(AlbertConfig.from_dict(cfg))
  assert model.encoder.compute_dtype == "bfloat16"
  ref_loss, ref = _pretrainer_grads(model, "none")
  for mode in ("layer", "attention"):
    loss, got = _pretrainer_grads(model, mode)
    assert loss == ref_loss
    assert _max_diff(got, ref) <= 1e-6, mode


def test_bad_recompute_is_one_line_error():
  cfg = AlbertConfig.from_dict(tiny_config_dict())
  with pytest.raises(AlbertError, match=r"^recompute='layers' is invalid: expected one of "
                                        r"none, layer, attention$"):
    AlbertEncoder(cfg, recompute="layers")
  encoder = AlbertEncoder(cfg)
  with pytest.raises(AlbertError, match="recompute=True is invalid"):
    encoder.recompute = True
  assert encoder.recompute == "none"


def test_get_config_round_trip_keeps_recompute():
  encoder = AlbertEncoder(AlbertConfig.from_dict(tiny_config_dict()), recompute="attention")
  config = encoder.get_config()
  assert config["recompute"] == "attention"
  clone = AlbertEncoder.from_config(config)
  assert clone.recompute == "attention" and clone.get_config() == config
  serialized = tf_keras.saving.serialize_keras_object(encoder)
  assert tf_keras.saving.deserialize_keras_object(serialized).recompute == "attention"


def test_set_recompute_targets_the_encoder():
  cfg = AlbertConfig.from_dict(tiny_config_dict())
  pretrainer = AlbertPretrainer(cfg)
  encoder_lib.set_recompute(pretrainer, "layer")
  assert pretrainer.encoder.recompute == "layer"
  encoder = AlbertEncoder(cfg)
  encoder_lib.set_recompute(encoder, "attention")
  assert encoder.recompute == "attention"
  other = tf_keras.Sequential([tf_keras.layers.Dense(2)])
  encoder_lib.set_recompute(other, "none")  # nothing to do
  with pytest.raises(AlbertError, match="needs a model whose encoder is an AlbertEncoder"):
    encoder_lib.set_recompute(other, "layer")


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
params = dict(albert_config=AlbertConfig.from_json_file(config), input_file=data,
              max_seq_length=%d, max_predictions_per_seq=%d, shuffle_seed=3)
init_task = pretraining_task.PretrainingTask(pretraining_task.PretrainingConfig(**params))
model = init_task.build_model()
model(next(iter(init_task.build_inputs("train", 2)))[0])
init = tf.train.Checkpoint(model=model).write(os.path.join(out, "init", "ckpt-0"))
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
""" % (helpers.TINY_SEQ, helpers.TINY_PREDS)


def test_mixed_precision_xla_accumulation_mirrored(tmp_path):
  config = helpers.tiny_config(tmp_path / "albert_config.json", num_hidden_groups=2,
                               num_hidden_layers=4, inner_group_num=2)
  data = helpers.write_synthetic_pretraining_data(str(tmp_path / "synthetic.tfrecord"), 64)
  result = subprocess.run([sys.executable, "-c", _COMBINED_SCRIPT, config, data,
                           str(tmp_path / "runs")], env=helpers.subprocess_env(),
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
