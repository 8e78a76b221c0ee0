"""SQuAD v1.1 / v2.0 fine-tuning as a Task, and the run_squad.py flow around the shared Trainer.

The flow (official run_squad_v1.py / run_squad_v2.py):
  train: read --train_file, shuffle examples (seed 12345), build or reuse --train_feature_file,
    train for int(num_examples / train_batch_size * num_train_epochs) steps with AdamW and
    warmup_proportion warmup.
  predict: build or reuse --predict_feature_file + --predict_feature_left_file, then evaluate
    every checkpoint in --output_dir with the official metric, keep the best F1 (eval_results.txt),
    and write the best checkpoint's predictions.json, nbest_predictions.json (v2: null_odds.json).
  export: --export_dir gets the best (else latest) checkpoint as a SavedModel (SquadServing).
"""

import dataclasses
import os
import random
import time
from typing import Optional

from absl import logging
import numpy as np
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.data import squad
from albert_tf.data import squad_postprocess
from albert_tf.errors import AlbertError
from albert_tf.training.task import Task

# Examples are shuffled once before conversion with this seed, as the official scripts do.
EXAMPLE_SHUFFLE_SEED = 12345
_ENCODER_FEATURES = ("input_ids", "input_mask", "segment_ids", "p_mask")
_LABELS = ("start_positions", "end_positions", "is_impossible")


def _cross_entropy(log_probs, positions):
  """float32 [batch]: -log_probs[b, positions[b]]."""
  positions = tf.reshape(tf.cast(positions, tf.int32), [-1, 1])
  return -tf.gather(log_probs, positions, batch_dims=1)[:, 0]


def squad_per_example_losses(labels, outputs, version_2_with_negative):
  """The official SQuAD losses per example (float32 [batch] each).

  v1.1: start/end cross-entropy of the (unmasked) logits. v2.0: of the masked log-probs, and
  the answerability sigmoid cross-entropy of cls_logits against is_impossible.
  Returns a dict start_loss, end_loss (and v2 cls_loss) and total =
  (start + end) / 2 (+ 0.5 * cls for v2).
  """
  if version_2_with_negative:
    start_log_probs = outputs["start_log_probs"]
    end_log_probs = outputs["end_log_probs"]
  else:
    start_log_probs = tf.nn.log_softmax(outputs["start_logits"], axis=-1)
    end_log_probs = tf.nn.log_softmax(outputs["end_logits"], axis=-1)
  losses = {"start_loss": _cross_entropy(start_log_probs, labels["start_positions"]),
            "end_loss": _cross_entropy(end_log_probs, labels["end_positions"])}
  losses["total"] = (losses["start_loss"] + losses["end_loss"]) * 0.5
  if version_2_with_negative:
    is_impossible = tf.cast(tf.reshape(labels["is_impossible"], [-1]), tf.float32)
    losses["cls_loss"] = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=is_impossible, logits=outputs["cls_logits"])
    losses["total"] += 0.5 * losses["cls_loss"]
  return losses


