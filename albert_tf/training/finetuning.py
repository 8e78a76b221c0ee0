"""The one fine-tuning path behind run_classifier.py and run_race.py.

train -> evaluate every checkpoint (keep all results, report the best, as the official scripts
do) -> predict with the best checkpoint -> export the best checkpoint for TF Serving.
The scripts only turn flags into a Task and a `FineTuningRun`.
"""

import dataclasses
import glob
import json
import os
import re
import time
from typing import Optional

from absl import logging
import numpy as np
import tensorflow as tf

from albert_tf.errors import AlbertError
from albert_tf.training.classification_task import ClassificationTask
from albert_tf.training.race_task import RaceTask

_CKPT_STEP = re.compile(r"-(\d+)$")


@dataclasses.dataclass
class FineTuningRun:
  """What the run_* scripts ask for (the official flags, by their official names)."""
  output_dir: str
  do_train: bool = False
  do_eval: bool = False
  do_predict: bool = False
  train_step: int = 1000
  train_batch_size: int = 32
  eval_batch_size: int = 8
  predict_batch_size: int = 8
  export_dir: Optional[str] = None
  best_metric: str = "eval_accuracy"


def list_checkpoints(output_dir):
  """[(step, prefix)] of every checkpoint in output_dir, by step (the suffix `-N`)."""
  found = {}
  for index_file in glob.glob(os.path.join(output_dir, "*.index")):
    prefix = index_file[:-len(".index")]
    match = _CKPT_STEP.search(os.path.basename(prefix))
    if match:
      found[int(match.group(1))] = prefix
  return sorted(found.items())


def _format_value(value):
  if isinstance(value, (float, np.floating)):
    return repr(float(value))
  return str(value)


def evaluate_all_checkpoints(trainer, run, results_path):
  """Evaluates every checkpoint in run.output_dir; writes all results and the best.

  eval_results.txt holds, per checkpoint, `key = value` lines then `best = <value so far>` and a
  `=====` separator (the official layout), and finally the best checkpoint's step, path and
  results. best_trial.txt is the official `<step>:<best step>:<best value>` line.
  Returns (best_checkpoint_prefix, best_result_dict, [results]).
  """
  checkpoints = list_checkpoints(run.output_dir)
  if not checkpoints:
    raise AlbertError(f"--do_eval: no checkpoint in --output_dir={run.output_dir} (train first "
                      f"with --do_train, or point --output_dir at a fine-tuned model)")
  lines, all_results = [], []
  best_value, best_step, best_path, best_result = -float("inf"), None, None, None
  for step, prefix in checkpoints:
    start = time.time()
    result = dict(trainer.evaluate(run.eval_batch_size, checkpoint_path=prefix))
    result.setdefault("global_step", step)
    if run.best_metric not in result:
      raise AlbertError(f"evaluation of {prefix} gave no {run.best_metric!r} (got "
                        f"{', '.join(sorted(result))})")
    logging.info("Eval of %s (%.1fs): %s", prefix, time.time() - start,
                 ", ".join(f"{k}={_format_value(v)}" for k, v in sorted(result.items())))
    for key in sorted(result):
      lines.append(f"{key} = {_format_value(result[key])}")
    lines.append(f"best = {_format_value(best_value if best_step is not None else -1)}")
    if result[run.best_metric] > best_value:
      best_value, best_step, best_path, best_result = result[run.best_metric], step, prefix, result
    lines.append("=" * 50)
    all_results.append(result)
  lines.append(f"best_checkpoint = {best_path}")
  lines.append(f"best_step = {best_step}")
  lines.append(f"best_{run.best_metric} = {_format_value(best_value)}")
  _write_text_atomically(results_path, "\n".join(lines) + "\n")
  _write_text_atomically(os.path.join(run.output_dir, "best_trial.txt"),
                         f"{checkpoints[-1][0]}:{best_step}:{_format_value(best_value)}")
  _write_text_atomically(os.path.join(run.output_dir, "best_checkpoint.json"),
                         json.dumps({"checkpoint": best_path, "step": best_step,
                                     "metric": run.best_metric, "value": float(best_value),
                                     "result": {k: float(v) for k, v in best_result.items()}},
                                    indent=2))
  return best_path, best_result, all_results


