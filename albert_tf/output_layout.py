"""The layout of a run's --output_dir: every file name in it, defined once, with the readers and
writers of the small record files beside them.

  <output_dir>/checkpoint, ckpt-<step>.*         our TF2 checkpoints (CHECKPOINT_PREFIX) and the
                                                 `checkpoint` state file (CHECKPOINT_STATE)
  <output_dir>/train_input_state/worker_<i>/     the input pipeline's position (INPUT_STATE_DIR),
      input_signature.json                       and what that position belongs to
  <output_dir>/run_seed.json                     the run's seed (SEED_FILE)
  <output_dir>/albert_tf.lock                    one writer at a time (LOCK_FILE)
  <output_dir>/eval_results.txt                  `key = value` lines (EVAL_RESULTS)
  <output_dir>/model.ckpt-best                   the sweep's best, official TF1 layout
  <output_dir>/best_checkpoint.json              which checkpoint that was, and its result
  <output_dir>/best_trial.txt                    `<last step>:<best step>:<best value>`
  <output_dir>/label_list.json                   a custom task's classes (LABEL_LIST)
  <output_dir>/test_results.tsv, predictions.tsv, predict_results.txt   predictions
  <export_dir>/<version>/saved_model.pb          exports (albert_tf/export/, a directory of
                                                 their own: --export_dir)

A leaf module (os and albert_tf.fileio only), so that the training loop, the tasks, the data
readers and the top-level loader all name these files from here.
"""

import os

from albert_tf import fileio

CHECKPOINT_PREFIX = "ckpt"
CHECKPOINT_STATE = "checkpoint"
INPUT_STATE_DIR = "train_input_state"
INPUT_SIGNATURE = "input_signature.json"
SEED_FILE = "run_seed.json"
LOCK_FILE = "albert_tf.lock"
EVAL_RESULTS = "eval_results.txt"
BEST_CHECKPOINT = "model.ckpt-best"
BEST_CHECKPOINT_JSON = "best_checkpoint.json"
BEST_TRIAL = "best_trial.txt"
LABEL_LIST = "label_list.json"
TEST_RESULTS = "test_results.tsv"
PREDICTIONS = "predictions.tsv"
PREDICT_RESULTS = "predict_results.txt"


def path(output_dir, name):
  """`<output_dir>/<name>` for one of the names above."""
  return os.path.join(output_dir, name)


def write_best_trial(output_dir, last_step, best_step, value_text):
  """best_trial.txt: `<last step evaluated>:<best step>:<best value>` (value as written in
  eval_results.txt)."""
  return fileio.write_text(path(output_dir, BEST_TRIAL), f"{last_step}:{best_step}:{value_text}")


def read_best_trial_value(output_dir):
  """The best dev value best_trial.txt records, else None (no such file)."""
  best_trial = path(output_dir, BEST_TRIAL)
  if not os.path.exists(best_trial):
    return None
  with open(best_trial, "r", encoding="utf-8") as f:
    return float(f.read().strip().split(":")[-1])


def write_best_checkpoint_record(output_dir, checkpoint, step, metric, value, result):
  """best_checkpoint.json: the best checkpoint of a sweep, its step, metric and result."""
  return fileio.write_json(path(output_dir, BEST_CHECKPOINT_JSON),
                           {"checkpoint": checkpoint, "step": step, "metric": metric,
                            "value": float(value),
                            "result": {k: float(v) for k, v in result.items()}}, indent=2)