class SquadTask(Task):
  """SQuAD span extraction from the official feature TFRecords.

  Features fed to the model: input_ids, input_mask, segment_ids, p_mask, unique_ids (and, to
  train the v2 head, start_positions). Labels: start_positions, end_positions, is_impossible.
  """

  def __init__(self, albert_config, version_2_with_negative=False, max_seq_length=384,
               train_feature_file=None, predict_feature_file=None, start_n_top=5, end_n_top=5,
               dropout_prob=0.1, init_checkpoint=None, shuffle_seed=None):
    if isinstance(albert_config, str):
      albert_config = AlbertConfig.from_json_file(albert_config)
    if max_seq_length > albert_config.max_position_embeddings:
      raise AlbertError(f"--max_seq_length={max_seq_length} exceeds the model's "
                        f"max_position_embeddings={albert_config.max_position_embeddings}")
    self.albert_config = albert_config
    self.version_2_with_negative = bool(version_2_with_negative)
    self.name = "squad/v2.0" if self.version_2_with_negative else "squad/v1.1"
    self.max_seq_length = max_seq_length
    self.train_feature_file = train_feature_file
    self.predict_feature_file = predict_feature_file
    self.start_n_top = start_n_top
    self.end_n_top = end_n_top
    self.dropout_prob = dropout_prob
    self.init_checkpoint = init_checkpoint
    self.shuffle_seed = shuffle_seed

  def build_model(self):
    from albert_tf.models.squad import AlbertSquadModel  # pylint: disable=g-import-not-at-top
    return AlbertSquadModel(self.albert_config,
                            version_2_with_negative=self.version_2_with_negative,
                            start_n_top=self.start_n_top, end_n_top=self.end_n_top,
                            dropout_prob=self.dropout_prob)

  def initialize(self, model):
    """--init_checkpoint: ours (TF2), or official TF1 pretrained / SQuAD fine-tuned."""
    if not self.init_checkpoint:
      return None
    from albert_tf.checkpoints import init_from_checkpoint  # pylint: disable=g-import-not-at-top
    from albert_tf.models.squad import load_tf1_squad_head  # pylint: disable=g-import-not-at-top
    report = init_from_checkpoint(model, self.init_checkpoint)
    if report is not None and tf.io.gfile.exists(report.checkpoint + ".index"):
      # TF1: the encoder is loaded; an official SQuAD head may be there too (not in an HF
      # directory or a hub module, which carry no SQuAD head).
      loaded = load_tf1_squad_head(model, report.checkpoint)
      if loaded:
        logging.info("Loaded the official SQuAD head (%d variables) from %s", len(loaded),
                     report.checkpoint)
    return report

  def build_inputs(self, mode, batch_size, input_context=None):
    if mode == "train":
      if not self.train_feature_file:
        raise AlbertError("training needs --train_feature_file")
      dataset = squad.feature_dataset(
          self.train_feature_file, self.max_seq_length, is_training=True,
          batch_size=batch_size, drop_remainder=True, input_context=input_context,
          seed=self.shuffle_seed)
      v2 = self.version_2_with_negative

      def split(record):
        features = {k: record[k] for k in _ENCODER_FEATURES + ("unique_ids",)}
        if v2:  # the v2 end head is conditioned on the gold start while training
          features["start_positions"] = record["start_positions"]
        return features, {k: record[k] for k in _LABELS}

      return dataset.map(split)
    if mode == "predict":
      if not self.predict_feature_file:
        raise AlbertError("prediction needs --predict_feature_file")
      dataset = squad.feature_dataset(
          self.predict_feature_file, self.max_seq_length, is_training=False,
          batch_size=batch_size, drop_remainder=False, input_context=input_context)
      return dataset.map(lambda record: (record, {}))
    raise AlbertError(f"SQuAD has no {mode!r} input: it is evaluated by prediction "
                      "(--do_predict) with the official metric")

  def build_losses(self, labels, outputs, global_batch_size):
    losses = squad_per_example_losses(labels, outputs, self.version_2_with_negative)
    scale = 1.0 / tf.cast(global_batch_size, tf.float32)
    aux = {name: tf.reduce_sum(value) * scale for name, value in losses.items()
           if name != "total"}
    return tf.reduce_sum(losses["total"]) * scale, aux


def raw_results(trainer, predict_batch_size, checkpoint_path=None):
  """Runs prediction; returns {unique_id: {output name: numpy row}} for every feature."""
  results = {}
  for features, outputs in trainer.predict(predict_batch_size, checkpoint_path=checkpoint_path):
    unique_ids = np.asarray(features["unique_ids"]).reshape([-1])
    for row, unique_id in enumerate(unique_ids):
      results[int(unique_id)] = {name: np.asarray(value)[row] for name, value in outputs.items()}
    if len(results) % 1000 < len(unique_ids):
      logging.info("Predicted %d features", len(results))
  return results


