"""The trainer's compiled steps, as plain functions of the model, task, optimizer and strategy.

Each is built for one global batch size (the loss divides by it; the eval step multiplies it
back): the Trainer keeps one per batch size (`Trainer.train_loop`, `Trainer.eval_step`), and
benchmarks call these directly. Shapes: a replica's training element is [K * b, ...] (K
accumulation micro-batches of b examples), cut into [K, b, ...] by `micro_batches`.
"""

import contextlib
import dataclasses

from absl import logging
import tensorflow as tf
import tf_keras

from albert_tf.models import early_exit as early_exit_loop


@dataclasses.dataclass(frozen=True)
class StepOptions:
  """How a step computes (the Trainer's arguments of the same names).

  accumulation_steps: micro-batches per replica batch, K.
  clip_norm: global-norm gradient clipping (None/0 disables).
  jit_compile: XLA-compile the forward/backward computation.
  xla_whole_step: XLA-compile the whole replica step and the eval/predict step, as a TPU does.
  on_tpu: the steps run on a TPU (compiled by XLA whatever the flags say).
  """
  accumulation_steps: int = 1
  clip_norm: float = 1.0
  jit_compile: bool = False
  xla_whole_step: bool = False
  on_tpu: bool = False

  def inference_shapes(self):
    """Where eval/predict steps are traced: compiled by XLA (--xla_whole_step, a TPU), a
    model's data-dependent loops keep static shapes (early exit's, models/early_exit.py)."""
    compiled = self.xla_whole_step or self.on_tpu
    return early_exit_loop.static_shapes() if compiled else contextlib.nullcontext()


def build_variables(model, task, optimizer, strategy, element_spec):
  """Creates the model's (and optimizer's) variables eagerly for batches of `element_spec`
  ((features, labels) specs), so checkpoints restore at once and no variable is created inside
  a traced step. Returns the sorted names of the task's auxiliary losses (the train loop's
  `aux_keys`)."""
  features_spec = element_spec[0]
  # A length the dataset leaves open (bucketed batches) is built at the task's full length:
  # heads such as SQuAD v2's top-k need more than one position.
  full_length = getattr(task, "max_seq_length", None) or 1

  def zeros(spec):
    shape = [full_length if d is None else d for d in spec.shape.as_list()]
    if shape:
      shape[0] = 1
    return tf.zeros(shape, spec.dtype)

  dummy = tf.nest.map_structure(zeros, features_spec)
  with strategy.scope():
    outputs = model(dummy, training=False)
    # The names of the task's auxiliary losses (logged with the loss): one eager call on
    # the dummy batch, so the traced train loop knows them up front.
    try:
      dummy_labels = tf.nest.map_structure(zeros, element_spec[1])
      _, aux = task.build_losses(dummy_labels, outputs, 1)
      aux_keys = sorted(aux or {})
    except (tf.errors.OpError, ValueError, TypeError, KeyError, IndexError) as e:
      logging.warning("Auxiliary losses will not be logged (%s)", e)
      aux_keys = []
    if optimizer is not None:
      inner = getattr(optimizer, "inner_optimizer", optimizer)
      if hasattr(inner, "bind_model"):
        # Weight decay and the trust ratio are decided on official variable names.
        inner.bind_model(model)
      inner._create_all_weights(model.trainable_variables)  # pylint: disable=protected-access
  return aux_keys