def best_or_latest_checkpoint(output_dir):
  """The best checkpoint recorded by an evaluation, else the latest one, else None."""
  best_file = os.path.join(output_dir, "best_checkpoint.json")
  if os.path.exists(best_file):
    with open(best_file, "r", encoding="utf-8") as f:
      path = json.load(f).get("checkpoint")
    if path and os.path.exists(path + ".index"):
      return path
  checkpoints = list_checkpoints(output_dir)
  return checkpoints[-1][1] if checkpoints else None


def predict_all(trainer, task, batch_size, checkpoint_path, mode_examples):
  """Runs prediction; returns (probabilities [N, C], predictions [N]) for exactly N examples."""
  probabilities, predictions = [], []
  for _, outputs in trainer.predict(batch_size, checkpoint_path=checkpoint_path):
    probabilities.append(np.asarray(outputs["probabilities"]))
    predictions.append(task.predictions_from_outputs(outputs))
  probabilities = np.concatenate(probabilities) if probabilities else np.zeros([0, 1])
  predictions = np.concatenate(predictions) if predictions else np.zeros([0])
  if len(predictions) != len(mode_examples):
    raise AlbertError(f"prediction returned {len(predictions)} results for "
                      f"{len(mode_examples)} test examples")
  return probabilities, predictions


def write_probabilities(path, probabilities):
  """test_results.tsv as the official: one line of tab-separated class probabilities each."""
  _write_text_atomically(path, "".join(
      "\t".join(repr(float(p)) for p in np.atleast_1d(row)) + "\n" for row in probabilities))


def restore_weights(model, checkpoint_path):
  """Loads a trainer checkpoint's model weights (optimizer state ignored) into `model`."""
  tf.train.Checkpoint(model=model).restore(checkpoint_path).expect_partial()


def _write_text_atomically(path, text):
  tmp = f"{path}.tmp-{os.getpid()}"
  with open(tmp, "w", encoding="utf-8") as f:
    f.write(text)
  os.replace(tmp, path)


# ---------------------------------------------------------------------------- flags -> run
def _check_common(flags_obj):
  if not (flags_obj.do_train or flags_obj.do_eval or flags_obj.do_predict
          or flags_obj.export_dir):
    raise AlbertError("at least one of --do_train, --do_eval, --do_predict or --export_dir "
                      "must be set")
  if getattr(flags_obj, "albert_hub_module_handle", None):
    raise AlbertError("--albert_hub_module_handle: TF1 hub modules are not supported; pass "
                      "--albert_config_file and --init_checkpoint instead")
  if not flags_obj.albert_config_file:
    raise AlbertError("--albert_config_file is required")
  for name in ("train_batch_size", "eval_batch_size", "predict_batch_size", "train_step",
               "save_checkpoints_steps"):
    if getattr(flags_obj, name) <= 0:
      raise AlbertError(f"--{name}={getattr(flags_obj, name)} is invalid: expected > 0")
  os.makedirs(flags_obj.output_dir, exist_ok=True)


def make_trainer(task, flags_obj):
  """The shared Trainer configured by the official and common flags."""
  from albert_tf.training import flags as common_flags  # pylint: disable=g-import-not-at-top
  from albert_tf.training import optimizer as optimizer_lib  # pylint: disable=g-import-not-at-top
  from albert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top
  common_flags.apply_runtime_flags(flags_obj)
  strategy = common_flags.strategy_from_flags(flags_obj)
  optimizer_fn = lambda: optimizer_lib.create_optimizer(
      flags_obj.optimizer, flags_obj.learning_rate, flags_obj.train_step,
      flags_obj.warmup_step)
  return Trainer(task, strategy, flags_obj.output_dir, optimizer_fn=optimizer_fn,
                 save_checkpoints_steps=flags_obj.save_checkpoints_steps,
                 # The official evaluation sweep sees every checkpoint (keep_checkpoint_max=0).
                 keep_checkpoint_max=None,
                 **common_flags.trainer_kwargs_from_flags(flags_obj))