def predict_and_evaluate(task, trainer, examples, features, dataset_json, predict_batch_size,
                         n_best_size, max_answer_length, checkpoint_path=None,
                         null_score_diff_threshold=None):
  """Predictions and official metrics of one checkpoint.

  dataset_json: the predict file's "data" list, or None when it has no gold answers (then no
  metrics; v2.0 uses null_score_diff_threshold, default 0.0).
  Returns (metrics, outputs) with outputs = dict(predictions, nbest[, null_odds]).
  """
  results = raw_results(trainer, predict_batch_size, checkpoint_path)
  missing = [f.unique_id for f in features if f.unique_id not in results]
  if missing:
    raise AlbertError(f"--predict_feature_file has no prediction for feature {missing[0]} "
                      f"({len(missing)} missing): it does not match "
                      "--predict_feature_left_file; delete both to rebuild")
  if task.version_2_with_negative:
    nbest, null_odds = squad_postprocess.v2_nbest(examples, features, results, n_best_size,
                                                  max_answer_length)
    if dataset_json is None:
      threshold = 0.0 if null_score_diff_threshold is None else null_score_diff_threshold
      predictions = squad_postprocess.v2_predictions(nbest, null_odds, threshold)
      metrics = {"null_score_diff_threshold": threshold}
    else:
      predictions, metrics = squad_postprocess.tune_and_evaluate_v2(
          dataset_json, nbest, null_odds, null_score_diff_threshold)
    return metrics, {"predictions": predictions, "nbest": nbest, "null_odds": null_odds}
  predictions, nbest = squad_postprocess.v1_nbest(examples, features, results, n_best_size,
                                                  max_answer_length)
  metrics = {} if dataset_json is None else squad_postprocess.evaluate_v1(dataset_json,
                                                                          predictions)
  return metrics, {"predictions": predictions, "nbest": nbest}


# ----------------------------------------------------------------------------- run_squad flow


@dataclasses.dataclass
class SquadRun:
  """What run_squad.py asks for, by the official flag names."""
  albert_config_file: str
  output_dir: str
  spm_model_file: Optional[str] = None
  vocab_file: Optional[str] = None
  # None: SQuAD v2.0 iff --train_file (else --predict_file) is a v2.0 file.
  version_2_with_negative: Optional[bool] = None
  train_file: Optional[str] = None
  predict_file: Optional[str] = None
  train_feature_file: Optional[str] = None
  predict_feature_file: Optional[str] = None
  predict_feature_left_file: Optional[str] = None
  init_checkpoint: Optional[str] = None
  do_lower_case: bool = True
  max_seq_length: int = 384
  doc_stride: int = 128
  max_query_length: int = 64
  do_train: bool = False
  do_predict: bool = False
  train_batch_size: int = 32
  predict_batch_size: int = 8
  learning_rate: float = 5e-5
  num_train_epochs: float = 3.0
  warmup_proportion: float = 0.1
  save_checkpoints_steps: int = 1000
  n_best_size: int = 20
  max_answer_length: int = 30
  start_n_top: int = 5
  end_n_top: int = 5
  dropout_prob: float = 0.1
  null_score_diff_threshold: Optional[float] = None
  optimizer: str = "adamw"
  seed: Optional[int] = None
  export_dir: Optional[str] = None
  export_precision: str = "fp32"
  tflite_quantize: str = "none"
  # The config itself, when it does not come from albert_config_file (a hub module, HF dir).
  albert_config: Optional[AlbertConfig] = None


