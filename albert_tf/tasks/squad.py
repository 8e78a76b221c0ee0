"""SQuAD v1.1 / v2.0 as a Task: the official run_squad_v1.py / run_squad_v2.py on the one runner.

  train: --train_file's questions, shuffled once (seed 12345), become --train_feature_file
    (built if missing, else reused); the runner trains int(questions / train_batch_size *
    num_train_epochs) steps.
  evaluate (run_squad.py --do_predict on a file with answers): every checkpoint predicts
    --predict_file (features cached in --predict_feature_file + --predict_feature_left_file);
    `aggregate_outputs` gathers the raw start/end (v2: beam and answerability) outputs by
    feature, `reduce_outputs` runs the official n-best post-processing and SQuAD metric. The
    runner keeps the best F1 (model.ckpt-best) and this task writes that checkpoint's
    predictions.json, nbest_predictions.json (v2: null_odds.json).
  predict (a file without answers): the same outputs of model.ckpt-best, else the latest.
  export: `<export_dir>/saved_model/<version>/`, the official run_squad_v1 layout.
"""

import dataclasses
import random
from typing import Optional, Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from albert_tf.checkpoints.init import init_from_checkpoint
from albert_tf.common import fileio
from albert_tf.checkpoints.tf1 import load_tf1_head
from albert_tf.config import AlbertConfig
from albert_tf.data import squad
from albert_tf.data import squad_postprocess
from albert_tf.errors import AlbertError
from albert_tf.export.squad_serving import export_squad_model
from albert_tf.models.squad import AlbertSquadModel
from albert_tf.tasks.base import Task
from albert_tf.text.tokenization import make_tokenizer

# Examples are shuffled once before conversion with this seed, as the official scripts do.
EXAMPLE_SHUFFLE_SEED = 12345
_ENCODER_FEATURES = ("input_ids", "input_mask", "segment_ids", "p_mask")
_LABELS = ("start_positions", "end_positions", "is_impossible")
# What the trainer measures besides the official metric; SQuAD reports only the latter.


@dataclasses.dataclass
class SquadConfig:
  """The official run_squad flags the task needs (the model's config included).

  Feature files default into `cache_dir` (the scripts: --output_dir) as
  squad_<v1|v2>_{train.tf_record,predict.tf_record,predict_left.json}.
  """
  albert_config: AlbertConfig
  spm_model_file: Optional[str] = None
  vocab_file: Optional[str] = None
  do_lower_case: bool = True
  init_checkpoint: Optional[str] = None
  # None: SQuAD v2.0 iff --train_file (else --predict_file) is a v2.0 file.
  version_2_with_negative: Optional[bool] = None
  train_file: Optional[str] = None
  predict_file: Optional[str] = None
  cache_dir: Optional[str] = None
  train_feature_file: Optional[str] = None
  predict_feature_file: Optional[str] = None
  predict_feature_left_file: Optional[str] = None
  max_seq_length: int = 384
  doc_stride: int = 128
  max_query_length: int = 64
  n_best_size: int = 20
  max_answer_length: int = 30
  start_n_top: int = 5
  end_n_top: int = 5
  dropout_rate: float = 0.1
  null_score_diff_threshold: Optional[float] = None
  shuffle_seed: Optional[int] = None
  # False: training features in file order (--shuffle_train_input=false), to reproduce a run.
  shuffle_train_input: bool = True
  # Lengths each batch is padded to (`albert_tf.data.bucketing`); None: max_seq_length.
  bucket_boundaries: Optional[Tuple[int, ...]] = None

  def __post_init__(self):
    if isinstance(self.albert_config, str):
      self.albert_config = AlbertConfig.from_json_file(self.albert_config)
    if (self.train_file or self.predict_file) and not (self.spm_model_file or self.vocab_file):
      raise AlbertError("--spm_model_file is required (or --vocab_file for a WordPiece model)")
    self.albert_config.check_sequence_length(self.max_seq_length)
    squad.check_window_lengths(self.max_seq_length, self.max_query_length, self.doc_stride)
    for name in ("n_best_size", "max_answer_length", "start_n_top", "end_n_top"):
      if getattr(self, name) <= 0:
        raise AlbertError(f"--{name}={getattr(self, name)} is invalid: expected > 0")
    if max(self.start_n_top, self.end_n_top) > self.max_seq_length:
      raise AlbertError(f"--start_n_top ({self.start_n_top}) and --end_n_top ({self.end_n_top}) "
                        f"cannot exceed --max_seq_length ({self.max_seq_length})")
    if self.version_2_with_negative is None:
      self.version_2_with_negative = _detect_version_2(self.train_file or self.predict_file)
    suffix = "v2" if self.version_2_with_negative else "v1"
    defaults = {"train_feature_file": f"squad_{suffix}_train.tf_record",
                "predict_feature_file": f"squad_{suffix}_predict.tf_record",
                "predict_feature_left_file": f"squad_{suffix}_predict_left.json"}
    for name, file_name in defaults.items():
      # The official scripts require these flags; we default them into the run's directory.
      if not getattr(self, name) and self.cache_dir:
        setattr(self, name, f"{self.cache_dir.rstrip('/')}/{file_name}")


