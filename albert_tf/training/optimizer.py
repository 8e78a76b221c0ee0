"""The official ALBERT optimizers (LAMB, AdamW) and learning-rate schedule, as Keras optimizers.

The official TF1 `optimization.create_optimizer` does, per step:
  1. lr = polynomial_decay(init_lr, global_step, num_train_steps, end=0, power=poly_power);
     during warmup (global_step - start_warmup_step < num_warmup_steps) it is instead
     init_lr * (global_step - start_warmup_step) / num_warmup_steps.
  2. gradients clipped to global norm 1.0 (the trainer does this, on the gradients summed over
     replicas and accumulation micro-batches, i.e. on the gradient of the global batch).
  3. LAMB or AdamW with beta_1 0.9, beta_2 0.999, epsilon 1e-6, weight decay 0.01 and
     ["LayerNorm", "layer_norm", "bias"] excluded from weight decay (and, for LAMB, from the
     trust ratio), searched in the TF1 variable names. Neither optimizer uses Adam's bias
     correction:
        m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
        u = m / (sqrt(v) + eps) + wd * w        (wd term only if w is not excluded)
        r = ||w|| / ||u|| (1 if either is 0)   (LAMB only, 1 for excluded w)
        w = w - lr * r * u

Exclusions are decided on each variable's *official* name (`bert/embeddings/LayerNorm/gamma`,
`cls/predictions/output_bias`, ...), from the one name table in
`albert_tf.checkpoints.official_names`, never on Keras names: Keras calls a LayerNorm's
parameters plain `gamma:0` / `beta:0`, which no pattern matches, so matching Keras names would
decay every LayerNorm. The optimizer therefore has to be told its model (`bind_model`, done by
the trainer before the first step); a variable without an official name is an error then, and an
optimizer that was never bound refuses to apply gradients.

The official classes keep their names, arguments and defaults here: `LAMBOptimizer`
(lamb_optimizer.py) and `AdamWeightDecayOptimizer` (optimization.py), Keras optimizers whose
patterns are searched in the variables' own names until `bind_model`. The official
`optimization.create_optimizer(loss, init_lr, ..., use_tpu, ...)` returns a TF1 train op (the
gradients of a loss tensor, clipped, applied, global_step incremented, a TPU
CrossShardOptimizer): TF2 has no train op, so its TF2 form is `create_optimizer` below (the same
optimizer and schedule) plus the trainer (gradients, clipping at 1.0, the step); `use_tpu` is
`--strategy=tpu`, and `colocate_gradients_with_ops` has no TF2 meaning.

How this relates to `official.modeling.optimization` (model garden):
  * `lamb.LAMB` has the same exclusion-by-name rule (regex search on the variable name) and the
    same trust-ratio rule, but divides m and v by (1 - b^t) (bias correction). `AlbertLamb`
    subclasses it and turns the bias correction off (`bias_correction=False`, the default here).
  * `legacy_adamw.AdamWeightDecay` is Keras Adam (bias-corrected, with epsilon scaled by the
    correction) plus decoupled decay; the official AdamW has no bias correction, so `AlbertAdamW`
    is `AlbertLamb` without layer adaptation, which is exactly the official update.
  * `lr_schedule.LinearWarmup` ramps to the *decayed* rate at the end of warmup and has no
    `start_warmup_step`; `WarmupPolynomialDecay` below is the official formula. One deliberate
    difference: before `start_warmup_step` the official formula yields a negative learning rate
    (a TF1 quirk nobody relies on); here it is clamped to 0.
"""


import tensorflow as tf
import tf_keras
from official.modeling.optimization import lamb as mg_lamb
from tf_keras.src.optimizers.legacy import optimizer_v2

from albert_tf.checkpoints import official_names
from albert_tf.errors import AlbertError