def forward_backward(model, task, optimizer, metrics, global_batch_size, options=StepOptions()):
  """forward_backward(features, labels) -> (loss, aux, gradients) of one replica, summed over
  its K micro-batches ([K, b, ...] features and labels); `metrics` are updated on each."""
  k = options.accumulation_steps
  loss_scaling = isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)

  def forward_backward_fn(features, labels):
    variables = model.trainable_variables
    # What each micro-batch's loss needs from the whole replica batch (pretraining: the
    # masked-LM normaliser), so K micro-batches give the step of one K-times batch.
    replica_labels = task.replica_batch_labels(labels)

    def one(i):
      f = tf.nest.map_structure(lambda t: t[i], features)
      l = tf.nest.map_structure(lambda t: t[i], labels)
      if replica_labels:
        l = dict(l, **replica_labels)
      with tf.GradientTape() as tape:
        outputs = model(f, training=True)
        loss, aux = task.build_losses(l, outputs, global_batch_size)
        loss = tf.cast(loss, tf.float32)
        scaled = optimizer.get_scaled_loss(loss) if loss_scaling else loss
      grads = tape.gradient(scaled, variables)
      grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
               for g, v in zip(grads, variables)]
      task.update_metrics(metrics, l, outputs)
      aux = {n: tf.cast(a, tf.float32) for n, a in (aux or {}).items()}
      return loss, aux, grads

    loss, aux, grads = one(0)
    if k > 1:
      def body(i, loss, aux, grads):
        l2, a2, g2 = one(i)
        return (i + 1, loss + l2, {n: aux[n] + a2[n] for n in aux},
                [a + b for a, b in zip(grads, g2)])
      _, loss, aux, grads = tf.while_loop(lambda i, *_: i < k, body,
                                          (tf.constant(1), loss, aux, grads))
    return loss, aux, grads

  if options.jit_compile:
    return tf.function(forward_backward_fn, jit_compile=True, autograph=False)
  return forward_backward_fn


def micro_batches(element, accumulation_steps):
  """A replica's [K * b, ...] tensors -> [K, b, ...]: K accumulation micro-batches."""
  k = accumulation_steps

  def split(t):
    rest = [d if d is not None else tf.shape(t)[i + 1]
            for i, d in enumerate(t.shape.as_list()[1:])]
    rows = t.shape[0] // k if t.shape[0] is not None else -1
    shape = [k, rows] + rest
    return tf.reshape(t, tf.stack(shape) if any(isinstance(d, tf.Tensor) for d in rest)
                      else shape)
  return tf.nest.map_structure(split, element)


def replica_step(model, task, optimizer, strategy, metrics, global_batch_size,
                 options=StepOptions(), stop_flag=None):
  """replica_step(features, labels) -> (loss, aux, stop): one optimizer update.

  `stop_flag` (a host tf.Variable, see `preemption.StopSignals`, or None) is read late in the
  step and summed with the gradients, so every replica of every worker sees the same `stop`.
  """
  loss_scaling = isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
  forward_backward_fn = forward_backward(model, task, optimizer, metrics, global_batch_size,
                                         options)

  def replica_step_fn(features, labels):
    loss, aux, grads = forward_backward_fn(
        *micro_batches((features, labels), options.accumulation_steps))
    stop = tf.constant(0.0)
    if stop_flag is not None:
      # Read once the gradients exist, late in the step: a signal that arrives while this
      # step computes stops the run right after it.
      with tf.control_dependencies(grads):
        stop = tf.cast(stop_flag.read_value(), tf.float32)
    if strategy.num_replicas_in_sync > 1:
      # The stop flag rides along with the gradients: no extra collective.
      reduced = tf.distribute.get_replica_context().all_reduce(
          tf.distribute.ReduceOp.SUM, list(grads) + [stop])
      grads, stop = reduced[:-1], reduced[-1]
    if loss_scaling:
      grads = optimizer.get_unscaled_gradients(grads)
    if options.clip_norm:
      grads, _ = tf.clip_by_global_norm(grads, options.clip_norm)
    optimizer.apply_gradients(zip(grads, model.trainable_variables),
                              experimental_aggregate_gradients=False)
    return loss, aux, stop
  if options.xla_whole_step:
    # One XLA computation per replica step, as a TPU compiles it.
    return tf.function(replica_step_fn, jit_compile=True, autograph=False)
  # No Python control flow on tensors below this point (the micro-batch loop is a
  # tf.while_loop): converting the model's and the task's code with AutoGraph would only
  # cost tracing time (a third of a small run's start-up).
  return tf.autograph.experimental.do_not_convert(replica_step_fn)