def run_finetuning(task, trainer, run, write_predictions, export_fn=None):
  """train / evaluate every checkpoint / predict with the best / export the best.

  write_predictions(examples, probabilities, predictions): writes the task's prediction files.
  export_fn(model, export_dir): writes the serving SavedModel.
  Returns a dict with what was done (best checkpoint, eval results).
  """
  summary = {}
  if run.do_train:
    examples = task.examples("train")
    logging.info("***** Running training: %d examples, batch %d, %d steps *****",
                 len(examples), run.train_batch_size, run.train_step)
    summary["train"] = trainer.train(run.train_step, run.train_batch_size)
  if run.do_eval:
    logging.info("***** Running evaluation: %d examples, batch %d *****",
                 len(task.examples("eval")), run.eval_batch_size)
    best_path, best_result, _ = evaluate_all_checkpoints(
        trainer, run, os.path.join(run.output_dir, "eval_results.txt"))
    summary["best_checkpoint"], summary["best_result"] = best_path, best_result
    logging.info("Best %s = %s at %s", run.best_metric, best_result[run.best_metric], best_path)
  checkpoint = best_or_latest_checkpoint(run.output_dir)
  if run.do_predict:
    if checkpoint is None:
      raise AlbertError(f"--do_predict: no checkpoint in --output_dir={run.output_dir}")
    examples = task.examples("predict")
    logging.info("***** Running prediction: %d examples with %s *****", len(examples),
                 checkpoint)
    probabilities, predictions = predict_all(trainer, task, run.predict_batch_size, checkpoint,
                                             examples)
    write_predictions(examples, probabilities, predictions)
    summary["predictions"] = len(examples)
  if run.export_dir:
    if checkpoint is None and not getattr(task, "init_checkpoint", None):
      raise AlbertError(f"--export_dir: no checkpoint in --output_dir={run.output_dir} and no "
                        f"--init_checkpoint to export")
    model = task.build_model()
    if checkpoint is not None:
      restore_weights(model, checkpoint)
    else:
      task.initialize(model)
    export_fn(model, run.export_dir)
    summary["export_dir"] = run.export_dir
  return summary


def run_classifier_from_flags(flags_obj):
  """run_classifier.py: the official flags -> ClassificationTask -> run_finetuning."""
  from albert_tf.data import glue  # pylint: disable=g-import-not-at-top
  _check_common(flags_obj)
  task = ClassificationTask(
      flags_obj.task_name, flags_obj.data_dir, flags_obj.albert_config_file,
      max_seq_length=flags_obj.max_seq_length,
      cached_dir=flags_obj.cached_dir or flags_obj.output_dir,
      spm_model_file=flags_obj.spm_model_file, vocab_file=flags_obj.vocab_file,
      do_lower_case=flags_obj.do_lower_case, init_checkpoint=flags_obj.init_checkpoint,
      dropout_rate=flags_obj.dropout_prob)
  run = FineTuningRun(
      output_dir=flags_obj.output_dir, do_train=flags_obj.do_train, do_eval=flags_obj.do_eval,
      do_predict=flags_obj.do_predict, train_step=flags_obj.train_step,
      train_batch_size=flags_obj.train_batch_size, eval_batch_size=flags_obj.eval_batch_size,
      predict_batch_size=flags_obj.predict_batch_size, export_dir=flags_obj.export_dir,
      best_metric=task.spec.best_metric)

  def write_predictions(examples, probabilities, predictions):
    write_probabilities(os.path.join(run.output_dir, "test_results.tsv"), probabilities)
    for name in ("submit_results.tsv", task.spec.submission_file):
      glue.write_submission(os.path.join(run.output_dir, name), task.spec, examples, predictions)

  def export_fn(model, export_dir):
    from albert_tf.export import export_classifier  # pylint: disable=g-import-not-at-top
    export_classifier(model, export_dir, label_list=task.label_list,
                      max_seq_length=task.max_seq_length, spm_model_file=task.spm_model_file,
                      do_lower_case=task.do_lower_case, task_name=task.spec.name,
                      text_pair=task.spec.text_pair, precision=flags_obj.export_precision)

  return run_finetuning(task, make_trainer(task, flags_obj), run, write_predictions, export_fn)


