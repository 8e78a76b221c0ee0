"""Early exit (PABEE): the loop's per-example answers, exactness at full patience, the loss's
layer weights, checkpoint names and loading with or without the internal classifiers."""

import types

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf.checkpoints import official_names, tf1, tf2
from albert_tf.checkpoints.init import init_from_checkpoint, restore_model_weights
from albert_tf.errors import AlbertError
from albert_tf.heads.early_exit import layer_loss_weights, patience_exit_reference
from albert_tf.models import build
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.early_exit import static_shapes
from albert_tf.tasks.glue import ClassificationTask
from tests.helpers.tiny_config import tiny_albert_config

LAYERS = 4


def _features(batch=16, seq=12, seed=0):
  rng = np.random.default_rng(seed)
  lengths = rng.integers(3, seq + 1, [batch, 1])
  return {"input_ids": tf.constant(rng.integers(5, 1000, [batch, seq]), tf.int32),
          "input_mask": tf.constant((np.arange(seq)[None] < lengths).astype(np.int32)),
          "segment_ids": tf.constant((np.arange(seq)[None] >= seq // 2).astype(np.int32)
                                     * np.ones([batch, 1], np.int32))}


def _pair(num_classes, is_regression, **config):
  """(early-exit model, plain model with the same encoder and final head), heads scaled up so
  that the layers disagree often enough for examples to exit at different layers."""
  cfg = tiny_albert_config(num_hidden_layers=LAYERS, **config)
  model = AlbertClassifier(cfg, num_classes, is_regression=is_regression, early_exit="patience")
  rng = np.random.default_rng(1)
  for head in model.early_exit_classifiers.heads + [model.classifier_head]:
    head.output_weights.assign(rng.normal(size=head.output_weights.shape).astype(np.float32))
  plain = AlbertClassifier(cfg, num_classes, is_regression=is_regression)
  named = official_names.model_variable_map(model)
  for name, variable in official_names.model_variable_map(plain).items():
    variable.assign(named[name])
  return model, plain


def _inference(model, features, patience):
  # Eager (the loop then runs as Python): tracing once per patience would cost seconds each.
  model.patience = patience
  return {k: v.numpy() for k, v in model(features, training=False).items()}


@pytest.mark.parametrize("is_regression,config", [(False, {}), (True, {}),
                                                  (False, {"num_hidden_groups": 2})])
def test_loop_answers_each_example_at_its_exit_layer(is_regression, config):
  # Seeded weights: compiled and uncompiled rounding differ, so an example whose answer is a
  # near-tie could flip; these weights are known to have none.
  tf_keras.utils.set_random_seed(0)
  model, plain = _pair(1 if is_regression else 3, is_regression, **config)
  features = _features()
  # Every layer's logits from one full pass: the reference rule says where each example exits.
  full = model(features, training=False)
  layer_logits = full["layer_logits"].numpy()
  assert layer_logits.shape == (16, LAYERS, 1 if is_regression else 3)
  np.testing.assert_array_equal(full["exit_layer"].numpy(), LAYERS)
  seen = set()
  for patience in (1, 2):
    out = _inference(model, features, patience)
    exit_layer, logits = patience_exit_reference(layer_logits, patience, is_regression,
                                                 model.regression_threshold)
    np.testing.assert_array_equal(out["exit_layer"], exit_layer)
    # An example that left at layer k keeps layer k's answer while the others went on.
    np.testing.assert_allclose(out["logits"], logits, rtol=1e-5, atol=1e-5)
    seen.update(out["exit_layer"].tolist())
    with static_shapes():  # every row through each layer, as XLA compiles it: same answers
      masked = _inference(model, features, patience)
    np.testing.assert_array_equal(masked["exit_layer"], exit_layer)
    np.testing.assert_allclose(masked["logits"], logits, rtol=1e-5, atol=1e-5)
  if not config:  # compiled by XLA (--xla_whole_step, a TPU): the same answers per example
    model.patience = 1
    with static_shapes():
      compiled = tf.function(lambda f: model(f, training=False), jit_compile=True)(features)
    exit_layer, logits = patience_exit_reference(layer_logits, 1, is_regression,
                                                 model.regression_threshold)
    np.testing.assert_array_equal(compiled["exit_layer"].numpy(), exit_layer)
    np.testing.assert_allclose(compiled["logits"].numpy(), logits, rtol=1e-4, atol=1e-4)
  if not is_regression:
    assert min(seen) < LAYERS and LAYERS in seen, seen  # a batch that really was split

  # Patience that no example can reach: the full model's outputs, bit for bit.
  expected = {k: v.numpy() for k, v in plain(features, training=False).items()}
  for patience in (LAYERS - 1, LAYERS, LAYERS + 3):
    out = _inference(model, features, patience)
    np.testing.assert_array_equal(out["exit_layer"], LAYERS)
    for key in ("logits", "probabilities"):
      np.testing.assert_array_equal(out[key], expected[key])
  if not config and not is_regression:  # and traced, as evaluation and the exports run it
    model.patience = LAYERS
    traced = tf.function(lambda f: model(f, training=False))(features)
    traced_plain = tf.function(lambda f: plain(f, training=False))(features)
    np.testing.assert_array_equal(traced["logits"].numpy(), traced_plain["logits"].numpy())


def test_loss_weighs_layer_l_by_l():
  np.testing.assert_allclose(layer_loss_weights(4), np.array([1, 2, 3, 4]) / 10)
  task = ClassificationTask.__new__(ClassificationTask)
  task.spec = types.SimpleNamespace(is_regression=False)
  layer_logits = tf.constant(np.random.default_rng(0).normal(size=[3, 4, 2]), tf.float32)
  labels = {"label_ids": tf.constant([0, 1, 1])}
  per_layer = np.stack([tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels["label_ids"], logits=layer_logits[:, l]).numpy() for l in range(4)], 1)
  loss = task.per_example_loss(labels, {"logits": layer_logits[:, -1],
                                        "layer_logits": layer_logits}).numpy()
  np.testing.assert_allclose(loss, (per_layer * [1, 2, 3, 4]).sum(1) / 10, rtol=1e-6)
  task.spec = types.SimpleNamespace(is_regression=True)
  scores = layer_logits[:, :, :1]
  loss = task.per_example_loss({"label_ids": tf.constant([0.5, 1.0, 2.0])},
                               {"logits": scores[:, -1], "layer_logits": scores}).numpy()
  squared = (scores.numpy()[:, :, 0] - np.array([[0.5], [1.0], [2.0]])) ** 2
  np.testing.assert_allclose(loss, (squared * [1, 2, 3, 4]).sum(1) / 10, rtol=1e-6)