def validate_run(run, albert_config):
  """The official validate_flags_or_throw, as one-line AlbertErrors."""
  if not (run.do_train or run.do_predict or run.export_dir):
    raise AlbertError("at least one of --do_train, --do_predict or --export_dir must be set")
  if run.do_train and not run.train_file:
    raise AlbertError("--do_train needs --train_file")
  if run.do_predict and not run.predict_file:
    raise AlbertError("--do_predict needs --predict_file")
  if not run.spm_model_file:
    raise AlbertError("--spm_model_file is required (SQuAD features use SentencePiece offsets)")
  if run.max_seq_length > albert_config.max_position_embeddings:
    raise AlbertError(f"--max_seq_length={run.max_seq_length}: the model was only trained up to "
                      f"sequence length {albert_config.max_position_embeddings}")
  if run.max_seq_length <= run.max_query_length + 3:
    raise AlbertError(f"--max_seq_length ({run.max_seq_length}) must be greater than "
                      f"--max_query_length ({run.max_query_length}) + 3")
  for name in ("train_batch_size", "predict_batch_size", "save_checkpoints_steps", "doc_stride",
               "n_best_size", "max_answer_length", "start_n_top", "end_n_top"):
    if getattr(run, name) <= 0:
      raise AlbertError(f"--{name}={getattr(run, name)} is invalid: expected > 0")
  if max(run.start_n_top, run.end_n_top) > run.max_seq_length:
    raise AlbertError(f"--start_n_top ({run.start_n_top}) and --end_n_top ({run.end_n_top}) "
                      f"cannot exceed --max_seq_length ({run.max_seq_length})")
  if run.num_train_epochs <= 0 and run.do_train:
    raise AlbertError(f"--num_train_epochs={run.num_train_epochs} is invalid: expected > 0")
  if not 0 <= run.warmup_proportion <= 1:
    raise AlbertError(f"--warmup_proportion={run.warmup_proportion} is invalid: expected 0..1")


def detect_version_2(run):
  """SQuAD v2.0 iff the training (else prediction) file is v2.0: the official command lines of
  run_squad_v1.py and run_squad_v2.py both work unchanged."""
  source = (run.train_file if run.do_train else None) or (
      run.predict_file if run.do_predict else None)
  if not source:
    return False
  _, is_v2 = squad.load_squad_json(source, with_version=True)
  logging.info("%s is SQuAD %s: using the %s head", source, "v2.0" if is_v2 else "v1.1",
               "v2.0 (answerability)" if is_v2 else "v1.1 span")
  return is_v2


def _default_path(path, output_dir, name):
  # The official scripts require the feature-file flags; we default them into --output_dir.
  return path or os.path.join(output_dir, name)