# The official exclusion patterns (regex-searched in variable names).
EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
OPTIMIZERS = ("lamb", "adamw")


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class WarmupPolynomialDecay(tf_keras.optimizers.schedules.LearningRateSchedule):
  """Official ALBERT schedule: linear warmup from start_warmup_step, then polynomial decay to 0.

  `step` is the number of updates already applied (the optimizer's `iterations`), as the
  official `global_step` before its increment.
  """

  def __init__(self, learning_rate, num_train_steps, num_warmup_steps=0, start_warmup_step=0,
               poly_power=1.0, end_learning_rate=0.0, name=None):
    super().__init__()
    self.learning_rate = float(learning_rate)
    self.num_train_steps = int(num_train_steps)
    self.num_warmup_steps = int(num_warmup_steps or 0)
    self.start_warmup_step = int(start_warmup_step or 0)
    self.poly_power = float(poly_power)
    self.end_learning_rate = float(end_learning_rate)
    self.name = name

  def __call__(self, step):
    with tf.name_scope(self.name or "warmup_polynomial_decay"):
      step = tf.cast(step, tf.float32)
      # tf.compat.v1.train.polynomial_decay with cycle=False.
      decay_steps = float(max(self.num_train_steps, 1))
      frac = 1.0 - tf.minimum(step, decay_steps) / decay_steps
      decayed = ((self.learning_rate - self.end_learning_rate) * tf.pow(frac, self.poly_power)
                 + self.end_learning_rate)
      if not self.num_warmup_steps:
        return decayed
      warm_step = step - float(self.start_warmup_step)
      warmup = self.learning_rate * tf.maximum(warm_step, 0.0) / float(self.num_warmup_steps)
      return tf.where(warm_step < float(self.num_warmup_steps), warmup, decayed)

  def get_config(self):
    return {
        "learning_rate": self.learning_rate,
        "num_train_steps": self.num_train_steps,
        "num_warmup_steps": self.num_warmup_steps,
        "start_warmup_step": self.start_warmup_step,
        "poly_power": self.poly_power,
        "end_learning_rate": self.end_learning_rate,
        "name": self.name,
    }


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertLamb(mg_lamb.LAMB):
  """The model garden's LAMB with the official ALBERT numerics (no bias correction by default).

  Slots are named "m" and "v" (the official TF1 names are `<var>/adam_m`, `<var>/adam_v`).
  """

  def __init__(self, learning_rate=0.00176, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
               weight_decay_rate=0.01, exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY,
               exclude_from_layer_adaptation=None, bias_correction=False,
               layer_adaptation=True, name="LAMB", **kwargs):
    super().__init__(learning_rate=learning_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
                     weight_decay_rate=weight_decay_rate,
                     exclude_from_weight_decay=list(exclude_from_weight_decay or []),
                     exclude_from_layer_adaptation=(list(exclude_from_layer_adaptation)
                                                    if exclude_from_layer_adaptation else None),
                     name=name, **kwargs)
    self.bias_correction = bool(bias_correction)
    self.layer_adaptation = bool(layer_adaptation)
    # 1 - beta in double precision, cast once, as the official code does: in float32,
    # 1 - float32(0.999) is off by 1.3e-5 relative, visible in the second moment.
    self._one_minus_beta = (1.0 - float(beta_1), 1.0 - float(beta_2))

    # {optimizer variable key: official TF1 name}, set by `bind_model` / `name_variables`.
    self._official_names = None

  def name_variables(self, named_variables):
    """Tells the optimizer the official name of each variable it will update.

    Args:
      named_variables: iterable of (tf.Variable, official TF1 name). The key is the one the
        optimizer's slots use, so the names hold for the distributed, per-replica and
        mixed-precision (AutoCastVariable) views of the same variable.
    """
    self._official_names = {optimizer_v2._var_key(v): name  # pylint: disable=protected-access
                            for v, name in named_variables}

  def bind_model(self, model):
    """Names every trainable variable of `model` by its official name (see the module doc).

    Raises AlbertError naming the variables the official name table does not know."""
    self.name_variables(official_variable_names(model))

  def _official_name(self, var):
    if self._official_names is None:
      raise AlbertError(f"{type(self).__name__} decides weight decay on official variable "
                        "names: call bind_model(model) before applying gradients")
    name = self._official_names.get(optimizer_v2._var_key(var))  # pylint: disable=protected-access
    if name is None:
      raise AlbertError(f"{type(self).__name__}: variable {var.name} has no official name "
                        "(it is not a variable of the bound model)")
    return name

  def uses_weight_decay(self, official_name):
    """Whether the variable of this official name gets weight decay (official rule)."""
    return self._do_use_weight_decay(official_name)

  def uses_layer_adaptation(self, official_name):
    """Whether the variable of this official name gets the LAMB trust ratio (official rule)."""
    return self._do_layer_adaptation(official_name)

  def _do_layer_adaptation(self, param_name):
    return self.layer_adaptation and super()._do_layer_adaptation(param_name)

  def _resource_apply_dense(self, grad, var, apply_state=None):
    var_device, var_dtype = var.device, var.dtype.base_dtype
    coefficients = ((apply_state or {}).get((var_device, var_dtype))
                    or self._fallback_apply_state(var_device, var_dtype))
    m = self.get_slot(var, "m")
    v = self.get_slot(var, "v")
    one_minus_b1 = tf.cast(self._one_minus_beta[0], var_dtype)
    one_minus_b2 = tf.cast(self._one_minus_beta[1], var_dtype)
    m_t = m.assign(m * coefficients["beta_1_t"] + grad * one_minus_b1,
                   use_locking=self._use_locking)
    v_t = v.assign(v * coefficients["beta_2_t"] + tf.square(grad) * one_minus_b2,
                   use_locking=self._use_locking)
    if self.bias_correction:
      m_t = m_t / (1.0 - coefficients["beta_1_power"])
      v_t = v_t / (1.0 - coefficients["beta_2_power"])
    update = m_t / (tf.sqrt(v_t) + coefficients["epsilon"])

    var_name = self._official_name(var)
    if self._do_use_weight_decay(var_name):
      update += coefficients["weight_decay_rate"] * var
    ratio = 1.0
    if self._do_layer_adaptation(var_name):
      w_norm = tf.norm(var, ord=2)
      u_norm = tf.norm(update, ord=2)
      ratio = tf.where(w_norm > 0.0, tf.where(u_norm > 0.0, w_norm / u_norm, 1.0), 1.0)
    return var.assign_sub(ratio * coefficients["lr_t"] * update, use_locking=self._use_locking)

  def _resource_apply_sparse(self, grad, var, indices, apply_state=None):
    # The official optimizer treats every gradient as dense (m and v decay everywhere).
    dense = tf.math.unsorted_segment_sum(grad, indices, tf.shape(var)[0])
    return self._resource_apply_dense(dense, var, apply_state)

  def get_config(self):
    config = super().get_config()
    config.update({
        "weight_decay_rate": self._serialize_hyperparameter("weight_decay_rate"),
        "exclude_from_weight_decay": self.exclude_from_weight_decay,
        "exclude_from_layer_adaptation": self.exclude_from_layer_adaptation,
        "bias_correction": self.bias_correction,
        "layer_adaptation": self.layer_adaptation,
    })
    config.pop("decay", None)
    return config


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertAdamW(AlbertLamb):
  """The official `AdamWeightDecayOptimizer`: LAMB's update without the trust ratio."""

  def __init__(self, learning_rate=5e-5, name="AdamWeightDecay", **kwargs):
    kwargs["layer_adaptation"] = False
    super().__init__(learning_rate=learning_rate, name=name, **kwargs)


