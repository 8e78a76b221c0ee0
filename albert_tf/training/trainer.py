"""The one training loop: any Task, any tf.distribute strategy, resumable, stoppable.

What a step does (the official `optimization.create_optimizer`, distributed):
  1. Each input pipeline (one per worker, or per host of a TPU pod, fed through
     `strategy.distribute_datasets_from_function`) yields its share of the global batch, cut
     into one slice per local replica, each of `gradient_accumulation_steps` micro-batches.
  2. Each replica runs forward/backward on its micro-batches, summing gradients (the task's loss
     is averaged over the *global* batch, so the sum over replicas and micro-batches is the
     gradient of the global-batch loss).
  3. Gradients are summed over replicas, clipped to global norm 1.0 and applied once; the
     optimizer's `iterations` is the global step (it drives the learning-rate schedule).

Checkpoints, resume and the input position: `albert_tf.training.checkpointing`. A SIGTERM or
SIGINT (`albert_tf.training.preemption`) stops the loop after the step it is in; the trainer
saves and raises `StopRequested`. A broken input record stops it with a one-line error naming
the file (`albert_tf.data.record_checks`).
"""

import contextlib
import os
import time

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf.checkpoints import formats
from albert_tf.checkpoints import init as checkpoint_init
from albert_tf.checkpoints import integrity
from albert_tf.data import eval_padding
from albert_tf.data import record_checks
from albert_tf.errors import AlbertError, NotFiniteError, StopRequested
from albert_tf.models import early_exit as early_exit_loop
from albert_tf.networks import encoder as encoder_lib
from albert_tf.training import checkpointing
from albert_tf.training import optimizer as optimizer_lib
from albert_tf.training import preemption
from albert_tf.training import progress as progress_lib
from albert_tf.training import results as results_lib
from albert_tf.training import runtime as runtime_lib
from albert_tf.training import strategy as strategy_lib
from albert_tf.tasks.base import Task

PRECISION_POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


def _float_items(outputs):
  """(name, array) of every floating-point array in a (nested) dict of model outputs."""
  if isinstance(outputs, (list, tuple)):
    outputs = dict(enumerate(outputs))
  if isinstance(outputs, dict):
    for key, value in sorted(outputs.items()):
      for name, array in _float_items(value):
        yield (f"{key}/{name}" if name else str(key)), array
  elif isinstance(outputs, np.ndarray) and outputs.dtype.kind == "f":
    yield "", outputs


class NonFiniteLossError(AlbertError):
  """The loss became NaN/inf; the last good checkpoint is kept."""


def check_batch_size(flag, batch_size, replicas, micro_batches=1):
  """AlbertError unless `batch_size` splits evenly into `replicas` x `micro_batches`."""
  if batch_size % (replicas * micro_batches):
    extra = f" x --gradient_accumulation_steps ({micro_batches})" if micro_batches > 1 else ""
    raise AlbertError(f"{flag}={batch_size} is invalid: must be a multiple of the replicas "
                      f"({replicas}){extra}")


