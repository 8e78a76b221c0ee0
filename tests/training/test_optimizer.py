"""LAMB / AdamW / schedule against plain NumPy transcriptions of the official TF1 code."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.errors import AlbertError
from albert_tf.training import optimizer as opt_lib

_EXCLUDE = ("LayerNorm", "layer_norm", "bias")


def _numpy_official_step(params, grads, m, v, lr, layer_adaptation, wd=0.01, b1=0.9, b2=0.999,
                         eps=1e-6):
  """One update of the official lamb_optimizer.py / AdamWeightDecayOptimizer (no bias corr.)."""
  new_params = {}
  for name, w in params.items():
    g = grads[name]
    m[name] = b1 * m[name] + (1 - b1) * g
    v[name] = b2 * v[name] + (1 - b2) * g * g
    update = m[name] / (np.sqrt(v[name]) + eps)
    excluded = any(p in name for p in _EXCLUDE)
    if not excluded:
      update = update + wd * w
    ratio = 1.0
    if layer_adaptation and not excluded:
      w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(update)
      ratio = w_norm / u_norm if (w_norm > 0 and u_norm > 0) else 1.0
    new_params[name] = w - ratio * lr * update
  return new_params


def _numpy_official_lr(step, init_lr, num_train_steps, num_warmup_steps, start_warmup_step,
                       power):
  decayed = (init_lr * (1 - min(step, num_train_steps) / num_train_steps) ** power)
  if num_warmup_steps:
    s = step - start_warmup_step
    if s < num_warmup_steps:
      return init_lr * max(s, 0) / num_warmup_steps
  return decayed


def _make_vars(rng):
  shapes = {
      "encoder/dense/kernel": (4, 3),
      "encoder/dense/bias": (3,),
      "encoder/LayerNorm/gamma": (3,),
      "encoder/layer_norm/beta": (3,),
      "cls/predictions/output_bias": (5,),
      "encoder/zero_init/kernel": (2, 2),   # ||w|| = 0 -> trust ratio 1
      "embeddings/word_embeddings": (6, 3),
  }
  values = {}
  for name, shape in shapes.items():
    values[name] = (np.zeros(shape) if "zero_init" in name
                    else rng.normal(size=shape)).astype(np.float64)
  return values


@pytest.mark.parametrize("name", ["lamb", "adamw"])
def test_two_updates_match_numpy_reference(name):
  rng = np.random.default_rng(0)
  params = {n: p.astype(np.float32).astype(np.float64) for n, p in _make_vars(rng).items()}
  init_lr, steps, warmup = 0.1, 10, 0
  optimizer = opt_lib.create_optimizer(name, init_lr, steps, warmup)
  tf_vars = {n: tf.Variable(p.astype(np.float32), name=n) for n, p in params.items()}
  optimizer.name_variables((v, n) for n, v in tf_vars.items())
  m = {n: np.zeros_like(p) for n, p in params.items()}
  v = {n: np.zeros_like(p) for n, p in params.items()}
  for step in range(2):
    grads = {n: (rng.normal(size=p.shape) * (10.0 ** (step - 1))).astype(np.float32).astype(np.float64)
             for n, p in params.items()}
    lr = _numpy_official_lr(step, init_lr, steps, warmup, 0, 1.0)
    params = _numpy_official_step(params, grads, m, v, lr, layer_adaptation=(name == "lamb"))
    optimizer.apply_gradients(
        [(tf.constant(grads[n], tf.float32), tf_vars[n]) for n in tf_vars])
  for n in params:
    np.testing.assert_allclose(tf_vars[n].numpy(), params[n], rtol=2e-5, atol=2e-6, err_msg=n)
  # The model garden's LAMB (bias-corrected) would give a different result: check that we
  # actually test something it fails.
  assert int(optimizer.iterations.numpy()) == 2


def test_exclusions_and_trust_ratio_are_visible():
  """A large lr makes decay/ratio effects obvious: excluded vars move by exactly lr*m/(sqrt v+eps)."""
  w = tf.Variable([[3.0, 4.0]], name="dense/kernel")      # ||w|| = 5
  b = tf.Variable([3.0, 4.0], name="dense/bias")
  optimizer = opt_lib.AlbertLamb(learning_rate=0.5, weight_decay_rate=0.0)
  optimizer.name_variables([(w, "dense/kernel"), (b, "dense/bias")])
  g = tf.constant([[1.0, 1.0]])
  optimizer.apply_gradients([(g, w), (g[0], b)])
  # First step without bias correction: m = 0.1 g, v = 0.001 g^2 -> update = 0.1/sqrt(.001) each.
  u = 0.1 / (np.sqrt(0.001) + 1e-6)
  np.testing.assert_allclose(b.numpy(), [3.0 - 0.5 * u, 4.0 - 0.5 * u], rtol=1e-5)
  ratio = 5.0 / (u * np.sqrt(2.0))
  np.testing.assert_allclose(w.numpy(), [[3.0 - 0.5 * ratio * u, 4.0 - 0.5 * ratio * u]],
                             rtol=1e-5)


def test_sparse_gradient_is_applied_densely():
  rng = np.random.default_rng(1)
  e0 = rng.normal(size=(5, 2)).astype(np.float32)
  dense_var = tf.Variable(e0, name="emb/embeddings")
  sparse_var = tf.Variable(e0, name="emb/embeddings")
  g_vals = rng.normal(size=(3, 2)).astype(np.float32)
  idx = tf.constant([1, 3, 1])
  dense_g = tf.math.unsorted_segment_sum(g_vals, idx, 5)
  for var, grad in ((dense_var, dense_g), (sparse_var, tf.IndexedSlices(g_vals, idx, [5, 2]))):
    optimizer = opt_lib.AlbertLamb(learning_rate=0.1)
    optimizer.name_variables([(var, "bert/embeddings/word_embeddings")])
    optimizer.apply_gradients([(grad, var)])
  np.testing.assert_allclose(sparse_var.numpy(), dense_var.numpy(), rtol=1e-6)


@pytest.mark.parametrize("warmup,start,power", [(0, 0, 1.0), (4, 0, 1.0), (4, 3, 2.0)])
def test_schedule_matches_official_formula(warmup, start, power):
  schedule = opt_lib.WarmupPolynomialDecay(0.00176, 20, warmup, start, power)
  for step in range(0, 25):
    expected = _numpy_official_lr(step, 0.00176, 20, warmup, start, power)
    np.testing.assert_allclose(float(schedule(step)), expected, rtol=1e-5, atol=1e-9,
                               err_msg=f"step {step}")
  round_trip = opt_lib.WarmupPolynomialDecay.from_config(schedule.get_config())
  assert float(round_trip(7)) == float(schedule(7))


def test_bad_arguments_raise_one_line_errors():
  with pytest.raises(AlbertError, match="--optimizer"):
    opt_lib.create_optimizer("sgd", 0.1, 10)
  with pytest.raises(AlbertError, match="--num_train_steps"):
    opt_lib.create_optimizer("lamb", 0.1, 0)


def test_weight_decay_rule_on_names():
  # The optimizer's own rule (the model garden's LAMB, with the official exclusions).
  uses_weight_decay = opt_lib.create_optimizer("lamb", 0.1, 10).uses_weight_decay
  assert uses_weight_decay("encoder/transformer/dense/kernel:0")
  assert not uses_weight_decay("encoder/embeddings/layer_normalization/gamma:0")
  assert not uses_weight_decay("bert/encoder/LayerNorm/beta")
  assert not uses_weight_decay("cls/predictions/output_bias:0")


def test_keras_layer_norm_names_do_not_decide_exclusion():
  """Keras names a LayerNorm's parameters plain `gamma:0`; the official name decides."""
  gamma = tf.Variable(np.full([3], 2.0, np.float32), name="gamma")
  kernel = tf.Variable(np.full([3], 2.0, np.float32), name="gamma")  # same Keras name
  optimizer = opt_lib.AlbertLamb(learning_rate=0.1, weight_decay_rate=0.5)
  optimizer.name_variables([(gamma, "bert/embeddings/LayerNorm/gamma"),
                            (kernel, "bert/pooler/dense/kernel")])
  zero = tf.zeros([3])
  optimizer.apply_gradients([(zero, gamma), (zero, kernel)])
  np.testing.assert_allclose(gamma.numpy(), 2.0)  # no decay, zero gradient: unchanged
  assert float(kernel.numpy()[0]) < 2.0            # decayed


def test_unbound_optimizer_and_unknown_variable_are_errors():
  var = tf.Variable([1.0, 2.0], name="bias")
  with pytest.raises(AlbertError, match="bind_model"):
    opt_lib.AlbertLamb(learning_rate=0.1).apply_gradients([(tf.ones([2]), var)])
  optimizer = opt_lib.AlbertAdamW(learning_rate=0.1)
  optimizer.name_variables([(tf.Variable([0.0]), "output_bias")])
  with pytest.raises(AlbertError, match="no official name"):
    optimizer.apply_gradients([(tf.ones([2]), var)])
