"""run_pretraining.py's work: official flags -> PretrainingTask + Trainer -> train / evaluate."""

import os

from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.training import flags as common_flags
from albert_tf.training import optimizer as optimizer_lib
from albert_tf.training import pretraining_task
from albert_tf.training import trainer as trainer_lib


def _check_flags(f):
  for name in ("train_batch_size", "eval_batch_size", "num_train_steps", "max_seq_length",
               "max_predictions_per_seq", "save_checkpoints_steps"):
    if getattr(f, name) <= 0:
      raise AlbertError(f"--{name}={getattr(f, name)} is invalid: expected > 0")
  if f.masked_lm_budget < 0:
    raise AlbertError(f"--masked_lm_budget={f.masked_lm_budget} is invalid: expected >= 0 "
                      "(0: the records' own masks)")
  if f.keep_checkpoint_max < 0:
    raise AlbertError(f"--keep_checkpoint_max={f.keep_checkpoint_max} is invalid: expected >= 0")


def build_task(f):
  """The PretrainingTask the official flags describe."""
  config = AlbertConfig.from_json_file(f.albert_config_file)
  return pretraining_task.PretrainingTask(pretraining_task.PretrainingConfig(
      albert_config=config, input_file=f.input_file, max_seq_length=f.max_seq_length,
      max_predictions_per_seq=f.max_predictions_per_seq, init_checkpoint=f.init_checkpoint,
      init_from_group0=f.init_from_group0, shuffle_seed=getattr(f, "shuffle_seed", None),
      masked_lm_budget=f.masked_lm_budget))


def build_trainer(f, task, strategy):
  def optimizer_fn():
    return optimizer_lib.create_optimizer(
        f.optimizer, f.learning_rate, f.num_train_steps, f.num_warmup_steps,
        start_warmup_step=f.start_warmup_step, poly_power=f.poly_power)
  return trainer_lib.Trainer(
      task, strategy, f.output_dir, optimizer_fn=optimizer_fn if f.do_train else None,
      save_checkpoints_steps=f.save_checkpoints_steps,
      keep_checkpoint_max=f.keep_checkpoint_max or None,
      **common_flags.trainer_kwargs_from_flags(f))


def run_pretraining(f, strategy):
  """Trains and/or evaluates as the flags ask. Returns {"train": ..., "eval": ...}."""
  _check_flags(f)
  task = build_task(f)
  trainer = build_trainer(f, task, strategy)
  results = {}
  if f.do_train:
    results["train"] = trainer.train(f.num_train_steps, f.train_batch_size)
  if f.do_eval:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    if not tf.train.latest_checkpoint(f.output_dir) and not f.init_checkpoint:
      raise AlbertError(f"--do_eval: no checkpoint in --output_dir={f.output_dir} and no "
                        "--init_checkpoint to evaluate")
    result = trainer.evaluate(f.eval_batch_size, max_eval_steps=f.max_eval_steps)
    official = {k: result[k] for k in pretraining_task.OFFICIAL_EVAL_KEYS}
    if trainer.is_chief:
      trainer_lib.write_results_file(os.path.join(f.output_dir, "eval_results.txt"), official)
    for key in sorted(official):
      logging.info("  %s = %s", key, official[key])
    results["eval"] = official
  return results