def _detect_version_2(source):
  """SQuAD v2.0 iff `source` is a v2.0 file: the official command lines of run_squad_v1.py and
  run_squad_v2.py both work unchanged."""
  if not source:
    return False
  _, is_v2 = squad.load_squad_json(source, with_version=True)
  logging.info("%s is SQuAD %s: using the %s head", source, "v2.0" if is_v2 else "v1.1",
               "v2.0 (answerability)" if is_v2 else "v1.1 span")
  return is_v2


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
  train the v2 head, start_positions). Labels: start_positions, end_positions, is_impossible
  (training only: evaluation compares predicted answer texts with the gold ones).
  """

  best_metric = "f1"
  best_line = "after"

  def __init__(self, params: SquadConfig, tokenizer=None):
    self.params = params
    self.version_2_with_negative = bool(params.version_2_with_negative)
    self.name = "squad/v2.0" if self.version_2_with_negative else "squad/v1.1"
    self._tokenizer = tokenizer
    self._train_examples = None
    self._gold = None  # (gold dataset json or None,) once read
    self._predict_data = None  # (examples, features)

  # ------------------------------------------------------------------ model
  def build_model(self):
    return AlbertSquadModel(self.params.albert_config,
                            version_2_with_negative=self.version_2_with_negative,
                            start_n_top=self.params.start_n_top, end_n_top=self.params.end_n_top,
                            dropout_rate=self.params.dropout_rate)

  def initialize(self, model):
    """--init_checkpoint: ours (TF2), or official TF1 pretrained / SQuAD fine-tuned."""
    if not self.init_checkpoint:
      return None
    report = init_from_checkpoint(model, self.init_checkpoint)
    if report is not None and fileio.exists(report.checkpoint + ".index"):
      # TF1: the encoder is loaded; an official SQuAD head may be there too (not in an HF
      # directory or a hub module, which carry no SQuAD head).
      loaded = load_tf1_head(model, report.checkpoint)
      if loaded:
        logging.info("Loaded the official SQuAD head (%d variables) from %s", len(loaded),
                     report.checkpoint)
    return report

  # ------------------------------------------------------------------ data
  @property
  def tokenizer(self):
    if self._tokenizer is None:
      p = self.params
      self._tokenizer = make_tokenizer(p.spm_model_file, p.vocab_file, p.do_lower_case,
                                       p.albert_config)
    return self._tokenizer

  def _conversion_settings(self):
    p = self.params
    return squad.conversion_settings(p.max_seq_length, p.doc_stride, p.max_query_length,
                                     p.do_lower_case, p.spm_model_file)

  def train_examples(self):
    """--train_file's questions in the official training order (shuffled with seed 12345)."""
    if self._train_examples is None:
      if not self.params.train_file:
        raise AlbertError("--do_train needs --train_file")
      examples = squad.read_squad_examples(self.params.train_file, is_training=True)
      random.Random(EXAMPLE_SHUFFLE_SEED).shuffle(examples)
      self._train_examples = examples
    return self._train_examples

  def num_train_examples(self):
    return len(self.train_examples())

  def gold_dataset(self):
    """--predict_file's "data" list when its questions carry answers, else None (a test set)."""
    if self._gold is None:
      if not self.params.predict_file:
        raise AlbertError("--do_predict needs --predict_file")
      gold = squad.load_squad_json(self.params.predict_file)
      self._gold = (gold if squad_postprocess.has_gold_answers(gold) else None,)
    return self._gold[0]

  @property
  def has_gold_answers(self):
    """True when --predict_file's questions carry answers (then it is evaluated)."""
    return self.gold_dataset() is not None

  def predict_data(self):
    """(examples, features) of --predict_file; the features built or reused from the cache."""
    if self._predict_data is None:
      p = self.params
      if not self.has_gold_answers:
        logging.warning("%s has questions without \"answers\": predictions only, no "
                        "evaluation", p.predict_file)
      examples = squad.read_squad_examples(p.predict_file, is_training=False)
      features = squad.prepare_predict_features(examples, self.tokenizer,
                                                self._conversion_settings(),
                                                p.predict_feature_file,
                                                p.predict_feature_left_file)
      logging.info("%d questions, %d features", len(examples), len(features))
      self._predict_data = (examples, features)
    return self._predict_data

  def input_files(self, mode):
    pattern = (self.params.train_feature_file if mode == "train"
               else self.params.predict_feature_file)
    return sorted(tf.io.gfile.glob(pattern)) if pattern else []

  def _record_bounds(self):
    """The model's vocabulary and segment types, which bound the records' ids."""
    return {"vocab_size": self.params.albert_config.vocab_size,
            "type_vocab_size": self.params.albert_config.type_vocab_size}

  def build_inputs(self, mode, batch_size, input_context=None):
    p = self.params
    if mode == "train":
      examples = self.train_examples()
      squad.prepare_train_features(examples, self.tokenizer, self._conversion_settings(),
                                   p.train_feature_file)
      dataset = squad.feature_dataset(
          p.train_feature_file, self.max_seq_length, is_training=True,
          batch_size=batch_size, drop_remainder=True, input_context=input_context,
          seed=p.shuffle_seed, shuffle=p.shuffle_train_input,
          bucket_boundaries=p.bucket_boundaries,
          **self._record_bounds())
      v2 = self.version_2_with_negative

      def split(record):
        features = {k: record[k] for k in _ENCODER_FEATURES + ("unique_ids",)}
        if v2:  # the v2 end head is conditioned on the gold start while training
          features["start_positions"] = record["start_positions"]
        return features, {k: record[k] for k in _LABELS}

      return dataset.map(split)
    # Evaluation and prediction read the same features; evaluation scores the answer texts.
    self.predict_data()
    dataset = squad.feature_dataset(
        p.predict_feature_file, self.max_seq_length, is_training=False,
        batch_size=batch_size, drop_remainder=False, input_context=input_context,
        bucket_boundaries=p.bucket_boundaries, **self._record_bounds())
    return dataset.map(lambda record: (record, {}))

  # ------------------------------------------------------------------ loss
  def build_losses(self, labels, outputs, global_batch_size):
    if not labels:  # evaluation: the official metric compares answer texts, there is no loss
      return tf.constant(0.0), {}
    losses = squad_per_example_losses(labels, outputs, self.version_2_with_negative)
    scale = 1.0 / tf.cast(global_batch_size, tf.float32)
    aux = {name: tf.reduce_sum(value) * scale for name, value in losses.items()
           if name != "total"}
    return tf.reduce_sum(losses["total"]) * scale, aux

  # ------------------------------------------------------------------ evaluation
  def aggregate_outputs(self, state, features, labels, outputs):
    """{unique_id: {output name: numpy row}} over every predicted feature."""
    state = {} if state is None else state
    unique_ids = np.asarray(features["unique_ids"]).reshape([-1])
    for row, unique_id in enumerate(unique_ids):
      state[int(unique_id)] = {name: np.asarray(value)[row] for name, value in outputs.items()}
    return state

  def _post_process(self, results, gold):
    """n-best post-processing (and, with gold answers, the official metric) of raw results.

    Returns (metrics, outputs) with outputs = dict(predictions, nbest[, null_odds]).
    """
    p = self.params
    examples, features = self.predict_data()
    missing = [f.unique_id for f in features if f.unique_id not in (results or {})]
    if missing:
      raise AlbertError(f"--predict_feature_file has no prediction for feature {missing[0]} "
                        f"({len(missing)} missing): it does not match "
                        "--predict_feature_left_file; delete both to rebuild")
    if self.version_2_with_negative:
      nbest, null_odds = squad_postprocess.v2_nbest(examples, features, results, p.n_best_size,
                                                    p.max_answer_length)
      if gold is None:
        threshold = p.null_score_diff_threshold or 0.0
        predictions = squad_postprocess.v2_predictions(nbest, null_odds, threshold)
        metrics = {"null_score_diff_threshold": threshold}
      else:
        predictions, metrics = squad_postprocess.tune_and_evaluate_v2(
            gold, nbest, null_odds, p.null_score_diff_threshold)
      return metrics, {"predictions": predictions, "nbest": nbest, "null_odds": null_odds}
    predictions, nbest = squad_postprocess.v1_nbest(examples, features, results, p.n_best_size,
                                                    p.max_answer_length)
    metrics = {} if gold is None else squad_postprocess.evaluate_v1(gold, predictions)
    return metrics, {"predictions": predictions, "nbest": nbest}

  def reduce_outputs(self, state, mode):
    """eval: the official metric of --predict_file's answers and the n-best answers it scored
    (with gold answers, v2's tuned null threshold); predict: the answers alone."""
    return self._post_process(state, self.gold_dataset() if mode == "eval" else None)

  def write_predictions(self, output_dir, outputs):
    """predictions.json, nbest_predictions.json and (v2) null_odds.json, as the official."""
    files = squad_postprocess.write_prediction_files(
        output_dir, outputs["predictions"], outputs["nbest"], outputs.get("null_odds"))
    return {"files": files, "predictions": len(outputs["predictions"])}

  # ------------------------------------------------------------------ export
  def export(self, model, export_dir, precision="fp32"):
    return export_squad_model(model, export_dir, self.max_seq_length, self.params.spm_model_file,
                              precision=precision)
