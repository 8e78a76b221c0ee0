"""The layout of a run's --output_dir: every file name in it, defined once, with the readers and
writers of the small record files beside them.

  <output_dir>/checkpoint, ckpt-<step>.*         our TF2 checkpoints (CHECKPOINT_PREFIX) and the
                                                 `checkpoint` state file (CHECKPOINT_STATE)
  <output_dir>/train_input_state/worker_<i>/     the input pipeline's position (INPUT_STATE_DIR),
      input_signature.json                       and what that position belongs to
  <output_dir>/run_seed.json                     the run's seed (SEED_FILE)
  <output_dir>/albert_config.json, 30k-clean.model   the model's config and SentencePiece model
                                                 (ALBERT_CONFIG, SPM_MODEL): written by training
                                                 runs, so the directory loads with no other flag
  <output_dir>/albert_tf.lock                    one writer at a time (LOCK_FILE)
  <output_dir>/eval_results.txt                  `key = value` lines (EVAL_RESULTS)
  <output_dir>/model.ckpt-best                   the sweep's best, official TF1 layout
  <output_dir>/best_checkpoint.json              which checkpoint that was, and its result
  <output_dir>/best_trial.txt                    `<last step>:<best step>:<best value>`
  <output_dir>/label_list.json                   a custom task's classes (LABEL_LIST)
  <output_dir>/tag_list.json                     run_ner.py's tags and scheme (TAG_LIST)
  <output_dir>/test_results.tsv, predictions.tsv, predict_results.txt   predictions
  <output_dir>/exit_layers.tsv                   early exit, GLUE: each answer's layer (EXIT_LAYERS)
  <export_dir>/<version>/saved_model.pb          exports (albert_tf/export/, a directory of
                                                 their own: --export_dir)

A leaf module (os and albert_tf.common.fileio only), so that the training loop, the tasks, the data
readers and the top-level loader all name these files from here.
"""

import os

from albert_tf.common import fileio

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
TAG_LIST = "tag_list.json"  # run_ner.py: the tags in the head's order and their scheme
ALBERT_CONFIG = "albert_config.json"  # as beside the official tarballs' checkpoints
SPM_MODEL = "30k-clean.model"  # the official tarballs' name for the SentencePiece model
TEST_RESULTS = "test_results.tsv"
PREDICTIONS = "predictions.tsv"
PREDICT_RESULTS = "predict_results.txt"
EXIT_LAYERS = "exit_layers.tsv"  # early exit on a GLUE task: each test example's exit layer


def path(output_dir, name):
  """`<output_dir>/<name>` for one of the names above."""
  return os.path.join(output_dir, name)


def write_model_description(output_dir, config_json, spm_model_file=None):
  """ALBERT_CONFIG (the config's JSON text) and a copy of the SentencePiece model as SPM_MODEL in
  output_dir, replacing older ones; nothing is copied onto itself. Returns the paths written."""
  written = [fileio.write_text(path(output_dir, ALBERT_CONFIG), config_json)]
  target = path(output_dir, SPM_MODEL)
  if spm_model_file and fileio.abspath(spm_model_file) != fileio.abspath(target):
    written.append(fileio.write_bytes(target, fileio.read_bytes(spm_model_file)))
  return written


def write_best_trial(output_dir, last_step, best_step, value_text):
  """best_trial.txt: `<last step evaluated>:<best step>:<best value>` (value as written in
  eval_results.txt)."""
  return fileio.write_text(path(output_dir, BEST_TRIAL), f"{last_step}:{best_step}:{value_text}")


def read_best_trial_value(output_dir):
  """The best dev value best_trial.txt records, else None (no such file)."""
  best_trial = path(output_dir, BEST_TRIAL)
  if not fileio.exists(best_trial):
    return None
  return float(fileio.read_text(best_trial).strip().split(":")[-1])


def write_best_checkpoint_record(output_dir, checkpoint, step, metric=None, value=None,
                                 result=None, kind=None):
  """best_checkpoint.json: the best checkpoint of a sweep, its step, metric and result, and the
  model's kind (albert_tf.common.kinds: the official one-row head of model.ckpt-best does not say
  whether it is a regression classifier or a multiple-choice scorer). A checkpoint saved without
  an evaluation (a notebook's save_checkpoint) has no metric, value or result."""
  record = {"checkpoint": checkpoint, "step": step}
  if metric is not None:
    record.update(metric=metric, value=float(value),
                  result={k: float(v) for k, v in result.items()})
  if kind:
    record["kind"] = kind
  return fileio.write_json(path(output_dir, BEST_CHECKPOINT_JSON), record, indent=2)


def read_best_checkpoint_kind(output_dir):
  """The model kind best_checkpoint.json records, else None (no file, an older one, unreadable:
  the kind is then read from the checkpoint's names alone)."""
  try:
    record = fileio.read_json(path(output_dir, BEST_CHECKPOINT_JSON))
  except (OSError, ValueError):
    return None
  kind = record.get("kind") if isinstance(record, dict) else None
  return kind if isinstance(kind, str) else None
