"""The one runner behind every run_* script: train -> evaluate every checkpoint -> keep the best ->
predict -> export, for any Task.

What it leaves in `output_dir`, as the official scripts do:
  * checkpoints `ckpt-<step>` (ours, resumable) and, after an evaluation sweep,
    `model.ckpt-best` (official TF1 layout: `bert/...`, the task head, `global_step`);
  * eval_results.txt: per checkpoint its `key = value` lines, the task's best line and a
    `=====` separator, then the best checkpoint, step and value; best_trial.txt
    (`<last step>:<best step>:<best value>`) and best_checkpoint.json. A task without a best
    metric (pretraining) evaluates only the latest checkpoint and writes its `key = value` lines;
  * the task's prediction files, and for `export_dir` a new TF Serving version plus
    `<export_dir>/albert_model.tflite`.
"""

import collections
import dataclasses
import os
from typing import Optional

from absl import logging
import tensorflow as tf

from albert_tf.common import cpu as cpu_lib
from albert_tf.common import fileio, kinds, output_layout
from albert_tf.checkpoints.init import restore_model_weights
from albert_tf.errors import AlbertError, NotFiniteError, StopRequested
from albert_tf.export.tflite import write_tflite
from albert_tf.training import checkpointing
from albert_tf.training import cluster
from albert_tf.training import gpu_check
from albert_tf.training import optimizer as optimizer_lib
from albert_tf.training import output_lock
from albert_tf.training import preemption
from albert_tf.training import results as results_lib
from albert_tf.training import runtime as runtime_lib
from albert_tf.training import strategy as strategy_lib
from albert_tf.training.input_distribution import check_batch_size
from albert_tf.training.strategy import worker_info
from albert_tf.training.trainer import Trainer

TFLITE_FILE = "albert_model.tflite"
OPTIMIZERS = ("adamw", "lamb")


@dataclasses.dataclass
class RunConfig:
  """What a run does and where (the official flags, by their official meaning).

  The number of training steps is `train_steps` (run_classifier/run_race --train_step,
  run_pretraining --num_train_steps), or else int(examples / train_batch_size *
  num_train_epochs) (run_squad). Warmup is `warmup_steps`, or else
  int(train steps * warmup_proportion).
  """
  output_dir: str
  do_train: bool = False
  do_eval: bool = False
  do_predict: bool = False
  train_batch_size: int = 32
  eval_batch_size: int = 8
  predict_batch_size: int = 8
  train_steps: Optional[int] = None
  num_train_epochs: Optional[float] = None
  warmup_steps: Optional[int] = None
  warmup_proportion: float = 0.0
  start_warmup_step: int = 0
  poly_power: float = 1.0
  learning_rate: float = 5e-5
  optimizer: str = "adamw"
  save_checkpoints_steps: int = 1000
  keep_checkpoint_max: Optional[int] = None  # None or 0: keep all (the evaluation sweep sees all)
  max_eval_steps: Optional[int] = None
  eval_batch_flag: str = "--eval_batch_size"  # the flag eval_batch_size came from (messages)
  export_dir: Optional[str] = None
  export_precision: str = "fp32"
  tflite_quantize: str = "none"
  tflite_batch_size: int = 1  # 0: a dynamic batch dimension

  def __post_init__(self):
    if not self.output_dir:
      raise AlbertError("--output_dir is required")
    for name in ("train_batch_size", "eval_batch_size", "predict_batch_size",
                 "save_checkpoints_steps"):
      if getattr(self, name) <= 0:
        raise AlbertError(f"--{name}={getattr(self, name)} is invalid: expected > 0")
    if self.do_train:
      if self.train_steps is None and self.num_train_epochs is None:
        raise AlbertError("training needs a number of steps or epochs")
      if self.train_steps is not None and self.train_steps <= 0:
        raise AlbertError(f"--train_step={self.train_steps} is invalid: expected > 0")
      if self.num_train_epochs is not None and self.num_train_epochs <= 0:
        raise AlbertError(f"--num_train_epochs={self.num_train_epochs} is invalid: "
                          "expected > 0")
    if not 0 <= self.warmup_proportion <= 1:
      raise AlbertError(f"--warmup_proportion={self.warmup_proportion} is invalid: "
                        "expected 0..1")
    if self.keep_checkpoint_max is not None and self.keep_checkpoint_max < 0:
      raise AlbertError(f"--keep_checkpoint_max={self.keep_checkpoint_max} is invalid: "
                        "expected >= 0")
    if self.optimizer not in OPTIMIZERS:
      raise AlbertError(f"--optimizer={self.optimizer!r} is invalid: expected one of "
                        f"{', '.join(OPTIMIZERS)}")