def train_loop(model, task, optimizer, strategy, metrics, global_batch_size,
               options=StepOptions(), aux_keys=(), stop_flag=None):
  """The compiled loop `train_loop(iterator, num_steps)`: up to num_steps updates, stopping
  early at a non-finite loss or once the (all-reduced) `stop_flag` was raised.

  Returns, per call: (sum of losses, {aux key: sum}, steps run, first bad step or -1, stopped);
  `aux_keys` are the task's auxiliary losses (the traced loop must know them up front).
  """
  replica_step_fn = replica_step(model, task, optimizer, strategy, metrics, global_batch_size,
                                 options, stop_flag)

  def one_step(iterator):
    step_before = tf.identity(optimizer.iterations)
    features, labels = next(iterator)  # per replica: [K * b, ...]
    loss, aux, stop = strategy.run(replica_step_fn, args=(features, labels))
    loss = strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
    aux = {n: strategy.reduce(tf.distribute.ReduceOp.SUM, a, axis=None)
           for n, a in aux.items()}
    stop = strategy.experimental_local_results(stop)[0]  # all-reduced: equal everywhere
    finite = tf.math.is_finite(loss)
    bad_step = tf.where(finite, tf.constant(-1, tf.int64),
                        tf.cast(step_before, tf.int64) + 1)
    return loss, aux, bad_step, stop > 0

  aux_keys = list(aux_keys)

  one_step = tf.autograph.experimental.do_not_convert(one_step)

  @tf.function  # AutoGraph for this loop's `for` / `break` only (one_step is not converted)
  def train_loop_fn(iterator, num_steps):
    """Returns (sum of losses, sum of aux, steps run, first bad step or -1, stopped)."""
    loss_sum = tf.constant(0.0)
    aux_sum = {n: tf.constant(0.0) for n in aux_keys}
    steps = tf.constant(0)
    bad_step = tf.constant(-1, tf.int64)
    stopped = tf.constant(False)
    for _ in tf.range(num_steps):
      loss, aux, bad_step, stopped = one_step(iterator)
      steps += 1
      loss_sum += loss
      aux_sum = {n: aux_sum[n] + aux[n] for n in aux_keys}
      if bad_step >= 0 or stopped:
        break
    return loss_sum, aux_sum, steps, bad_step, stopped

  return train_loop_fn


def eval_step(model, task, strategy, metrics, eval_batch_size, options=StepOptions()):
  """One compiled eval step `eval_step(features, labels[, real])`: per replica, (sums of loss
  and aux over its examples, its example count, the model's outputs); `real` (float32 [b], 1
  for a real example) masks padding rows out of the loss, the metrics and the count."""

  def replica_eval(features, labels, real=None):
    with options.inference_shapes():
      outputs = model(features, training=False)
    if real is not None and labels:
      # Padding rows weigh 0 in the loss and the streaming metrics.
      weights = real * tf.cast(labels.get("is_real_example", 1.0), tf.float32)
      labels = dict(labels, is_real_example=weights)
    loss, aux = task.build_losses(labels, outputs, eval_batch_size)
    task.update_metrics(metrics, labels, outputs)
    count = (tf.shape(tf.nest.flatten(features)[0])[0] if real is None
             else tf.cast(tf.reduce_sum(real), tf.int32))
    # Undo the division by eval_batch_size: sums over examples, per replica.
    scale = tf.cast(eval_batch_size, tf.float32)
    sums = {"loss": tf.cast(loss, tf.float32) * scale}
    sums.update({n: tf.cast(a, tf.float32) * scale for n, a in (aux or {}).items()})
    return sums, count, outputs

  if options.xla_whole_step:
    replica_eval = tf.function(replica_eval, jit_compile=True, autograph=False)

  def eval_step_fn(*element):
    return strategy.run(replica_eval, args=element)
  # reduce_retracing: bucketed batches come in a few lengths; one generic trace serves them.
  return tf.function(eval_step_fn, jit_compile=False, reduce_retracing=True, autograph=False)


def predict_step(model, strategy, options=StepOptions()):
  """One compiled predict step `predict_step(features)`: per replica, the model's outputs."""
  def replica_predict(features):
    with options.inference_shapes():
      return model(features, training=False)
  if options.xla_whole_step:
    replica_predict = tf.function(replica_predict, jit_compile=True, autograph=False)
  return tf.function(lambda f: strategy.run(replica_predict, args=(f,)),
                     reduce_retracing=True, autograph=False)
