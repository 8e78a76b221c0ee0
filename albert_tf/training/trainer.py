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

The steps themselves are plain functions of one batch size (`albert_tf.training.steps`); the
batches reach the replicas and their results come back through
`albert_tf.training.input_distribution`. Checkpoints, resume and the input position, and which
checkpoint evaluate/predict use: `albert_tf.training.checkpointing`. A SIGTERM or
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

from albert_tf.common import fileio
from albert_tf.checkpoints import init as checkpoint_init
from albert_tf.errors import AlbertError, NotFiniteError, StopRequested
from albert_tf.networks import encoder as encoder_lib
from albert_tf.training import checkpointing
from albert_tf.training import input_distribution
from albert_tf.training import optimizer as optimizer_lib
from albert_tf.training import preemption
from albert_tf.training import progress as progress_lib
from albert_tf.training import results as results_lib
from albert_tf.training import steps as steps_lib
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
    pad_eval_batches: pad eval/predict batches to the full batch (`input_distribution`), the
      padding rows masked out of every result; always on with `on_tpu`.
    on_tpu: the run is on a TPU (`runtime.on_tpu`); None: `strategy.is_tpu_strategy`.
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
    self.on_tpu = bool(on_tpu) or strategy_lib.is_tpu_strategy(self.strategy)
    self.xla_whole_step = bool(xla_whole_step)
    self.pad_eval_batches = bool(pad_eval_batches) or self.on_tpu
    if (self.xla_whole_step and self.strategy.num_replicas_in_sync > 1 and not self.on_tpu
        and not tf.config.list_logical_devices("GPU")):
      raise AlbertError(f"--xla_whole_step: XLA has no CPU kernel for the cross-replica sum of "
                        f"{self.strategy.num_replicas_in_sync} replicas: compile the whole step "
                        "on one CPU replica (--strategy=default), or on GPUs or a TPU")
    if precision == "bf16" and (jit_compile or xla_whole_step) and not (
        tf.config.list_logical_devices("GPU") or self.on_tpu):
      # Measured (bench/speed/precision.py): XLA's CPU compiler turns bfloat16 dots into float32 dots
      # plus conversions.
      logging.warning("--precision=bf16 with --jit_compile on a CPU runs bfloat16 matmuls as "
                      "float32 plus conversions (2.4x slower than fp32 in bench/speed/precision.py): "
                      "drop --jit_compile")
    self.output_dir = output_dir
    self.precision = precision
    self.accumulation_steps = int(gradient_accumulation_steps)
    self.step_options = steps_lib.StepOptions(self.accumulation_steps, clip_norm,
                                              bool(jit_compile), self.xla_whole_step,
                                              self.on_tpu)
    self.save_checkpoints_steps = int(save_checkpoints_steps or 0)
    self.keep_checkpoint_max = keep_checkpoint_max or None
    self.log_every_n_steps = max(1, int(log_every_n_steps or 1))
    self.steps_per_loop = max(1, int(steps_per_loop or self.log_every_n_steps))
    self.stop_signals = stop_signals or preemption.StopSignals()
    _, self.worker_id, self.is_chief = strategy_lib.worker_info(self.strategy)
    # Training, eval and predict batches for the replicas, and their results gathered back.
    self.inputs = input_distribution.DistributedInput(self.strategy, task, self.pad_eval_batches)
    self.num_workers = self.inputs.num_workers

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
    self._aux_keys = []
    # The compiled steps, one per batch size (the loss divides by it: a second train() or
    # evaluate() with another batch size must not reuse the first one's).
    self._train_loops, self._eval_steps, self._predict_step = {}, {}, None
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

  @property
  def stop_read_in_graph(self):
    """Whether the train loop reads the stop flag inside the step. A TPU loop cannot read a
    host variable: there (and in a whole step compiled as on a TPU) the trainer checks between
    loop calls. With the flag read in the loop, only the loop's (all-reduced) answer may stop a
    worker: a worker that stopped on its own between loop calls would leave the others waiting
    in the next step's collective."""
    return not self.on_tpu and not self.xla_whole_step

  def build(self, element_spec):
    """Creates the model's (and optimizer's) variables eagerly for batches of `element_spec`
    ((features, labels) specs), so checkpoints restore at once and no variable is created inside
    a traced step. Only the first call builds."""
    if not self._built:
      self._aux_keys = steps_lib.build_variables(self.model, self.task, self.optimizer,
                                                 self.strategy, element_spec)
    self._built = True

  def checkpoint(self):
    """tf.train.Checkpoint of the model, the optimizer (when training) and the global step."""
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

  # ------------------------------------------------------------------ train
  def train_loop(self, global_batch_size):
    """The compiled loop `loop(iterator, num_steps)` for this global batch size
    (`steps.train_loop`; built once per size, reading the stop flag per `stop_read_in_graph`).
    Call `build` first."""
    if global_batch_size not in self._train_loops:
      stop_flag = self.stop_signals.make_stop_flag() if self.stop_read_in_graph else None
      self._train_loops[global_batch_size] = steps_lib.train_loop(
          self.model, self.task, self.optimizer, self.strategy, self.train_metrics,
          global_batch_size, self.step_options, self._aux_keys, stop_flag)
    return self._train_loops[global_batch_size]

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
    fileio.makedirs(self.output_dir)
    dataset, element_spec = self.inputs.training(train_batch_size)
    self.build(element_spec)
    saves = checkpointing.TrainingCheckpoints(
        self.output_dir, self.checkpoint(),
        # What a saved input position is only valid for: the batches' shapes and the workers.
        input_signature={"train_batch_size": int(train_batch_size),
                         "num_workers": int(self.num_workers),
                         "batch_shapes": checkpointing.batch_shapes(element_spec)},
        worker_id=self.worker_id, is_chief=self.is_chief,
        keep_checkpoint_max=self.keep_checkpoint_max, barrier=self.inputs.barrier, log=self._log)
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
      dataset, _ = self.inputs.training(train_batch_size, skip=saves.input_batches_to_skip)
    iterator = iter(dataset)
    signals = self.stop_signals
    train_loop = self.train_loop(train_batch_size)
    progress = progress_lib.TrainingProgress(num_train_steps, train_batch_size, self.global_step,
                                             self._log, self._summary_writer("train"))
    with signals.training():
      step = self.global_step
      while step < num_train_steps:
        with self.inputs.errors_explained("train"):
          loss_sum, aux_sum, steps_run, bad_step, stopped = train_loop(
              iterator, tf.constant(self._steps_to_next_event(step, num_train_steps)))
        if int(bad_step) >= 0:
          raise NonFiniteLossError(f"non-finite loss at step {int(bad_step)}; stopped; "
                                   f"{saves.diverged(int(bad_step))}")
        step = self.global_step
        progress.add(loss_sum, aux_sum, steps_run)
        stopping = bool(stopped) or (signals.requested and not self.stop_read_in_graph)
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
      self.inputs.barrier()
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
    input_distribution.check_batch_size("--train_batch_size", train_batch_size,
                                        self.strategy.num_replicas_in_sync,
                                        self.accumulation_steps)

  def _save_and_stop(self, saves, step, num_train_steps):
    """After a SIGTERM/SIGINT: saves step `step` (unless saved already) and raises StopRequested."""
    started = time.time()
    prefix = saves.last_saved
    if not (prefix and prefix.endswith(f"ckpt-{step}")):
      prefix = saves.save(step)
    raise StopRequested(self.stop_signals.stopped_message(
        f"step {step}/{num_train_steps} saved to {prefix} (weights, optimizer and input "
        f"position; {time.time() - started:.1f} s)"))

  # ------------------------------------------------------------------ eval/predict
  def _restore_for_inference(self, checkpoint_path, flag, prefer_best):
    """Loads every weight of the checkpoint `checkpointing.checkpoint_for_inference` chooses
    (`checkpoint_path`, else output_dir's, else --init_checkpoint). Returns its step."""
    path = checkpointing.checkpoint_for_inference(
        self.output_dir, self.task.init_checkpoint, flag, checkpoint_path, prefer_best)
    self._restored_path = path
    if checkpoint_path is None and path == self.task.init_checkpoint and not self.task.fine_tunes:
      # A pretraining run's starting point, loaded as training loads it (vocabulary check,
      # TF-Hub modules, --init_from_group0).
      self.task.initialize(self.model)
      return self.global_step
    # Every weight must come from the checkpoint (ours, an official TF1 one or an HF
    # directory, whose head rows follow the task's classes): a head left at its random
    # initial value would evaluate, predict and export garbage without a word.
    step = checkpoint_init.restore_model_weights(
        self.model, path, label_list=self.task.label_list) or 0
    if self.optimizer is None:
      self._eval_step_counter.assign(step)
    return step

  def eval_step(self, eval_batch_size):
    """The compiled eval step for this global batch size (`steps.eval_step`; one per size)."""
    if eval_batch_size not in self._eval_steps:
      self._eval_steps[eval_batch_size] = steps_lib.eval_step(
          self.model, self.task, self.strategy, self.eval_metrics, eval_batch_size,
          self.step_options)
    return self._eval_steps[eval_batch_size]

  def predict_step(self):
    """The compiled predict step (`steps.predict_step`; no batch size in it)."""
    if self._predict_step is None:
      self._predict_step = steps_lib.predict_step(self.model, self.strategy, self.step_options)
    return self._predict_step

  def evaluate(self, eval_batch_size, max_eval_steps=None, checkpoint_path=None,
               results_file=None, return_outputs=False):
    """Evaluates a checkpoint over the eval data: `checkpoint_path`, else output_dir's latest
    (as the official run_pretraining), else --init_checkpoint (`checkpointing`'s one rule).

    Returns {"global_step", "num_examples", "loss", <aux means>, <metric results>, <the task's
    reduce_outputs metrics>}; the loss and aux values are per-example means over every
    evaluated example (absent when the eval data has no labels, as SQuAD's). With
    `return_outputs`, returns (results, the task's eval outputs). If `results_file` is given,
    also writes it in the official `key = value` format.
    """
    dataset, spec, padded = self.inputs.evaluation("eval", eval_batch_size)
    if padded:
      spec = spec[:-1]
    self.build(spec)
    step = self._restore_for_inference(checkpoint_path, "--do_eval", prefer_best=False)
    for metric in self.eval_metrics:
      metric.reset_state()
    totals, examples, state = self.inputs.run_eval_steps(
        self.eval_step(eval_batch_size), dataset, padded, max_eval_steps)
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

  # ------------------------------------------------------------------ predict
  def predict(self, predict_batch_size, checkpoint_path=None):
    """Yields (features, outputs) numpy dicts, one per global batch, in input order, of
    `checkpoint_path`, else output_dir's model.ckpt-best, else its latest, else --init_checkpoint
    (`checkpointing.checkpoint_for_inference`)."""
    dataset, spec, padded = self.inputs.evaluation("predict", predict_batch_size)
    if padded:
      spec = spec[:-1]
    self.build(spec if isinstance(spec, (tuple, list)) else (spec,))
    self._restore_for_inference(checkpoint_path, "--do_predict", prefer_best=True)
    predict_step = self.predict_step()
    with self.inputs.errors_explained("predict"):
      for element in dataset:
        features = element[0] if isinstance(element, (tuple, list)) else element
        outputs = predict_step(features)
        batch = self.inputs.local_concat((features, outputs))
        if padded:  # exactly the real examples, in order
          batch = input_distribution.keep_real(batch, self.inputs.local_concat(element[-1]))
        for name, value in _float_items(batch[1]):
          if not np.all(np.isfinite(value)):
            raise NotFiniteError(f"{self._restored_path}: its {name} predictions hold NaN/inf: "
                                 f"a diverged run's weights; use an earlier checkpoint")
        yield batch