def run_squad(run, trainer_factory):
  """The official run_squad_v1/v2 main: train, then evaluate every checkpoint, keep the best.

  Args:
    run: SquadRun.
    trainer_factory: callable(task, optimizer_fn) -> albert_tf Trainer (strategy, precision and
      the other shared flags are the caller's business).
  Returns:
    dict with num_train_steps / train summary and, when predicting, best_checkpoint,
    best_metrics and the written file paths.
  """
  from albert_tf import tokenization  # pylint: disable=g-import-not-at-top
  from albert_tf.training import optimizer as optimizer_lib  # pylint: disable=g-import-not-at-top
  from albert_tf.training import finetuning  # pylint: disable=g-import-not-at-top

  albert_config = run.albert_config or AlbertConfig.from_json_file(run.albert_config_file)
  validate_run(run, albert_config)
  if run.version_2_with_negative is None:
    run = dataclasses.replace(run, version_2_with_negative=detect_version_2(run))
  tf.io.gfile.makedirs(run.output_dir)
  tokenizer = tokenization.FullTokenizer(vocab_file=run.vocab_file,
                                         do_lower_case=run.do_lower_case,
                                         spm_model_file=run.spm_model_file)
  tokenization.check_vocabulary_fits(tokenizer, albert_config)
  settings = squad.conversion_settings(run.max_seq_length, run.doc_stride, run.max_query_length,
                                       run.do_lower_case, run.spm_model_file)
  suffix = "v2" if run.version_2_with_negative else "v1"
  train_feature_file = _default_path(run.train_feature_file, run.output_dir,
                                     f"squad_{suffix}_train.tf_record")
  predict_feature_file = _default_path(run.predict_feature_file, run.output_dir,
                                       f"squad_{suffix}_predict.tf_record")
  predict_feature_left_file = _default_path(run.predict_feature_left_file, run.output_dir,
                                            f"squad_{suffix}_predict_left.json")
  task = SquadTask(albert_config, run.version_2_with_negative, run.max_seq_length,
                   train_feature_file=train_feature_file,
                   predict_feature_file=predict_feature_file, start_n_top=run.start_n_top,
                   end_n_top=run.end_n_top, dropout_prob=run.dropout_prob,
                   init_checkpoint=run.init_checkpoint, shuffle_seed=run.seed)
  if run.seed is not None:  # reproducible weight initialisation (the data shuffle uses it too)
    import tf_keras  # pylint: disable=g-import-not-at-top
    tf_keras.utils.set_random_seed(run.seed)
  summary = {"version_2_with_negative": run.version_2_with_negative}
  num_train_steps = None
  if run.do_train:
    train_examples = squad.read_squad_examples(run.train_file, is_training=True)
    num_train_steps = int(len(train_examples) / run.train_batch_size * run.num_train_epochs)
    if num_train_steps < 1:
      raise AlbertError(f"{len(train_examples)} training questions / --train_batch_size="
                        f"{run.train_batch_size} x --num_train_epochs={run.num_train_epochs} "
                        "gives 0 training steps")
    num_warmup_steps = int(num_train_steps * run.warmup_proportion)
    random.Random(EXAMPLE_SHUFFLE_SEED).shuffle(train_examples)
    squad.prepare_train_features(train_examples, tokenizer, settings, train_feature_file)
    logging.info("***** Running training: %d questions, batch %d, %d steps *****",
                 len(train_examples), run.train_batch_size, num_train_steps)
    del train_examples
    optimizer_fn = lambda: optimizer_lib.create_optimizer(
        run.optimizer, run.learning_rate, num_train_steps, num_warmup_steps)
    trainer = trainer_factory(task, optimizer_fn)
    summary["train"] = trainer.train(num_train_steps, run.train_batch_size)
    summary["num_train_steps"] = num_train_steps

  if run.do_predict:
    dataset_json = squad.load_squad_json(run.predict_file)
    if not squad_postprocess.has_gold_answers(dataset_json):
      logging.warning("%s has questions without \"answers\": predicting with model.ckpt-best "
                      "(else the latest checkpoint), no evaluation", run.predict_file)
      dataset_json = None
    examples = squad.read_squad_examples(run.predict_file, is_training=False)
    features = squad.prepare_predict_features(examples, tokenizer, settings,
                                              predict_feature_file, predict_feature_left_file)
    logging.info("***** Running predictions: %d questions, %d features, batch %d *****",
                 len(examples), len(features), run.predict_batch_size)
    trainer = trainer_factory(task, None)
    checkpoints = finetuning.checkpoints_to_evaluate(run.output_dir)
    if not checkpoints:
      if not run.init_checkpoint:
        raise AlbertError(f"--do_predict: no checkpoint in --output_dir={run.output_dir} and no "
                          "--init_checkpoint")
      # A fine-tuned --init_checkpoint (e.g. an official model.ckpt-best); it must hold the head.
      checkpoints = [(None, run.init_checkpoint)]
    if dataset_json is None:  # no gold answers: predict with model.ckpt-best, else the latest
      best = finetuning.best_or_latest_checkpoint(run.output_dir)
      checkpoints = [next(((s, p) for s, p in checkpoints if p == best), (None, best))] \
          if best else checkpoints[-1:]
    key = "f1"
    lines, best = [], None
    eval_writer = tf.summary.create_file_writer(os.path.join(run.output_dir, "eval"))
    for step, path in checkpoints:
      started = time.time()
      metrics, outputs = predict_and_evaluate(
          task, trainer, examples, features, dataset_json, run.predict_batch_size,
          run.n_best_size, run.max_answer_length, checkpoint_path=path,
          null_score_diff_threshold=run.null_score_diff_threshold)
      metrics["global_step"] = step if step is not None else 0
      logging.info("Eval of %s (%.1fs): %s", path or run.init_checkpoint, time.time() - started,
                   ", ".join(f"{k} = {v}" for k, v in sorted(metrics.items())))
      lines += [f"{k} = {metrics[k]}" for k in sorted(metrics)]
      with eval_writer.as_default(step=metrics["global_step"]):
        for name, value in metrics.items():
          if name != "global_step":
            tf.summary.scalar(name, value)
      eval_writer.flush()
      if best is None or metrics.get(key, 0.0) > best[1].get(key, 0.0):
        best = (path, metrics, outputs)
      if key in metrics:
        lines.append(f"best {key} = {best[1][key]}")
      lines.append("=" * 50)
    best_path, best_metrics, best_outputs = best
    if dataset_json is not None:  # the official run_squad keeps the best F1 as model.ckpt-best
      finetuning.write_best_checkpoint(trainer.model, best_path, run.output_dir,
                                       best_metrics["global_step"])
    lines += [f"best_checkpoint = {best_path or run.init_checkpoint}",
              f"best perf happened at step: {best_metrics['global_step']}"]
    _write_text(os.path.join(run.output_dir, "eval_results.txt"), "\n".join(lines) + "\n")
    summary["files"] = squad_postprocess.write_prediction_files(
        run.output_dir, best_outputs["predictions"], best_outputs["nbest"],
        best_outputs.get("null_odds"))
    summary["best_checkpoint"] = best_path
    summary["best_metrics"] = best_metrics

  if run.export_dir:
    # The best checkpoint when prediction ran (the official keeps it as model.ckpt-best), else
    # the latest one.
    checkpoint = finetuning.best_or_latest_checkpoint(run.output_dir)
    summary["export_dir"] = _export(task, run, checkpoint)
  return summary