# ------------------------------------------------------------------ the official classes' API
class _OwnNames:
  """Until `bind_model`, a variable is named by its own name without the `:0` output suffix
  (the official `_get_variable_name`), as the official classes search their patterns."""

  def _official_name(self, var):
    if self._official_names is None:
      return var.name.split(":")[0]
    return super()._official_name(var)


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class LAMBOptimizer(_OwnNames, AlbertLamb):
  """The official `lamb_optimizer.LAMBOptimizer`: its arguments and defaults (no weight decay,
  nothing excluded unless asked), as a Keras optimizer.

  As the official class, the exclusion patterns are searched in each variable's own name; call
  `bind_model(model)` for an ALBERT model (Keras names its LayerNorm parameters plain `gamma` /
  `beta`, which "LayerNorm" would never match), then its official names are used.
  """

  def __init__(self, learning_rate, weight_decay_rate=0.0, beta_1=0.9, beta_2=0.999,
               epsilon=1e-6, exclude_from_weight_decay=None, exclude_from_layer_adaptation=None,
               name="LAMBOptimizer", **kwargs):
    super().__init__(learning_rate=learning_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
                     weight_decay_rate=weight_decay_rate,
                     exclude_from_weight_decay=exclude_from_weight_decay or (),
                     exclude_from_layer_adaptation=exclude_from_layer_adaptation, name=name,
                     **kwargs)


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AdamWeightDecayOptimizer(_OwnNames, AlbertAdamW):
  """The official `optimization.AdamWeightDecayOptimizer`: its arguments and defaults, as a
  Keras optimizer; variable names as for LAMBOptimizer."""

  def __init__(self, learning_rate, weight_decay_rate=0.0, beta_1=0.9, beta_2=0.999,
               epsilon=1e-6, exclude_from_weight_decay=None, name="AdamWeightDecayOptimizer",
               **kwargs):
    kwargs.pop("exclude_from_layer_adaptation", None)  # (get_config's; AdamW has no trust ratio)
    super().__init__(learning_rate=learning_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
                     weight_decay_rate=weight_decay_rate,
                     exclude_from_weight_decay=exclude_from_weight_decay or (), name=name,
                     **kwargs)


