"""Serving precision (--export_precision): float32 and bfloat16 copies of trained models, and a
bfloat16 export served from a fresh process."""

import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.export import export_classifier
from albert_tf.export.precision import serving_copy
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.models.squad import AlbertSquadModel
from tests.helpers import finetune
from tests.helpers.tiny_config import tiny_config_dict

SEQ = 16


def _inputs(batch=3, seed=0, extra=()):
  rng = np.random.default_rng(seed)
  shape = (batch,) + tuple(extra) + (SEQ,)
  mask = np.ones(shape, np.int32)
  mask[..., SEQ - 4:] = 0
  return {"input_ids": (rng.integers(5, 400, size=shape) * mask).astype(np.int32),
          "input_mask": mask, "segment_ids": (np.arange(SEQ) >= 6).astype(np.int32) * mask,
          "p_mask": np.zeros(shape, np.int32)}


def _randomize(model, seed=0, std=0.1):
  """Weights large enough that bfloat16 rounding visibly moves the outputs."""
  rng = np.random.default_rng(seed)
  for v in model.weights:
    if "gamma" in v.name:
      v.assign(1.0 + rng.normal(0, 0.1, v.shape))
    else:
      v.assign(rng.normal(0, std, v.shape))


def _classifier(policy="float32", seed=0):
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy(policy)
  try:
    model = AlbertClassifier(AlbertConfig.from_dict(tiny_config_dict()), num_classes=3)
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)
  _randomize(model, seed)
  return model


def test_fp32_copy_of_a_mixed_precision_model_computes_in_float32():
  mixed = _classifier("mixed_bfloat16")
  copy = serving_copy(mixed, "fp32")
  assert copy is not mixed and copy.dtype_policy.name == "float32"
  assert {w.dtype for w in copy.weights} == {tf.float32}
  for source, target in zip(mixed.weights, copy.weights):
    np.testing.assert_array_equal(source.numpy(), target.numpy())
  # The reference: a float32 model built directly with the same weights.
  reference = AlbertClassifier(mixed.config, num_classes=3)
  reference.set_weights(mixed.get_weights())
  x = _inputs()
  expected = reference(x, training=False)["logits"].numpy()
  np.testing.assert_allclose(copy(x, training=False)["logits"].numpy(), expected, rtol=1e-6,
                             atol=1e-6)
  # ...while the mixed model itself rounds through bfloat16.
  assert np.abs(mixed(x, training=False)["logits"].numpy() - expected).max() > 1e-4


def test_bf16_copy_keeps_layer_norm_in_float32_and_stays_close():
  model = _classifier()
  assert serving_copy(model, "fp32") is model  # already float32: no copy
  copy = serving_copy(model, "bf16")
  assert copy.dtype_policy.name == "bfloat16"
  layers = list(copy.submodules)
  norms = [w for l in layers if isinstance(l, tf_keras.layers.LayerNormalization)
           for w in l.weights]
  assert len(norms) == 2 * 3  # embeddings + the shared attention and FFN blocks, gamma + beta
  assert all(w.dtype == tf.float32 for w in norms)
  dense = [w for l in layers if isinstance(l, tf_keras.layers.Dense) for w in l.weights]
  assert len(dense) >= 2 * 7 and all(w.dtype == tf.bfloat16 for w in dense)
  assert copy.encoder.embeddings.weights[0].dtype == tf.bfloat16
  x = _inputs(batch=8)
  expected = model(x, training=False)
  got = copy(x, training=False)
  assert got["probabilities"].dtype == tf.float32
  diff = np.abs(got["probabilities"].numpy() - expected["probabilities"].numpy()).max()
  assert 0 < diff < 0.03, diff  # rounded (so really bfloat16), but close
  np.testing.assert_allclose(got["logits"].numpy(), expected["logits"].numpy(), atol=0.1)
  # The original model is untouched by the copy.
  assert {w.dtype for w in model.weights} == {tf.float32}


@pytest.mark.parametrize("kind", ["multiple_choice", "squad_v2"])
def test_bf16_copy_of_every_task_model(kind):
  config = AlbertConfig.from_dict(tiny_config_dict())
  if kind == "multiple_choice":
    model, x, key = AlbertMultipleChoice(config), _inputs(2, extra=(4,)), "probabilities"
    x.pop("p_mask")
  else:
    model, x, key = AlbertSquadModel(config, version_2_with_negative=True), _inputs(2), \
        "start_top_log_probs"
  _randomize(model, seed=1, std=0.05)
  copy = serving_copy(model, "bf16")
  assert len(copy.weights) == len(model.weights)
  expected, got = model(x, training=False)[key].numpy(), copy(x, training=False)[key].numpy()
  assert got.dtype == np.float32
  np.testing.assert_allclose(got, expected, atol=0.1)


def test_unknown_precision_is_a_one_line_error():
  with pytest.raises(AlbertError, match=r"--export_precision='fp16': expected one of fp32, bf16"):
    serving_copy(_classifier(), "fp16")


def test_bf16_export_is_served_as_in_process(tmp_path):
  model = _classifier(seed=2)
  export_base = str(tmp_path / "bf16")
  export_dir = export_classifier(model, export_base, ["a", "b", "c"], SEQ, None, True, "toy",
                                 True, precision="bf16")
  x = _inputs(batch=4, seed=5)
  token_inputs = {k: x[k].tolist() for k in ("input_ids", "input_mask", "segment_ids")}
  served = finetune.run_serving_client(
      str(tmp_path), [dict(export_dir=os.path.join(export_dir, "core_ops"),
                           signature="token_ids", inputs=token_inputs)], False)[0]
  in_process = serving_copy(model, "bf16")(
      {k: tf.constant(v) for k, v in token_inputs.items()}, training=False)
  np.testing.assert_allclose(served["probabilities"], in_process["probabilities"].numpy(),
                             atol=1e-3)
  fp32 = model({k: tf.constant(v) for k, v in token_inputs.items()},
               training=False)["probabilities"].numpy()
  assert 0 < np.abs(served["probabilities"] - fp32).max() < 0.03
  # The precision is part of what the directory holds: a float32 export may not replace it
  # unnoticed.
  with pytest.raises(AlbertError, match=r"precision: existing \"bf16\" vs new \"fp32\""):
    export_classifier(model, export_base, ["a", "b", "c"], SEQ, None, True, "toy", True)
