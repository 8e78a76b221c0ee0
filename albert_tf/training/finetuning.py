"""The one fine-tuning path behind run_classifier.py and run_race.py.

train -> evaluate every checkpoint (keep all results, report the best, as the official scripts
do) -> predict with the best checkpoint -> export the best checkpoint for TF Serving.
The scripts only turn flags into a Task and a `FineTuningRun`.
"""

import dataclasses
import glob
import json
import math
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
  tflite_quantize: str = "none"  # the albert_model.tflite written beside the SavedModel versions


def list_checkpoints(output_dir):
  """[(step, prefix)] of every checkpoint in output_dir, by step (the suffix `-N`)."""
  found = {}
  for index_file in glob.glob(os.path.join(output_dir, "*.index")):
    prefix = index_file[:-len(".index")]
    match = _CKPT_STEP.search(os.path.basename(prefix))
    if match:
      found[int(match.group(1))] = prefix
  return sorted(found.items())


def checkpoints_to_evaluate(output_dir):
  """[(step, prefix)]: every numbered checkpoint, or else an official run's lone model.ckpt-best.

  (The official scripts delete the checkpoints that lost, so a finished official output_dir may
  hold only `model.ckpt-best`.)
  """
  checkpoints = list_checkpoints(output_dir)
  best = os.path.join(output_dir, BEST_CHECKPOINT)
  if not checkpoints and tf.io.gfile.exists(best + ".index"):
    from albert_tf.checkpoints.init import checkpoint_global_step  # pylint: disable=g-import-not-at-top
    checkpoints = [(checkpoint_global_step(best) or 0, best)]
  return checkpoints


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
  checkpoints = checkpoints_to_evaluate(run.output_dir)
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
    logging.debug("Eval of %s (%.1fs): %s", prefix, time.time() - start,
                 ", ".join(f"{k}={_format_value(v)}" for k, v in sorted(result.items())))
    for key in sorted(result):
      lines.append(f"{key} = {_format_value(result[key])}")
    lines.append(f"best = {_format_value(best_value if best_step is not None else -1)}")
    if result[run.best_metric] > best_value:
      best_value, best_step, best_path, best_result = result[run.best_metric], step, prefix, result
    lines.append("=" * 50)
    all_results.append(result)
  write_best_checkpoint(trainer.model, best_path, run.output_dir, best_step)
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


BEST_CHECKPOINT = "model.ckpt-best"


def write_best_checkpoint(model, best_path, output_dir, best_step):
  """Writes `<output_dir>/model.ckpt-best` in the official TF1 layout, as the official scripts do.

  The official run_classifier / run_race / run_squad leave the best checkpoint of their
  evaluation sweep there; official recipes continue from it (`--init_checkpoint`) and the
  official export tools read it. Ours holds the same names (`bert/...`, the task head,
  `global_step`); the `checkpoint` state file keeps pointing at the training run's latest.
  """
  from albert_tf.checkpoints import save_tf1_checkpoint  # pylint: disable=g-import-not-at-top
  from albert_tf.checkpoints.init import restore_model_weights  # pylint: disable=g-import-not-at-top
  restore_model_weights(model, best_path)
  target = os.path.join(output_dir, BEST_CHECKPOINT)
  if os.path.abspath(best_path) != os.path.abspath(target):
    save_tf1_checkpoint(model, target, global_step=best_step, update_state=False)
  return target


def best_or_latest_checkpoint(output_dir):
  """`model.ckpt-best` (ours or the official scripts'), else the latest checkpoint, else None."""
  best = os.path.join(output_dir, BEST_CHECKPOINT)
  if tf.io.gfile.exists(best + ".index"):
    return best
  checkpoints = list_checkpoints(output_dir)
  return checkpoints[-1][1] if checkpoints else None


TFLITE_FILE = "albert_model.tflite"