# ------------------------------------------------------------------------ the run
def _train_schedule(task, run):
  """(training steps, warmup steps) of the run."""
  steps = run.train_steps
  if steps is None:
    examples = task.num_train_examples()
    steps = int(examples / run.train_batch_size * run.num_train_epochs)
    if steps < 1:
      raise AlbertError(f"{examples} training examples / --train_batch_size="
                        f"{run.train_batch_size} x --num_train_epochs={run.num_train_epochs} "
                        "gives 0 training steps")
  warmup = run.warmup_steps
  if warmup is None:
    warmup = int(steps * run.warmup_proportion)
  return steps, warmup


def _make_trainer(task, run, runtime, strategy, stop_signals, train_steps=None,
                  warmup_steps=None):
  optimizer_fn = None
  if train_steps is not None:
    optimizer_fn = lambda: optimizer_lib.create_optimizer(
        run.optimizer, run.learning_rate, train_steps, warmup_steps,
        start_warmup_step=run.start_warmup_step, poly_power=run.poly_power)
  return Trainer(task, strategy, run.output_dir, optimizer_fn=optimizer_fn,
                 save_checkpoints_steps=run.save_checkpoints_steps,
                 keep_checkpoint_max=run.keep_checkpoint_max or None,
                 stop_signals=stop_signals, **runtime.trainer_kwargs())


def run(task, run_config, runtime=None):
  """Runs `task` as `run_config` asks: train, evaluate, predict, export (in that order).

  Args:
    task: an albert_tf.tasks.base.Task.
    run_config: RunConfig.
    runtime: albert_tf.training.runtime.RuntimeConfig (default: this machine, fp32).
  Returns:
    dict: task; num_train_steps and train (the trainer's summary); eval (pretraining) or
    best_checkpoint, best_result and eval_results (a sweep); predict_checkpoint and the task's
    prediction summary; export_dir and tflite.
  """
  runtime = runtime or runtime_lib.RuntimeConfig()
  cfg = run_config
  _check_bf16_can_run(cfg, runtime)
  if cfg.do_train:
    problem = cpu_lib.frozen_weights_problem(cpu_lib.onednn_enabled())
    if problem:
      raise AlbertError(f"--do_train: {problem}")
  fileio.makedirs(cfg.output_dir)
  strategy = strategy_lib.make_strategy(runtime)
  logging.info("%s", devices_line(strategy))
  gpu_check.warn_if_gpu_unused()
  _check_batch_sizes(cfg, runtime, strategy)
  if strategy_lib.num_workers(strategy) <= 1:
    return _run_locked(task, cfg, runtime, strategy)
  try:
    return _run_locked(task, cfg, runtime, strategy)
  except StopRequested as e:
    # The peers exit too: the stop line is this worker's last word (no gRPC noise after it).
    e.last_words = True
    raise
  except Exception as e:  # pylint: disable=broad-except
    lost = cluster.peer_lost(e, strategy_lib.read_tf_config(),
                             checkpointing.latest_checkpoint(cfg.output_dir))
    if lost is None:
      raise
    raise lost from None