class Trainer:
  """Runs a `Task` for train / evaluate / predict under a tf.distribute strategy.

  Args:
    task: an `albert_tf.tasks.base.Task`.
    strategy: tf.distribute.Strategy (default: the current/default strategy).
    output_dir: checkpoints, TensorBoard summaries (train/, eval/) and input state.
    optimizer_fn: zero-arg callable returning a Keras (legacy) optimizer, e.g.
      `lambda: create_optimizer("lamb", ...)`. Needed for `train` only.
    precision: "fp32", "bf16" (mixed_bfloat16) or "fp16" (mixed_float16 + dynamic loss scaling).
    jit_compile: XLA-compile the forward/backward computation.
    xla_whole_step: XLA-compile the whole replica step (forward, loss, backward, clipping,
      optimizer update, metrics, accumulation) and the eval step, as a TPU runs them; the stop
      flag is then read between loops, as on a TPU. On a CPU, XLA has no kernel for the
      cross-replica sum: one replica only there.
    pad_eval_batches: pad eval/predict batches to the full batch (`data.eval_padding`), the
      padding rows masked out of every result; always on with `on_tpu`.
    on_tpu: the run is on a TPU (`runtime.on_tpu`); None: whether `strategy` is a TPUStrategy.
    gradient_accumulation_steps: micro-batches per global batch.
    save_checkpoints_steps: checkpoint interval in global steps (a final one is always saved).
    keep_checkpoint_max: checkpoints kept (None or 0: all).
    log_every_n_steps: progress line / summary interval.
    steps_per_loop: steps run inside one tf.function call (bounded by the intervals above).
    clip_norm: global-norm gradient clipping (official: 1.0; None/0 disables).
    recompute: the encoder's activation recomputation in training, "none", "layer" or
      "attention" (see `AlbertEncoder`); set on `model.encoder` (or the model, if it is one).
    stop_signals: a `preemption.StopSignals` whose SIGTERM/SIGINT stop `train` cleanly after
      the current step (the runner installs one for the whole run); None: signals are not
      handled here.
  """

  def __init__(self, task, strategy=None, output_dir=None, optimizer_fn=None, precision="fp32",
               jit_compile=False, gradient_accumulation_steps=1, save_checkpoints_steps=1000,
               keep_checkpoint_max=5, log_every_n_steps=100, steps_per_loop=None,
               clip_norm=1.0, recompute="none", stop_signals=None, xla_whole_step=False,
               pad_eval_batches=False, on_tpu=None):
    if not isinstance(task, Task):
      raise TypeError(f"task must be an albert_tf Task, got {type(task).__name__}")
    if precision not in PRECISION_POLICIES:
      raise AlbertError(f"--precision={precision!r} is invalid: expected one of "
                        f"{', '.join(PRECISION_POLICIES)}")
    if int(gradient_accumulation_steps) < 1:
      raise AlbertError(f"--gradient_accumulation_steps={gradient_accumulation_steps} is "
                        "invalid: expected >= 1")
    if save_checkpoints_steps is not None and int(save_checkpoints_steps) < 1:
      raise AlbertError(f"--save_checkpoints_steps={save_checkpoints_steps} is invalid: "
                        "expected >= 1")
    self.task = task
    self.strategy = strategy or tf.distribute.get_strategy()
    self.on_tpu = bool(on_tpu) or runtime_lib.on_tpu(strategy_object=self.strategy)
    self.xla_whole_step = bool(xla_whole_step)
    self.pad_eval_batches = bool(pad_eval_batches) or self.on_tpu
    if (self.xla_whole_step and self.strategy.num_replicas_in_sync > 1 and not self.on_tpu
        and not tf.config.list_logical_devices("GPU")):
      raise AlbertError(f"--xla_whole_step: XLA has no CPU kernel for the cross-replica sum of "
                        f"{self.strategy.num_replicas_in_sync} replicas: compile the whole step "
                        "on one CPU replica (--strategy=default), or on GPUs or a TPU")
    if precision == "bf16" and (jit_compile or xla_whole_step) and not (
        tf.config.list_logical_devices("GPU") or self.on_tpu):
      # Measured (bench/precision.py): XLA's CPU compiler turns bfloat16 dots into float32 dots
      # plus conversions.
      logging.warning("--precision=bf16 with --jit_compile on a CPU runs bfloat16 matmuls as "
                      "float32 plus conversions (2.4x slower than fp32 in bench/precision.py): "
                      "drop --jit_compile")
    self.output_dir = output_dir
    self.precision = precision
    self.jit_compile = bool(jit_compile)
    self.accumulation_steps = int(gradient_accumulation_steps)
    self.save_checkpoints_steps = int(save_checkpoints_steps or 0)
    self.keep_checkpoint_max = keep_checkpoint_max or None
    self.log_every_n_steps = max(1, int(log_every_n_steps or 1))
    self.steps_per_loop = max(1, int(steps_per_loop or self.log_every_n_steps))
    self.clip_norm = clip_norm
    self.stop_signals = stop_signals or preemption.StopSignals()
    _, self.worker_id, self.is_chief = strategy_lib.worker_info(self.strategy)
    self.num_workers = strategy_lib.num_workers(self.strategy)

    with self._precision_policy(), self.strategy.scope():
      self.model = task.build_model()
      encoder_lib.set_recompute(self.model, recompute)
      self.optimizer = None
      if optimizer_fn is not None:
        optimizer = optimizer_fn()
        if precision == "fp16":
          optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
        self.optimizer = optimizer
      self.train_metrics = list(task.build_metrics(training=True) or [])
      self.eval_metrics = list(task.build_metrics(training=False) or [])
      # The step counter of runs without an optimizer (evaluate/predict), restored from
      # checkpoints as `global_step`.
      self._eval_step_counter = tf.Variable(0, dtype=tf.int64, trainable=False,
                                            name="global_step")
    self._built = False
    self._train_pipelines = {}  # (global batch, input pipeline id) -> the task's train dataset
    self._aux_keys = []
    self._train_fn = None
    self._stop_read_in_graph = False
    self._eval_fn = None
    self._predict_fn = None
    self._restored_path = None  # the checkpoint evaluate / predict use, for their errors

  # ------------------------------------------------------------------ helpers
  @contextlib.contextmanager
  def _precision_policy(self):
    previous = tf_keras.mixed_precision.global_policy()
    tf_keras.mixed_precision.set_global_policy(PRECISION_POLICIES[self.precision])
    try:
      yield
    finally:
      tf_keras.mixed_precision.set_global_policy(previous)

  @property
  def global_step(self):
    """The number of optimizer updates applied (int)."""
    if self.optimizer is not None:
      return int(self.optimizer.iterations.numpy())
    return int(self._eval_step_counter.numpy())

  def _ensure_built(self, element_spec):
    """Creates the model's (and optimizer's) variables eagerly, so checkpoints restore at once
    and no variable is created inside a traced step."""
    if self._built:
      return
    features_spec = element_spec[0]
    # A length the dataset leaves open (bucketed batches) is built at the task's full length:
    # heads such as SQuAD v2's top-k need more than one position.
    full_length = getattr(self.task, "max_seq_length", None) or 1

    def zeros(spec):
      shape = [full_length if d is None else d for d in spec.shape.as_list()]
      if shape:
        shape[0] = 1
      return tf.zeros(shape, spec.dtype)

    dummy = tf.nest.map_structure(zeros, features_spec)
    with self.strategy.scope():
      outputs = self.model(dummy, training=False)
      # The names of the task's auxiliary losses (logged with the loss): one eager call on
      # the dummy batch, so the traced train loop knows them up front.
      try:
        dummy_labels = tf.nest.map_structure(zeros, element_spec[1])
        _, aux = self.task.build_losses(dummy_labels, outputs, 1)
        self._aux_keys = sorted(aux or {})
      except (tf.errors.OpError, ValueError, TypeError, KeyError, IndexError) as e:
        logging.warning("Auxiliary losses will not be logged (%s)", e)
        self._aux_keys = []
      if self.optimizer is not None:
        inner = getattr(self.optimizer, "inner_optimizer", self.optimizer)
        if hasattr(inner, "bind_model"):
          # Weight decay and the trust ratio are decided on official variable names.
          inner.bind_model(self.model)
        inner._create_all_weights(self.model.trainable_variables)  # pylint: disable=protected-access
    self._built = True

  def _checkpoint(self):
    if self.optimizer is not None:
      return tf.train.Checkpoint(model=self.model, optimizer=self.optimizer,
                                 global_step=self.optimizer.iterations)
    return tf.train.Checkpoint(model=self.model, global_step=self._eval_step_counter)

  def _summary_writer(self, name):
    if self.output_dir and self.is_chief:
      return tf.summary.create_file_writer(os.path.join(self.output_dir, name))
    return tf.summary.create_noop_writer()

  def _log(self, message):
    if self.is_chief:
      print(message, flush=True)

  @contextlib.contextmanager
  def _input_errors_explained(self, mode):
    """Turns an input pipeline failure (a truncated or corrupt record file, a record of another
    length, an id outside the vocabulary) into a one-line AlbertError naming the file."""
    try:
      yield
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError,
            tf.errors.OutOfRangeError, UnicodeDecodeError) as e:
      # (UnicodeDecodeError: TensorFlow fails to decode its own message about a record that
      # is no tf.Example at all.)
      explained = record_checks.explain_input_error(e, self.task.input_files(mode))
      if explained is None:
        raise
      raise explained from None

  # ------------------------------------------------------------------ train
  def _forward_backward_fn(self, global_batch_size):
    """forward_backward(features, labels) -> (loss, aux, gradients) of one replica, summed over
    its K micro-batches ([K, b, ...] features and labels)."""
    model, task, optimizer = self.model, self.task, self.optimizer
    k = self.accumulation_steps
    loss_scaling = isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)

    def forward_backward(features, labels):
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
        task.update_metrics(self.train_metrics, l, outputs)
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

    if self.jit_compile:
      return tf.function(forward_backward, jit_compile=True, autograph=False)
    return forward_backward

  def _micro_batches(self, element):
    """A replica's [K * b, ...] tensors -> [K, b, ...]: K accumulation micro-batches."""
    k = self.accumulation_steps

    def split(t):
      rest = [d if d is not None else tf.shape(t)[i + 1]
              for i, d in enumerate(t.shape.as_list()[1:])]
      rows = t.shape[0] // k if t.shape[0] is not None else -1
      shape = [k, rows] + rest
      return tf.reshape(t, tf.stack(shape) if any(isinstance(d, tf.Tensor) for d in rest)
                        else shape)
    return tf.nest.map_structure(split, element)

  def _replica_step_fn(self, global_batch_size, stop_flag):
    """replica_step(features, labels) -> (loss, aux, stop): one optimizer update.

    `stop_flag` (a host tf.Variable, see `preemption.StopSignals`, or None) is read late in the
    step and summed with the gradients, so every replica of every worker sees the same `stop`.
    """
    model, optimizer, strategy = self.model, self.optimizer, self.strategy
    loss_scaling = isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
    forward_backward = self._forward_backward_fn(global_batch_size)

    def replica_step(features, labels):
      loss, aux, grads = forward_backward(*self._micro_batches((features, labels)))
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
      if self.clip_norm:
        grads, _ = tf.clip_by_global_norm(grads, self.clip_norm)
      optimizer.apply_gradients(zip(grads, model.trainable_variables),
                                experimental_aggregate_gradients=False)
      return loss, aux, stop
    if self.xla_whole_step:
      # One XLA computation per replica step, as a TPU compiles it.
      return tf.function(replica_step, jit_compile=True, autograph=False)
    # No Python control flow on tensors below this point (the micro-batch loop is a
    # tf.while_loop): converting the model's and the task's code with AutoGraph would only
    # cost tracing time (a third of a small run's start-up).
    return tf.autograph.experimental.do_not_convert(replica_step)

  def _build_train_fn(self, global_batch_size, stop_flag=None):
    """The compiled loop `train_loop(iterator, num_steps)`: up to num_steps updates, stopping
    early at a non-finite loss or once the (all-reduced) stop flag was raised."""
    optimizer, strategy = self.optimizer, self.strategy
    # A TPU loop cannot read a host variable: there (and in a whole step compiled as on a TPU)
    # the trainer checks between loop calls. With the flag read in the loop, only the loop's
    # (all-reduced) answer may stop a worker: a worker that stopped on its own between loop
    # calls would leave the others waiting in the next step's collective.
    self._stop_read_in_graph = (stop_flag is not None and not self.on_tpu and
                                not self.xla_whole_step)
    replica_step = self._replica_step_fn(global_batch_size,
                                         stop_flag if self._stop_read_in_graph else None)

    def one_step(iterator):
      step_before = tf.identity(optimizer.iterations)
      features, labels = next(iterator)  # per replica: [K * b, ...]
      loss, aux, stop = strategy.run(replica_step, args=(features, labels))
      loss = strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
      aux = {n: strategy.reduce(tf.distribute.ReduceOp.SUM, a, axis=None)
             for n, a in aux.items()}
      stop = strategy.experimental_local_results(stop)[0]  # all-reduced: equal everywhere
      finite = tf.math.is_finite(loss)
      bad_step = tf.where(finite, tf.constant(-1, tf.int64),
                          tf.cast(step_before, tf.int64) + 1)
      return loss, aux, bad_step, stop > 0

    aux_keys = list(self._aux_keys)

    one_step = tf.autograph.experimental.do_not_convert(one_step)

    @tf.function  # AutoGraph for this loop's `for` / `break` only (one_step is not converted)
    def train_loop(iterator, num_steps):
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

    return train_loop

  def _train_dataset(self, train_batch_size, skip=0):
    """Every input pipeline's training batches, through `distribute_datasets_from_function`.

    Each input pipeline (one per worker, or per host of a TPU pod: `tf.distribute.InputContext`)
    reads its share of the files, or of the records when files are fewer than pipelines (the
    task's `build_inputs`), in batches of its local replicas' share of the global batch:
    parsing and checking big batches is cheaper (bench/input_pipeline.py --per_replica_parsing
    times per-replica batches). Each batch is cut into one element of the
    per-replica batch per local replica (replica r takes the r-th slice), shapes kept static;
    the replica step cuts it into its accumulation micro-batches (`_micro_batches`).

    Args:
      train_batch_size: the global batch.
      skip: batches each pipeline skips first (a resume goes on where the saved run stopped).
    Returns:
      (distributed dataset, element spec of a pipeline's batches). A second call (the resume's
      skip) reuses the task's pipelines of the first (its file checks run once).
    """
    specs = []
    built = self._train_pipelines

    def dataset_fn(ctx):
      per_replica = ctx.get_per_replica_batch_size(train_batch_size)
      local_replicas = ctx.num_replicas_in_sync // ctx.num_input_pipelines
      key = (train_batch_size, ctx.input_pipeline_id)
      if key not in built:  # (made on the pipeline's host: dataset_fn runs there)
        built[key] = self.task.build_inputs("train", per_replica * local_replicas, ctx)
      dataset = built[key]
      specs.append(dataset.element_spec)
      if skip:
        dataset = dataset.skip(skip)
      if local_replicas > 1:
        dataset = dataset.rebatch(per_replica, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
      return dataset

    dataset = self.strategy.distribute_datasets_from_function(
        dataset_fn, options=self._train_input_options())
    return dataset, specs[0]

  def _train_input_options(self):
    """Replicas on CPUs (logical devices of one CPU) have nothing to fetch their elements to:
    the per-device prefetch of TensorFlow's MultiDeviceIterator only costs host work there
    (bench/input_pipeline.py, 8 logical devices: 0.70x -> 0.84x the client pipeline's
    examples/s). GPUs and TPUs keep it (it overlaps the copies with the step)."""
    try:
      devices = list(self.strategy.extended.worker_devices)
    except (RuntimeError, NotImplementedError, AttributeError):  # the default strategy
      return None
    if devices and all("device:CPU" in tf.DeviceSpec.from_string(d).to_string()
                       for d in devices):
      return tf.distribute.InputOptions(experimental_fetch_to_device=False)
    return None

  def _train_dataset_iterator(self, train_batch_size):
    """(iterator over per-replica [K * b, ...] elements, element spec of a pipeline's
    batches)."""
    dataset, element_spec = self._train_dataset(train_batch_size)
    return iter(dataset), element_spec

  def _steps_to_next_event(self, step, num_train_steps):
    """Steps until the next progress line, checkpoint, loop boundary or the end."""
    boundaries = [num_train_steps, step + self.steps_per_loop,
                  (step // self.log_every_n_steps + 1) * self.log_every_n_steps]
    if self.save_checkpoints_steps:
      boundaries.append((step // self.save_checkpoints_steps + 1) * self.save_checkpoints_steps)
    return min(boundaries) - step

  def train(self, num_train_steps, train_batch_size):
    """Trains to global step `num_train_steps`, resuming from output_dir's latest checkpoint.

    Returns a dict: global_step, loss (mean over the last logging interval), aux losses and
    train metrics of that interval, examples_per_second, train_seconds.
    Raises:
      StopRequested: a SIGTERM/SIGINT arrived; the step it interrupted was finished and saved.
      NonFiniteLossError: the loss became NaN/inf (the last good checkpoint is kept).
    """
    self._check_train_arguments(train_batch_size)
    tf.io.gfile.makedirs(self.output_dir)
    dataset, element_spec = self._train_dataset(train_batch_size)
    self._ensure_built(element_spec)
    saves = checkpointing.TrainingCheckpoints(
        self.output_dir, self._checkpoint(),
        # What a saved input position is only valid for: the batches' shapes and the workers.
        input_signature={"train_batch_size": int(train_batch_size),
                         "num_workers": int(self.num_workers),
                         "batch_shapes": checkpointing.batch_shapes(element_spec)},
        worker_id=self.worker_id, is_chief=self.is_chief,
        keep_checkpoint_max=self.keep_checkpoint_max, barrier=self.barrier, log=self._log)
    if saves.restore(lambda: self.global_step):
      if self.task.init_checkpoint:  # the official scripts too: output_dir's checkpoint wins
        self._log(f"note: --init_checkpoint={self.task.init_checkpoint} not read: resuming "
                  f"--output_dir's checkpoint instead")
    else:
      if self.task.fine_tunes and not self.task.init_checkpoint:
        self._log(f"note: {self.task.name}: no --init_checkpoint or --albert_hub_module_handle: "
                  "training from random initialisation, not from a pretrained model")
      self._start_from_initial_checkpoint(num_train_steps)
    if saves.input_batches_to_skip:
      dataset, _ = self._train_dataset(train_batch_size, skip=saves.input_batches_to_skip)
    iterator = iter(dataset)
    signals = self.stop_signals
    if self._train_fn is None:
      self._train_fn = self._build_train_fn(train_batch_size, signals.make_stop_flag())
    progress = progress_lib.TrainingProgress(num_train_steps, train_batch_size, self.global_step,
                                             self._log, self._summary_writer("train"))
    with signals.training():
      step = self.global_step
      while step < num_train_steps:
        with self._input_errors_explained("train"):
          loss_sum, aux_sum, steps_run, bad_step, stopped = self._train_fn(
              iterator, tf.constant(self._steps_to_next_event(step, num_train_steps)))
        if int(bad_step) >= 0:
          raise NonFiniteLossError(f"non-finite loss at step {int(bad_step)}; stopped; "
                                   f"{saves.diverged(int(bad_step))}")
        step = self.global_step
        progress.add(loss_sum, aux_sum, steps_run)
        stopping = bool(stopped) or (signals.requested and not self._stop_read_in_graph)
        if step % self.log_every_n_steps == 0 or step >= num_train_steps or stopping:
          progress.report(step, self.train_metrics,
                          optimizer_lib.current_learning_rate(self.optimizer))
        if stopping:
          self._save_and_stop(saves, step, num_train_steps)
        if step >= num_train_steps or (self.save_checkpoints_steps and
                                       step % self.save_checkpoints_steps == 0):
          saves.save(step)
      saves.finish()
      # The chief's save (and pruning) of the last checkpoint is complete only after this: a
      # worker that went on to --do_eval at once found no checkpoint in output_dir.
      self.barrier()
      if signals.requested:  # arrived during the final save: training is complete
        raise StopRequested(signals.stopped_message(
            f"training finished at step {step}, saved to {saves.last_saved}"))
    return dict(progress.summary, global_step=self.global_step,
                train_seconds=progress.seconds)

  def _start_from_initial_checkpoint(self, num_train_steps):
    """task.initialize (--init_checkpoint's weights), then the step counter at the step it asks
    for (0 unless the task continues the checkpoint's schedule); the optimizer state stays as
    built: fresh."""
    self.task.initialize(self.model)
    start = int(self.task.initial_step() or 0)
    if start >= num_train_steps:
      raise AlbertError(f"--init_checkpoint={self.task.init_checkpoint} is at step {start}, "
                        f"not below the {num_train_steps} training steps: nothing to train "
                        "(raise the number of training steps)")
    if start:
      self.optimizer.iterations.assign(start)
    if self.task.init_checkpoint:
      self._log(f"Starting from --init_checkpoint={self.task.init_checkpoint} (its weights; "
                f"fresh optimizer state) at step {start}")

  def _check_train_arguments(self, train_batch_size):
    if self.optimizer is None:
      raise AlbertError("Trainer.train needs optimizer_fn")
    if not self.output_dir:
      raise AlbertError("Trainer.train needs an output_dir for checkpoints")
    check_batch_size("--train_batch_size", train_batch_size,
                     self.strategy.num_replicas_in_sync, self.accumulation_steps)

  def _save_and_stop(self, saves, step, num_train_steps):
    """After a SIGTERM/SIGINT: saves step `step` (unless saved already) and raises StopRequested."""
    started = time.time()
    prefix = saves.last_saved
    if not (prefix and prefix.endswith(f"ckpt-{step}")):
      prefix = saves.save(step)
    raise StopRequested(self.stop_signals.stopped_message(
        f"step {step}/{num_train_steps} saved to {prefix} (weights, optimizer and input "
        f"position; {time.time() - started:.1f} s)"))

  def barrier(self):
    """Returns when every worker has reached it (multi-worker runs; else at once): what the
    chief wrote before it, the others can read after it."""
    if self.num_workers <= 1:
      return
    self.strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(
        tf.distribute.ReduceOp.SUM, tf.constant(1.0)))

  # ------------------------------------------------------------------ restore for eval/predict
  def _restore_for_inference(self, checkpoint_path):
    """Loads checkpoint_path (a checkpoint prefix, a directory of checkpoints, or a fine-tuned
    HF transformers directory; None: output_dir's latest intact checkpoint, else
    task.initialize from its init checkpoint). Returns the step."""
    path = checkpoint_path
    is_hf = path is not None and formats.directory_format(path, hub_modules=False) == formats.HF
    if path and tf.io.gfile.isdir(path) and not is_hf:
      path = checkpointing.latest_checkpoint(path)
      if not path:
        raise AlbertError(f"{checkpoint_path}: no checkpoint in this directory")
    if path is None and self.output_dir:
      path = checkpointing.latest_checkpoint(self.output_dir)
    if path is None:
      if not self.task.init_checkpoint:
        raise AlbertError(f"no checkpoint in --output_dir={self.output_dir} and no "
                          "--init_checkpoint: nothing to evaluate (train first with --do_train)")
      self._restored_path = self.task.init_checkpoint
      self.task.initialize(self.model)
      return self.global_step
    if not (tf.io.gfile.exists(path + ".index") or integrity.checkpoint_files(path)
            or formats.directory_format(path, hub_modules=False) == formats.HF):
      raise AlbertError(f"{path}: no such checkpoint (expected {path}.index)")
    # Every weight must come from the checkpoint (ours, an official TF1 one or an HF
    # directory, whose head rows follow the task's classes): a head left at its random
    # initial value would evaluate, predict and export garbage without a word.
    self._restored_path = path
    step = checkpoint_init.restore_model_weights(
        self.model, path, label_list=self.task.label_list) or 0
    if self.optimizer is None:
      self._eval_step_counter.assign(step)
    return step

  def _distributed_dataset(self, mode, global_batch_size):
    """Eval/predict batches through `distribute_datasets_from_function`.

    Every input pipeline reads the whole set in order (the task's `build_inputs` without an
    input context), and then:
      * one client, several pipelines (a TPU pod: one pipeline per host; its client sees every
        core's results): pipeline p keeps chunks p, p + P, p + 2P, ... of R consecutive batches
        (P pipelines, R replicas each). Step k's replicas, in device order, then hold batches
        kN .. kN + N - 1 (N = P * R): the client gets each example once, in input order. Every
        pipeline must run the same number of steps, so the set is padded to a multiple of N
        batches (`data.eval_padding`), whatever `pad_eval_batches` says;
      * a client per worker (MultiWorkerMirroredStrategy): each worker evaluates and predicts
        the whole set on its own replicas, since its local results are all it can write; the
        sums and counts are its own replicas' (`_run_evaluation`), so nothing counts twice;
      * one pipeline: the whole set, padded to a multiple of its replicas with
        `pad_eval_batches`.
    Returns:
      (distributed dataset, element spec of a pipeline's batches, padded: elements end with
      `real`, float32 [batch]).
    """
    check_batch_size(f"--{mode}_batch_size", global_batch_size,
                     self.strategy.num_replicas_in_sync)
    num_replicas = self.strategy.num_replicas_in_sync
    one_client = self._client_sees_every_replica()
    made = []

    def dataset_fn(ctx):
      batch_size = ctx.get_per_replica_batch_size(global_batch_size)
      local_replicas = num_replicas // ctx.num_input_pipelines
      shard = one_client and ctx.num_input_pipelines > 1
      dataset = self.task.build_inputs(mode, batch_size)
      padded = self.pad_eval_batches or shard
      if padded:
        dataset = eval_padding.pad_batches(
            dataset, batch_size, num_replicas if shard else local_replicas,
            full_length=getattr(self.task, "max_seq_length", None) or 1)
      if shard:
        dataset = eval_padding.shard_chunks(dataset, ctx.num_input_pipelines,
                                            ctx.input_pipeline_id, local_replicas)
      made.append((dataset.element_spec, padded))
      return dataset
    dataset = self.strategy.distribute_datasets_from_function(dataset_fn)
    return (dataset,) + made[0]

  def _client_sees_every_replica(self):
    """False when each worker runs its own client (MultiWorkerMirroredStrategy: its local
    results are its own replicas'); True for one device, MirroredStrategy and a TPU (a pod's
    one client sees every host's cores)."""
    try:
      return len(self.strategy.extended.worker_devices) == self.strategy.num_replicas_in_sync
    except (RuntimeError, NotImplementedError, AttributeError):  # the default strategy
      return True

  def _local_sum(self, per_replica):
    """The sum over this client's replicas of a per-replica numpy-convertible value."""
    return sum(np.asarray(v) for v in self.strategy.experimental_local_results(per_replica))

  def _local_concat(self, per_replica):
    def concat(value):
      parts = [np.asarray(p) for p in self.strategy.experimental_local_results(value)]
      if not parts[0].ndim:
        return parts[0]
      # A replica left without examples at the end of an unpadded set holds a 0-row batch
      # (whose bucketed length may differ from the others').
      return np.concatenate([p for p in parts if len(p)] or parts[:1], axis=0)
    return tf.nest.map_structure(concat, per_replica)

  # ------------------------------------------------------------------ evaluate
  def evaluate(self, eval_batch_size, max_eval_steps=None, checkpoint_path=None,
               results_file=None, return_outputs=False):
    """Evaluates a checkpoint (default: output_dir's latest) over the eval data.

    Returns {"global_step", "num_examples", "loss", <aux means>, <metric results>, <the task's
    reduce_outputs metrics>}; the loss and aux values are per-example means over every
    evaluated example (absent when the eval data has no labels, as SQuAD's). With
    `return_outputs`, returns (results, the task's eval outputs). If `results_file` is given,
    also writes it in the official `key = value` format.
    """
    dataset, spec, padded = self._distributed_dataset("eval", eval_batch_size)
    if padded:
      spec = spec[:-1]
    self._ensure_built(spec)
    step = self._restore_for_inference(checkpoint_path)
    for metric in self.eval_metrics:
      metric.reset_state()
    if self._eval_fn is None:
      self._eval_fn = self._build_eval_fn(eval_batch_size)
    totals, examples, state = self._run_evaluation(dataset, max_eval_steps, padded)
    has_labels = bool(tf.nest.flatten(spec[1]))
    results = {n: v / max(examples, 1) for n, v in totals.items()} if has_labels else {}
    bad = sorted(n for n, v in results.items() if not np.isfinite(v))
    if bad:  # finite weights can still overflow: a diverged run's last checkpoint
      raise NotFiniteError(f"{self._restored_path}: evaluation gave {bad[0]} = "
                           f"{results[bad[0]]}: a diverged run's weights, not reported as a "
                           f"result; use an earlier checkpoint")
    for metric in self.eval_metrics:
      results[metric.name] = float(metric.result().numpy())
    metrics, outputs = self.task.reduce_outputs(state, "eval")
    results.update(metrics)
    results["global_step"] = step
    results["num_examples"] = examples
    writer = self._summary_writer("eval")
    with writer.as_default(step=step):
      for n, v in results.items():
        if n not in ("global_step",):
          tf.summary.scalar(n, v)
    writer.flush()
    self._log(f"eval at step {step}: " + ", ".join(
        f"{n} = {progress_lib.format_value(v)}" for n, v in sorted(results.items())
        if n != "global_step"))
    if results_file and self.is_chief:
      results_lib.write_results_file(results_file, results)
    return (results, outputs) if return_outputs else results

  def _inference_shapes(self):
    """Where eval/predict steps are traced: compiled by XLA (--xla_whole_step, a TPU), a
    model's data-dependent loops keep static shapes (early exit's, models/early_exit.py)."""
    compiled = self.xla_whole_step or self.on_tpu
    return early_exit_loop.static_shapes() if compiled else contextlib.nullcontext()

  def _build_eval_fn(self, eval_batch_size):
    """One compiled eval step: per replica, (sums of loss and aux over its examples, its example
    count, the model's outputs); `_run_evaluation` adds up this client's replicas."""
    model, task, strategy = self.model, self.task, self.strategy

    def replica_eval(features, labels, real=None):
      with self._inference_shapes():
        outputs = model(features, training=False)
      if real is not None and labels:
        # Padding rows weigh 0 in the loss and the streaming metrics.
        weights = real * tf.cast(labels.get("is_real_example", 1.0), tf.float32)
        labels = dict(labels, is_real_example=weights)
      loss, aux = task.build_losses(labels, outputs, eval_batch_size)
      task.update_metrics(self.eval_metrics, labels, outputs)
      count = (tf.shape(tf.nest.flatten(features)[0])[0] if real is None
               else tf.cast(tf.reduce_sum(real), tf.int32))
      # Undo the division by eval_batch_size: sums over examples, per replica.
      scale = tf.cast(eval_batch_size, tf.float32)
      sums = {"loss": tf.cast(loss, tf.float32) * scale}
      sums.update({n: tf.cast(a, tf.float32) * scale for n, a in (aux or {}).items()})
      return sums, count, outputs

    if self.xla_whole_step:
      replica_eval = tf.function(replica_eval, jit_compile=True, autograph=False)

    def eval_step(*element):
      return strategy.run(replica_eval, args=element)
    # reduce_retracing: bucketed batches come in a few lengths; one generic trace serves them.
    return tf.function(eval_step, jit_compile=False, reduce_retracing=True, autograph=False)

  def _run_evaluation(self, dataset, max_eval_steps, padded):
    """Runs the eval step over `dataset` (`padded`: elements end with `real`). Returns (sums,
    example count, the task's aggregated outputs state), over this client's replicas."""
    wants_outputs = type(self.task).aggregate_outputs is not Task.aggregate_outputs
    totals, examples, state = {}, 0, None
    with self._input_errors_explained("eval"):
      for i, element in enumerate(dataset):
        if max_eval_steps and i >= max_eval_steps:
          break
        sums, count, outputs = self._eval_fn(*element)
        examples += int(self._local_sum(count))
        for n, v in sums.items():
          totals[n] = totals.get(n, 0.0) + float(self._local_sum(v))
        if wants_outputs:
          batch = self._local_concat((element[0], element[1], outputs))
          if padded:  # the task sees the real examples only
            batch = eval_padding.keep_real(batch, self._local_concat(element[-1]))
          state = self.task.aggregate_outputs(state, *batch)
    return totals, examples, state

  # ------------------------------------------------------------------ predict
  def predict(self, predict_batch_size, checkpoint_path=None):
    """Yields (features, outputs) numpy dicts, one per global batch, in input order."""
    dataset, spec, padded = self._distributed_dataset("predict", predict_batch_size)
    if padded:
      spec = spec[:-1]
    self._ensure_built(spec if isinstance(spec, (tuple, list)) else (spec,))
    self._restore_for_inference(checkpoint_path)
    model, strategy = self.model, self.strategy
    if self._predict_fn is None:
      def replica_predict(features):
        with self._inference_shapes():
          return model(features, training=False)
      if self.xla_whole_step:
        replica_predict = tf.function(replica_predict, jit_compile=True, autograph=False)
      self._predict_fn = tf.function(
          lambda f: strategy.run(replica_predict, args=(f,)),
          reduce_retracing=True, autograph=False)
    with self._input_errors_explained("predict"):
      for element in dataset:
        features = element[0] if isinstance(element, (tuple, list)) else element
        outputs = self._predict_fn(features)
        batch = self._local_concat((features, outputs))
        if padded:  # exactly the real examples, in order
          batch = eval_padding.keep_real(batch, self._local_concat(element[-1]))
        for name, value in _float_items(batch[1]):
          if not np.all(np.isfinite(value)):
            raise NotFiniteError(f"{self._restored_path}: its {name} predictions hold NaN/inf: "
                                 f"a diverged run's weights; use an earlier checkpoint")
        yield batch