def run_race_from_flags(flags_obj):
  """run_race.py: the official flags -> RaceTask -> run_finetuning."""
  if (flags_obj.task_name or "race").lower() != "race":
    raise AlbertError(f"--task_name={flags_obj.task_name!r} is not a known task; known tasks: "
                      f"race")
  _check_common(flags_obj)
  task = RaceTask(
      flags_obj.data_dir, flags_obj.albert_config_file, max_seq_length=flags_obj.max_seq_length,
      max_qa_length=flags_obj.max_qa_length,
      cached_dir=flags_obj.cached_dir or flags_obj.output_dir,
      spm_model_file=flags_obj.spm_model_file, vocab_file=flags_obj.vocab_file,
      do_lower_case=flags_obj.do_lower_case, init_checkpoint=flags_obj.init_checkpoint,
      dropout_rate=flags_obj.dropout_prob, high_only=flags_obj.high_only,
      middle_only=flags_obj.middle_only)
  # The official --train_file/--eval_file/--predict_file name the cached records explicitly.
  explicit = {"train": flags_obj.train_file, "eval": flags_obj.eval_file,
              "predict": flags_obj.predict_file}
  task.explicit_files.update({mode: path for mode, path in explicit.items() if path})
  run = FineTuningRun(
      output_dir=flags_obj.output_dir, do_train=flags_obj.do_train, do_eval=flags_obj.do_eval,
      do_predict=flags_obj.do_predict, train_step=flags_obj.train_step,
      train_batch_size=flags_obj.train_batch_size, eval_batch_size=flags_obj.eval_batch_size,
      predict_batch_size=flags_obj.predict_batch_size, export_dir=flags_obj.export_dir,
      best_metric="eval_accuracy")

  def write_predictions(examples, probabilities, predictions):
    from albert_tf.data import race  # pylint: disable=g-import-not-at-top
    write_probabilities(os.path.join(run.output_dir, "test_results.tsv"), probabilities)
    lines = ["id\tprediction\n"] + [f"{e.example_id}\t{race.LABELS[int(p)]}\n"
                                    for e, p in zip(examples, predictions)]
    _write_text_atomically(os.path.join(run.output_dir, "predictions.tsv"), "".join(lines))
    correct = np.array([int(p) == e.label for e, p in zip(examples, predictions)])
    # RACE test sets carry answers: report accuracy alongside the predictions.
    _write_text_atomically(os.path.join(run.output_dir, "test_accuracy.txt"),
                           f"test_accuracy = {float(correct.mean()) if correct.size else 0.0}\n")

  def export_fn(model, export_dir):
    from albert_tf.export import export_multiple_choice  # pylint: disable=g-import-not-at-top
    export_multiple_choice(model, export_dir, max_seq_length=task.max_seq_length,
                           max_qa_length=task.max_qa_length, spm_model_file=task.spm_model_file,
                           do_lower_case=task.do_lower_case,
                           precision=flags_obj.export_precision)

  return run_finetuning(task, make_trainer(task, flags_obj), run, write_predictions, export_fn)