def devices_line(strategy):
  """`devices: MirroredStrategy, 8 replicas on 8 x CPU`: what runs the steps, said once at the
  start (a GPU build that finds no GPU would otherwise train on the CPU without a word)."""
  try:
    devices = strategy.extended.worker_devices
  except RuntimeError:  # the default strategy: TensorFlow's default device
    gpus = tf.config.list_logical_devices("GPU")
    devices = [gpus[0].name if gpus else "/device:CPU:0"]
  kinds = collections.Counter(tf.DeviceSpec.from_string(device).device_type or "CPU"
                              for device in devices)
  where = ", ".join(f"{count} x {kind}" for kind, count in sorted(kinds.items()))
  replicas = strategy.num_replicas_in_sync
  name = type(strategy).__name__
  name = "no distribution strategy" if name.startswith("_Default") else name
  return f"devices: {name}, {replicas} replica{'s' * (replicas != 1)} on {where}"


def _check_batch_sizes(cfg, runtime, strategy):
  """One line before any work for a batch size the replicas cannot share evenly (TensorFlow
  would raise its own ValueError at the first eval or predict batch, or after training)."""
  replicas = strategy.num_replicas_in_sync
  for flag, size, wanted, micro in (
      ("--train_batch_size", cfg.train_batch_size, cfg.do_train,
       runtime.gradient_accumulation_steps),
      (cfg.eval_batch_flag, cfg.eval_batch_size, cfg.do_eval, 1),
      ("--predict_batch_size", cfg.predict_batch_size, cfg.do_predict, 1)):
    if wanted:
      check_batch_size(flag, size, replicas, micro)


def _check_bf16_can_run(cfg, runtime):
  """Stops before any work where a bfloat16 matmul on this CPU would crash the process (an
  ONEDNN_MAX_CPU_ISA cap below AVX-512: albert_tf/common/cpu.py), rather than after training."""
  asked = [flag for flag, wanted in (
      ("--precision=bf16", runtime.precision == "bf16"),
      ("--export_precision=bf16", bool(cfg.export_dir) and cfg.export_precision == "bf16"))
           if wanted]
  if not asked or runtime.on_tpu or tf.config.list_physical_devices("GPU"):
    return
  problem = cpu_lib.bf16_matmul_problem(cpu_lib.cpu_info(), cpu_lib.onednn_enabled())
  if problem:
    raise AlbertError(f"{asked[0]}: {problem}")


def _run_locked(task, cfg, runtime, strategy):
  # After the strategy: MultiWorkerMirroredStrategy's coordination service installs a SIGTERM
  # handler of its own, which would swallow the signal.
  with preemption.StopSignals() as stop_signals:
    with output_lock.hold(cfg.output_dir, enabled=worker_info(strategy)[2]):
      # Inside the lock: it records the run's seed in output_dir.
      seed = runtime_lib.apply_process_settings(runtime, cfg.output_dir)
      _seed_input_order(task, seed, cfg.output_dir)
      try:
        return _run_steps(task, cfg, runtime, strategy, stop_signals)
      except Exception as e:  # pylint: disable=broad-except
        if stop_signals.requested and not isinstance(e, AlbertError):
          # The signal's StopRequested came out of TensorFlow's C code as another exception
          # (seen: AttributeError '_type_spec' from nest.flatten while an export traced).
          raise stop_signals.stop_requested() from None
        raise


def _seed_input_order(task, seed, output_dir):
  """A task whose training input shuffles without a seed gets runtime.input_order_seed, so that
  a resume (or another worker) reads the order the checkpoint's batches came from."""
  params = getattr(task, "params", None)
  if params is not None and getattr(params, "shuffle_seed", 0) is None:
    params.shuffle_seed = runtime_lib.input_order_seed(seed, output_dir)