def _write_text(path, text):
  temp = f"{path}.tmp-{os.getpid()}"
  with tf.io.gfile.GFile(temp, "w") as f:
    f.write(text)
  tf.io.gfile.rename(temp, path, overwrite=True)


# ----------------------------------------------------------------------------- export


class SquadServing(tf.Module):
  """The SavedModel of a SQuAD model: the official run_squad_v1 serving signature.

  serving_default: input_ids, input_mask, segment_ids (v2.0 also p_mask) int32
  [batch, max_seq_length] -> the model's outputs (v1.1 start_logits / end_logits; v2.0 the beam
  outputs and cls_logits). Pre- and post-processing (windows, n-best) stay outside the graph.
  """

  def __init__(self, model, max_seq_length):
    super().__init__()
    # Track the weights only; the Keras model is reached through the closure (see
    # albert_tf.export.serving for why).
    self.model_variables = list(model.variables)
    names = ["input_ids", "input_mask", "segment_ids"]
    if model.version_2_with_negative:
      names.append("p_mask")
    specs = [tf.TensorSpec([None, max_seq_length], tf.int32, name=n) for n in names]

    def serve(*tensors):
      return model(dict(zip(names, tensors)), training=False)

    self.serve = tf.function(serve, input_signature=specs)


# The official run_squad_v1 export: `<export_dir>/saved_model/<version>/` (+ the TFLite file
# `<export_dir>/albert_model.tflite`).
SAVED_MODEL_SUBDIR = "saved_model"


def export_squad_model(model, export_dir, max_seq_length, spm_model_file=None, precision="fp32"):
  """Writes `model` (weights loaded) as a new version `<export_dir>/saved_model/<version>/`.

  precision: "fp32" or "bf16" (see albert_tf/export/precision.py).
  Returns the version directory written.
  """
  from albert_tf.export import saved_model_writer  # pylint: disable=g-import-not-at-top
  from albert_tf.export.precision import serving_copy  # pylint: disable=g-import-not-at-top
  model = serving_copy(model, precision)
  module = SquadServing(model, max_seq_length)
  identity = {"kind": "albert_squad", "albert_config": model.config.to_dict(),
              "version_2_with_negative": model.version_2_with_negative,
              "max_seq_length": max_seq_length,
              "spm_model_sha1": saved_model_writer.file_sha1(spm_model_file),
              "precision": precision}

  def write(tmp_dir):
    tf.saved_model.save(module, tmp_dir,
                        signatures={"serving_default": module.serve.get_concrete_function()})

  return saved_model_writer.write_new_version(os.path.join(export_dir, SAVED_MODEL_SUBDIR),
                                              identity, write)