def write_tflite_file(model, export_dir, max_seq_length, quantize="none"):
  """`<export_dir>/albert_model.tflite` (token ids in, batch 1), as the official v1 SQuAD export.

  It sits beside the numbered SavedModel versions, which TF Serving reads; it is not one of them.
  """
  from albert_tf.export.tflite import write_tflite  # pylint: disable=g-import-not-at-top
  return write_tflite(model, os.path.join(export_dir, TFLITE_FILE),
                      max_seq_length=max_seq_length, quantize=quantize)


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




def _read_best_value(output_dir):
  """The best dev value best_trial.txt records (`<step>:<best step>:<value>`), else None."""
  path = os.path.join(output_dir, "best_trial.txt")
  if not os.path.exists(path):
    return None
  with open(path, "r", encoding="utf-8") as f:
    return float(f.read().strip().split(":")[-1])


def _write_text_atomically(path, text):
  tmp = f"{path}.tmp-{os.getpid()}"
  with open(tmp, "w", encoding="utf-8") as f:
    f.write(text)
  os.replace(tmp, path)


# ---------------------------------------------------------------------------- flags -> run
def _check_common(flags_obj):
  """Validates the shared official flags; returns the ModelSource they name."""
  if not (flags_obj.do_train or flags_obj.do_eval or flags_obj.do_predict
          or flags_obj.export_dir):
    raise AlbertError("at least one of --do_train, --do_eval, --do_predict or --export_dir "
                      "must be set")
  for name in ("train_batch_size", "eval_batch_size", "predict_batch_size", "train_step",
               "save_checkpoints_steps"):
    if getattr(flags_obj, name) <= 0:
      raise AlbertError(f"--{name}={getattr(flags_obj, name)} is invalid: expected > 0")
  os.makedirs(flags_obj.output_dir, exist_ok=True)
  from albert_tf.checkpoints.model_source import resolve_model_source  # pylint: disable=g-import-not-at-top
  return resolve_model_source(
      albert_config_file=flags_obj.albert_config_file, init_checkpoint=flags_obj.init_checkpoint,
      hub_module_handle=flags_obj.albert_hub_module_handle,
      spm_model_file=flags_obj.spm_model_file, do_lower_case=flags_obj.do_lower_case)


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
    # The fine-tuned model: output_dir's best (else latest) checkpoint, or else a fine-tuned
    # --init_checkpoint. Either must hold the task head too (restore_model_weights checks).
    source = checkpoint or task.init_checkpoint
    if source is None:
      raise AlbertError(f"--export_dir: no checkpoint in --output_dir={run.output_dir} and no "
                        f"--init_checkpoint to export")
    from albert_tf.checkpoints.init import restore_model_weights  # pylint: disable=g-import-not-at-top
    model = task.build_model()
    restore_model_weights(model, source)
    summary["export_dir"] = export_fn(model, run.export_dir)
    summary["tflite"] = write_tflite_file(model, run.export_dir, task.max_seq_length,
                                          run.tflite_quantize)
  return summary