def test_checkpoints_with_and_without_internal_classifiers(tmp_path):
  model, plain = _pair(3, False)
  names = official_names.model_variable_map(model)
  assert {f"early_exit/layer_{l}/output_{v}" for l in (1, 2, 3)
          for v in ("weights", "bias")} <= set(names)
  assert "early_exit/layer_4/output_weights" not in names  # the last layer's is output_weights
  assert names["output_weights"] is model.classifier_head.output_weights
  assert build("classifier", model.config, num_labels=3, early_exit="patience").get_config() \
      == dict(model.get_config(), name="albert_classifier")
  early, ordinary = str(tmp_path / "early" / "model.ckpt-1"), str(tmp_path / "plain" / "model.ckpt-1")
  tf1.save_tf1_checkpoint(model, early, global_step=1)
  tf1.save_tf1_checkpoint(plain, ordinary, global_step=1)
  # The early-exit checkpoint round-trips, internal classifiers included.
  again = AlbertClassifier(model.config, 3, early_exit="patience")
  restore_model_weights(again, early)
  for a, b in zip(again.early_exit_classifiers.weights, model.early_exit_classifiers.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  # A plain model reads it (the internal classifiers are left aside) ...
  other = AlbertClassifier(model.config, 3)
  restore_model_weights(other, early)
  np.testing.assert_array_equal(other.classifier_head.output_weights.numpy(),
                                model.classifier_head.output_weights.numpy())
  # ... an early-exit model starts from a checkpoint without them (fine-tuning) ...
  fresh = AlbertClassifier(model.config, 3, early_exit="patience")
  init_from_checkpoint(fresh, ordinary)
  np.testing.assert_array_equal(fresh.encoder.pooler.kernel.numpy(),
                                plain.encoder.pooler.kernel.numpy())
  # ... but will not answer with internal classifiers that were never trained.
  with pytest.raises(AlbertError, match="early_exit/layer_1"):
    restore_model_weights(AlbertClassifier(model.config, 3, early_exit="patience"), ordinary)
  # So too from our TF2 layout (a trainer's ckpt-N), and the difference is named both ways.
  tf2_plain, tf2_early = str(tmp_path / "tf2_plain" / "ckpt-1"), str(tmp_path / "tf2" / "ckpt-1")
  tf2.save_tf2_checkpoint(plain, tf2_plain)
  tf2.save_tf2_checkpoint(model, tf2_early)
  with pytest.raises(AlbertError, match=r"trained without early exit: it lacks the internal "
                     r"classifiers, e.g. model/early_exit_classifiers/layer_1/output_weights "
                     r"\(TF1: early_exit/layer_1/output_weights\)"):
    restore_model_weights(AlbertClassifier(model.config, 3, early_exit="patience"), tf2_plain)
  assert tf2.early_exit_difference(plain, tf2_early).startswith(
      "it was trained with --early_exit=patience: it holds internal classifiers")
  assert tf2.early_exit_difference(model, tf2_early) is None
  assert tf2.early_exit_difference(plain, tf2_plain) is None
