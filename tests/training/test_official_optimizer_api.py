"""The official optimizer classes under their names: `LAMBOptimizer` (lamb_optimizer.py) and
`AdamWeightDecayOptimizer` (optimization.py), in albert_tf.training.optimizer.

Their arguments and defaults are the official ones (no weight decay and nothing excluded unless
asked), and one step on variables named as in a TF1 graph follows the official update written
out in NumPy: m, v without bias correction, decay for names that no pattern matches, the LAMB
trust ratio except where excluded (exclude_from_layer_adaptation defaults to the weight-decay
patterns). `bind_model` switches to the official names of an ALBERT model.
"""

import inspect

import numpy as np
import tensorflow as tf

from albert_tf.training import optimizer as opt

_OFFICIAL_ARGS = {
    opt.LAMBOptimizer: [("learning_rate", inspect.Parameter.empty), ("weight_decay_rate", 0.0),
                        ("beta_1", 0.9), ("beta_2", 0.999), ("epsilon", 1e-6),
                        ("exclude_from_weight_decay", None),
                        ("exclude_from_layer_adaptation", None), ("name", "LAMBOptimizer")],
    opt.AdamWeightDecayOptimizer: [("learning_rate", inspect.Parameter.empty),
                                   ("weight_decay_rate", 0.0), ("beta_1", 0.9),
                                   ("beta_2", 0.999), ("epsilon", 1e-6),
                                   ("exclude_from_weight_decay", None),
                                   ("name", "AdamWeightDecayOptimizer")],
}


def test_official_arguments_and_defaults():
  for cls, expected in _OFFICIAL_ARGS.items():
    params = list(inspect.signature(cls.__init__).parameters.values())[1:len(expected) + 1]
    assert [(p.name, p.default) for p in params] == expected, cls.__name__


def _official_step(w, g, lr, wd, decay, adapt, eps=1e-6, b1=0.9, b2=0.999):
  """One official update from zero moments (NumPy, float64)."""
  m = (1 - b1) * g
  v = (1 - b2) * g * g
  update = m / (np.sqrt(v) + eps)
  if decay:
    update = update + wd * w
  ratio = 1.0
  if adapt:
    w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(update)
    ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
  return w - lr * ratio * update


def _one_step(optimizer):
  rng = np.random.default_rng(0)
  values = {"layer/kernel": rng.normal(size=[3, 4]), "layer/LayerNorm/gamma": rng.normal(size=[4]),
            "layer/bias": rng.normal(size=[4])}
  grads = {name: rng.normal(size=value.shape) for name, value in values.items()}
  variables = {}
  with tf.name_scope(""):
    for name, value in values.items():
      variables[name] = tf.Variable(value.astype(np.float32), name=name)
  optimizer.apply_gradients([(tf.constant(grads[n], tf.float32), variables[n]) for n in values])
  return values, grads, {n: v.numpy() for n, v in variables.items()}


def test_lamb_optimizer_step_is_the_official_update():
  optimizer = opt.LAMBOptimizer(learning_rate=0.1, weight_decay_rate=0.01,
                                exclude_from_weight_decay=["LayerNorm", "bias"])
  values, grads, got = _one_step(optimizer)
  for name in values:
    excluded = "LayerNorm" in name or "bias" in name
    want = _official_step(values[name], grads[name], 0.1, 0.01, decay=not excluded,
                          adapt=not excluded)
    np.testing.assert_allclose(got[name], want, rtol=2e-5, atol=1e-6, err_msg=name)


def test_adam_weight_decay_step_is_the_official_update():
  optimizer = opt.AdamWeightDecayOptimizer(learning_rate=0.1, weight_decay_rate=0.01,
                                           exclude_from_weight_decay=["LayerNorm"])
  values, grads, got = _one_step(optimizer)
  for name in values:
    want = _official_step(values[name], grads[name], 0.1, 0.01,
                          decay="LayerNorm" not in name, adapt=False)
    np.testing.assert_allclose(got[name], want, rtol=2e-5, atol=1e-6, err_msg=name)


def test_defaults_decay_nothing():
  """weight_decay_rate 0.0 by default, as the official classes: plain un-corrected Adam."""
  values, grads, got = _one_step(opt.AdamWeightDecayOptimizer(learning_rate=0.1))
  for name in values:
    np.testing.assert_allclose(
        got[name], _official_step(values[name], grads[name], 0.1, 0.0, False, False),
        rtol=2e-5, atol=1e-6)