def official_variable_names(model):
  """[(variable, official TF1 name)] for every trainable variable of `model`.

  The names come from the one table in `albert_tf.checkpoints.official_names`; a model outside
  it (no ALBERT encoder) names its own variables with a method `official_variable_names()`
  returning [(variable, name)]. Raises AlbertError when a trainable variable has no official
  name: its weight decay could only be guessed.
  """
  own_names = getattr(model, "official_variable_names", None)
  if own_names is not None:
    named = {id(v): name for v, name in own_names()}
  else:
    named = {id(row.variable): row.name for row in official_names.official_variables(model)}
  missing = [v.name for v in model.trainable_variables if id(v) not in named]
  if missing:
    raise AlbertError(f"{type(model).__name__}: no official name for trainable variable(s) "
                      f"{', '.join(missing[:5])}; weight decay is decided on official names")
  return [(v, named[id(v)]) for v in model.trainable_variables]


def decay_rules(model, optimizer):
  """{official name: (gets weight decay, gets the trust ratio)} for each trainable variable of
  `model` under `optimizer` (an AlbertLamb / AlbertAdamW): what its updates will do."""
  return {name: (optimizer.uses_weight_decay(name), optimizer.uses_layer_adaptation(name))
          for _, name in official_variable_names(model)}


def create_optimizer(name, learning_rate, num_train_steps, num_warmup_steps=0,
                     start_warmup_step=0, poly_power=1.0, weight_decay_rate=0.01,
                     beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                     exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY):
  """The official `optimization.create_optimizer` as a Keras optimizer.

  Gradient clipping (global norm 1.0) is done by the trainer before `apply_gradients`, on the
  gradients of the whole global batch; see `albert_tf.training.trainer`. The trainer also binds
  the optimizer to its model (`bind_model`), which names the variables for the exclusions.

  Args:
    name: "lamb" (pretraining) or "adamw" (fine-tuning), the official --optimizer values.
    learning_rate: peak learning rate (--learning_rate).
    num_train_steps: steps until the rate reaches 0.
    num_warmup_steps: linear warmup length; 0 disables warmup.
    start_warmup_step: global step where warmup starts (--start_warmup_step).
    poly_power: power of the polynomial decay (--poly_power).
  Returns:
    An `AlbertLamb` or `AlbertAdamW` whose learning rate is a `WarmupPolynomialDecay`.
  """
  name = (name or "").lower()
  if name not in OPTIMIZERS:
    raise AlbertError(f"--optimizer={name!r} is invalid: expected one of {', '.join(OPTIMIZERS)}")
  if learning_rate <= 0:
    raise AlbertError(f"--learning_rate={learning_rate} is invalid: expected > 0")
  if num_train_steps <= 0:
    raise AlbertError(f"--num_train_steps={num_train_steps} is invalid: expected > 0")
  if num_warmup_steps < 0 or start_warmup_step < 0:
    raise AlbertError(f"--num_warmup_steps={num_warmup_steps} / --start_warmup_step="
                      f"{start_warmup_step} are invalid: expected >= 0")
  schedule = WarmupPolynomialDecay(learning_rate, num_train_steps, num_warmup_steps,
                                   start_warmup_step, poly_power)
  cls = AlbertLamb if name == "lamb" else AlbertAdamW
  return cls(learning_rate=schedule, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
             weight_decay_rate=weight_decay_rate,
             exclude_from_weight_decay=exclude_from_weight_decay)


def current_learning_rate(optimizer):
  """The learning rate the next update will use (float tensor), through a LossScaleOptimizer."""
  inner = getattr(optimizer, "inner_optimizer", optimizer)
  lr = inner.learning_rate if hasattr(inner, "learning_rate") else inner.lr
  if isinstance(lr, tf_keras.optimizers.schedules.LearningRateSchedule):
    return lr(inner.iterations)
  return tf.convert_to_tensor(lr, tf.float32)