def _export(task, run, checkpoint_path):
  """Builds the model, loads checkpoint_path (else --init_checkpoint) and exports it."""
  model = task.build_model()
  dummy = {name: tf.zeros([1, run.max_seq_length], tf.int32)
           for name in ("input_ids", "input_mask", "segment_ids", "p_mask")}
  model(dummy, training=False)
  source = checkpoint_path or run.init_checkpoint
  if not source:
    raise AlbertError(f"--export_dir: no checkpoint in --output_dir={run.output_dir} and no "
                      "--init_checkpoint to export")
  from albert_tf.checkpoints.init import restore_model_weights  # pylint: disable=g-import-not-at-top
  restore_model_weights(model, source)  # encoder and SQuAD head, or a one-line error
  logging.info("Exporting %s to %s", checkpoint_path or run.init_checkpoint, run.export_dir)
  version_dir = export_squad_model(model, run.export_dir, run.max_seq_length,
                                   run.spm_model_file, precision=run.export_precision)
  from albert_tf.training.finetuning import write_tflite_file  # pylint: disable=g-import-not-at-top
  write_tflite_file(model, run.export_dir, run.max_seq_length, run.tflite_quantize)
  return version_dir



def run_squad_from_flags(flags_obj):
  """run_squad.py: the official flags (+ the shared extras) -> run_squad with the shared Trainer."""
  from albert_tf.training import flags as common_flags  # pylint: disable=g-import-not-at-top
  from albert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top
  f = flags_obj
  from albert_tf.checkpoints.model_source import resolve_model_source  # pylint: disable=g-import-not-at-top
  seed = common_flags.apply_runtime_flags(f)
  source = resolve_model_source(
      albert_config_file=f.albert_config_file, init_checkpoint=f.init_checkpoint,
      hub_module_handle=f.albert_hub_module_handle, spm_model_file=f.spm_model_file,
      do_lower_case=f.do_lower_case)
  run = SquadRun(
      albert_config_file=f.albert_config_file, albert_config=source.config,
      output_dir=f.output_dir, spm_model_file=source.spm_model_file, vocab_file=f.vocab_file,
      version_2_with_negative=f.version_2_with_negative, train_file=f.train_file,
      predict_file=f.predict_file, train_feature_file=f.train_feature_file,
      predict_feature_file=f.predict_feature_file,
      predict_feature_left_file=f.predict_feature_left_file,
      init_checkpoint=source.init_checkpoint, do_lower_case=source.do_lower_case, max_seq_length=f.max_seq_length, doc_stride=f.doc_stride,
      max_query_length=f.max_query_length, do_train=f.do_train, do_predict=f.do_predict,
      train_batch_size=f.train_batch_size, predict_batch_size=f.predict_batch_size,
      learning_rate=f.learning_rate, num_train_epochs=f.num_train_epochs,
      warmup_proportion=f.warmup_proportion, save_checkpoints_steps=f.save_checkpoints_steps,
      n_best_size=f.n_best_size, max_answer_length=f.max_answer_length,
      start_n_top=f.start_n_top, end_n_top=f.end_n_top, dropout_prob=f.dropout_prob,
      null_score_diff_threshold=f.null_score_diff_threshold, seed=seed,
      export_dir=f.export_dir, export_precision=f.export_precision,
      tflite_quantize=f.tflite_quantize)
  strategy = common_flags.strategy_from_flags(f)
  trainer_kwargs = common_flags.trainer_kwargs_from_flags(f)

  def trainer_factory(task, optimizer_fn):
    # The official run keeps every checkpoint (keep_checkpoint_max=0) for the evaluation sweep.
    return Trainer(task, strategy, run.output_dir, optimizer_fn=optimizer_fn,
                   save_checkpoints_steps=run.save_checkpoints_steps, keep_checkpoint_max=None,
                   **trainer_kwargs)

  summary = run_squad(run, trainer_factory)
  if "best_metrics" in summary:
    metrics = summary["best_metrics"]
    version = "v2.0" if summary["version_2_with_negative"] else "v1.1"
    print(f"SQuAD {version} best checkpoint {summary['best_checkpoint']}: " +
          ", ".join(f"{k} = {metrics[k]:.4f}" if isinstance(metrics[k], float) else
                    f"{k} = {metrics[k]}" for k in sorted(metrics)), flush=True)
  return summary