def run_classifier_from_flags(flags_obj):
  """run_classifier.py: the official flags -> ClassificationTask -> run_finetuning."""
  from albert_tf.data import glue  # pylint: disable=g-import-not-at-top
  glue.get_task(flags_obj.task_name)  # an unknown task is the first thing to report
  source = _check_common(flags_obj)
  task = ClassificationTask(
      flags_obj.task_name, flags_obj.data_dir, source.config,
      max_seq_length=flags_obj.max_seq_length,
      cached_dir=flags_obj.cached_dir or flags_obj.output_dir,
      spm_model_file=source.spm_model_file, vocab_file=flags_obj.vocab_file,
      do_lower_case=source.do_lower_case, init_checkpoint=source.init_checkpoint,
      dropout_rate=flags_obj.dropout_prob)
  run = FineTuningRun(
      output_dir=flags_obj.output_dir, do_train=flags_obj.do_train, do_eval=flags_obj.do_eval,
      do_predict=flags_obj.do_predict, train_step=flags_obj.train_step,
      train_batch_size=flags_obj.train_batch_size, eval_batch_size=flags_obj.eval_batch_size,
      predict_batch_size=flags_obj.predict_batch_size, export_dir=flags_obj.export_dir,
      best_metric=task.spec.best_metric, tflite_quantize=flags_obj.tflite_quantize)

  def write_predictions(examples, probabilities, predictions):
    write_probabilities(os.path.join(run.output_dir, "test_results.tsv"), probabilities)
    for name in ("submit_results.tsv", task.spec.submission_file):
      glue.write_submission(os.path.join(run.output_dir, name), task.spec, examples, predictions)

  threshold = getattr(flags_obj, "threshold_to_export", float("nan"))

  def export_fn(model, export_dir):
    from albert_tf.export import export_classifier  # pylint: disable=g-import-not-at-top
    return export_classifier(model, export_dir, label_list=task.label_list,
                             max_seq_length=task.max_seq_length,
                             spm_model_file=task.spm_model_file,
                             do_lower_case=task.do_lower_case, task_name=task.spec.name,
                             text_pair=task.spec.text_pair,
                             precision=flags_obj.export_precision,
                             threshold=None if math.isnan(threshold) else threshold)

  return run_finetuning(task, make_trainer(task, flags_obj), run, write_predictions, export_fn)


def run_race_from_flags(flags_obj):
  """run_race.py: the official flags -> RaceTask -> run_finetuning."""
  if (flags_obj.task_name or "race").lower() != "race":
    raise AlbertError(f"--task_name={flags_obj.task_name!r} is not a known task; known tasks: "
                      f"race")
  source = _check_common(flags_obj)
  task = RaceTask(
      flags_obj.data_dir, source.config, max_seq_length=flags_obj.max_seq_length,
      max_qa_length=flags_obj.max_qa_length,
      cached_dir=flags_obj.cached_dir or flags_obj.output_dir,
      spm_model_file=source.spm_model_file, vocab_file=flags_obj.vocab_file,
      do_lower_case=source.do_lower_case, init_checkpoint=source.init_checkpoint,
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
      best_metric="eval_accuracy", tflite_quantize=flags_obj.tflite_quantize)

  def write_predictions(examples, probabilities, predictions):
    from albert_tf.data import race  # pylint: disable=g-import-not-at-top
    write_probabilities(os.path.join(run.output_dir, "test_results.tsv"), probabilities)
    lines = ["id\tprediction\n"] + [f"{e.example_id}\t{race.LABELS[int(p)]}\n"
                                    for e, p in zip(examples, predictions)]
    _write_text_atomically(os.path.join(run.output_dir, "predictions.tsv"), "".join(lines))
    # RACE test sets carry answers: the official run_race evaluates the test set with
    # model.ckpt-best into predict_results.txt (its eval keys, then the best dev value).
    labels = np.array([e.label for e in examples])
    correct = np.asarray(predictions).astype(int) == labels
    losses = -np.log(np.maximum(probabilities[np.arange(len(labels)), labels], 1e-30))
    results = {"eval_accuracy": float(correct.mean()) if correct.size else 0.0,
               "eval_loss": float(losses.mean()) if losses.size else 0.0}
    best = _read_best_value(run.output_dir)
    _write_text_atomically(os.path.join(run.output_dir, "predict_results.txt"), "".join(
        ["***** Predict results *****\n"] + [f"{k} = {v!r}\n" for k, v in sorted(results.items())]
        + [f"best = {best!r}\n" if best is not None else ""]))

  def export_fn(model, export_dir):
    from albert_tf.export import export_multiple_choice  # pylint: disable=g-import-not-at-top
    return export_multiple_choice(model, export_dir, max_seq_length=task.max_seq_length,
                                  max_qa_length=task.max_qa_length,
                                  spm_model_file=task.spm_model_file,
                                  do_lower_case=task.do_lower_case,
                                  precision=flags_obj.export_precision)

  return run_finetuning(task, make_trainer(task, flags_obj), run, write_predictions, export_fn)