def _run_steps(task, cfg, runtime, strategy, stop_signals):
  """train -> evaluate -> predict -> export, as `cfg` asks."""
  summary = {"task": task.name}
  trainer = None
  if cfg.do_train:
    steps, warmup = _train_schedule(task, cfg)
    logging.info("***** Running training: batch %d, %d steps (%d warmup) *****",
                 cfg.train_batch_size, steps, warmup)
    trainer = _make_trainer(task, cfg, runtime, strategy, stop_signals, steps, warmup)
    if trainer.is_chief:
      _describe_output_dir(task, cfg)
    summary["train"] = trainer.train(steps, cfg.train_batch_size)
    summary["num_train_steps"] = steps
  if cfg.do_eval or cfg.do_predict:
    trainer = trainer or _make_trainer(task, cfg, runtime, strategy, stop_signals)
  if cfg.do_eval:
    if task.best_metric is None:
      summary["eval"] = _evaluate_latest(trainer, task, cfg)
    else:
      summary.update(_evaluate_every_checkpoint(trainer, task, cfg))
  if cfg.do_predict:
    summary.update(_predict(trainer, task, cfg))
  if cfg.export_dir and not worker_info(strategy)[2]:
    # Every worker would write the next version number of one export_dir: the chief alone does.
    logging.info("--export_dir: the chief exports; this worker is done")
  elif cfg.export_dir:
    # A signal here stops at the next commit, abandoning the version (preemption.deferred).
    with stop_signals.deferred():
      summary.update(_export(task, cfg))
  return summary


def _describe_output_dir(task, cfg):
  """albert_config.json and the SentencePiece model beside the run's checkpoints, so that
  from_pretrained, --init_checkpoint and the converter read them with no other flag."""
  config = getattr(task.params, "albert_config", None)
  if config is not None:
    output_layout.write_model_description(cfg.output_dir, config.to_json_string(),
                                          getattr(task.params, "spm_model_file", None))


def _reported(task, results):
  """The results an evaluation reports and writes (the task's eval_result_keys, else all)."""
  if task.eval_result_keys is None:
    return dict(results)
  return {key: results[key] for key in task.eval_result_keys}


def _evaluate_latest(trainer, task, cfg):
  """The official run_pretraining evaluation: the latest checkpoint, `key = value` lines."""
  result = _reported(task, trainer.evaluate(cfg.eval_batch_size,
                                            max_eval_steps=cfg.max_eval_steps))
  if trainer.is_chief:
    results_lib.write_results_file(
        output_layout.path(cfg.output_dir, output_layout.EVAL_RESULTS), result)
  return result


def _best_line(task, best_before, best_after):
  """The line closing a checkpoint's block in eval_results.txt, as the task's official script
  writes it (see Task.best_line)."""
  if task.best_line == "after":
    return f"best {task.best_metric} = {results_lib.format_result(best_after)}"
  return f"best = {results_lib.format_result(best_before)}"


def _evaluate_every_checkpoint(trainer, task, cfg):
  """Evaluates every checkpoint in output_dir (else a fine-tuned --init_checkpoint) and keeps the
  best by task.best_metric: eval_results.txt, best_trial.txt, best_checkpoint.json,
  model.ckpt-best and the task's outputs of the best checkpoint."""
  metric = task.best_metric
  # Else a fine-tuned --init_checkpoint (e.g. an official model.ckpt-best; it must hold the
  # head), by the one rule (an error when there is none).
  checkpoints = checkpointing.checkpoints_to_evaluate(cfg.output_dir) or [
      (None, checkpointing.checkpoint_for_inference(cfg.output_dir, task.init_checkpoint,
                                                    "--do_eval"))]
  lines, all_results = [], []
  best = None  # (value, step, path, result, task outputs)
  for step, path in checkpoints:
    try:
      result, outputs = trainer.evaluate(cfg.eval_batch_size, checkpoint_path=path,
                                         return_outputs=True)
    except NotFiniteError as e:  # a diverged run's checkpoint: never a result, never the best
      if len(checkpoints) == 1 or (path == checkpoints[-1][1] and best is None):
        raise
      logging.warning("%s; skipped", e)
      continue
    result = _reported(task, result)
    if step is not None:
      result["global_step"] = step
    if metric not in result:
      raise AlbertError(f"evaluation of {path} gave no {metric!r} (got "
                        f"{', '.join(sorted(result))})")
    before = best[0] if best else -1
    if best is None or result[metric] > best[0]:
      best = (result[metric], result.get("global_step", 0), path, result, outputs)
    lines += results_lib.result_lines(result) + [_best_line(task, before, best[0]), "=" * 50]
    all_results.append(result)
  summary = _keep_best(trainer, task, cfg, best, lines, last_step=checkpoints[-1][0])
  summary["eval_results"] = all_results
  return summary


