"""AlbertEncoder(recompute=...): same gradients as storing activations, recomputed for real.

Gradients are compared in float32 against recompute="none" (max abs difference <= 1e-6) for
one group and for G=2 / K=2, without and with dropout (same seed); the backward pass is shown
to re-run exactly the blocks each mode recomputes."""

import functools

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
from tests.helpers.tiny_config import tiny_config_dict


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