def _keep_best(trainer, task, cfg, best, lines, last_step):
  """model.ckpt-best, eval_results.txt (the sweep's `lines` and the best), best_trial.txt,
  best_checkpoint.json and the best checkpoint's eval outputs (task.write_predictions)."""
  value, step, path, result, outputs = best
  metric = task.best_metric
  summary = {"best_checkpoint": path, "best_result": result}
  # The chief writes; the other workers (which evaluated the same set) wait until it has, since
  # --do_predict and --export_dir then read model.ckpt-best.
  if trainer.is_chief:
    checkpointing.write_best_checkpoint(trainer.model, path, cfg.output_dir, step,
                                        label_list=task.label_list)
    lines = lines + [f"best_checkpoint = {path}", f"best_step = {step}",
                     f"best_{metric} = {results_lib.format_result(value)}"]
    fileio.write_text(output_layout.path(cfg.output_dir, output_layout.EVAL_RESULTS),
                      "\n".join(lines) + "\n")
    output_layout.write_best_trial(cfg.output_dir, step if last_step is None else last_step,
                                   step, results_lib.format_result(value))
    output_layout.write_best_checkpoint_record(cfg.output_dir, path, step, metric, value,
                                               result, kind=kinds.kind_of(trainer.model))
    if outputs is not None:
      summary.update(task.write_predictions(cfg.output_dir, outputs) or {})
    logging.info("Best %s = %s at %s", metric, value, path)
  trainer.inputs.barrier()
  return summary


def _predict(trainer, task, cfg):
  # output_dir's best (else latest) checkpoint, else a fine-tuned --init_checkpoint (either
  # must hold the task head: restore_model_weights checks).
  checkpoint = checkpointing.checkpoint_for_inference(cfg.output_dir, task.init_checkpoint,
                                                      "--do_predict")
  logging.info("***** Running prediction with %s *****", checkpoint)
  state = None
  for features, outputs in trainer.predict(cfg.predict_batch_size, checkpoint_path=checkpoint):
    state = task.aggregate_outputs(state, features, None, outputs)
  _, outputs = task.reduce_outputs(state, "predict")
  # Every worker predicted the whole set (DistributedInput.evaluation); the chief writes it.
  summary = dict(task.write_predictions(cfg.output_dir, outputs) or {}) if trainer.is_chief else {}
  summary["predict_checkpoint"] = checkpoint
  return summary


def _export(task, cfg):
  checkpoint = checkpointing.checkpoint_for_inference(cfg.output_dir, task.init_checkpoint,
                                                      "--export_dir")
  model = task.build_model()
  restore_model_weights(model, checkpoint, label_list=task.label_list)
  logging.info("Exporting %s to %s", checkpoint, cfg.export_dir)
  try:
    version_dir = task.export(model, cfg.export_dir, cfg.export_precision)
  except NotFiniteError as e:
    raise NotFiniteError(f"{checkpoint}: {e}") from None
  # The TFLite file sits beside the numbered SavedModel versions (which TF Serving reads), as
  # the official v1 SQuAD export's albert_model.tflite.
  tflite = write_tflite(model, os.path.join(cfg.export_dir, TFLITE_FILE),
                        max_seq_length=task.max_seq_length, quantize=cfg.tflite_quantize,
                        batch_size=cfg.tflite_batch_size or None)
  return {"export_dir": version_dir, "tflite": tflite}
