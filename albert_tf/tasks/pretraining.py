"""The pretraining Task: masked-LM + sentence-order prediction, as the official run_pretraining."""

import dataclasses
from typing import Optional

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf.checkpoints import formats
from albert_tf.checkpoints import init as checkpoint_init
from albert_tf.common import file_patterns
from albert_tf.config import AlbertConfig
from albert_tf.data.pretraining import dataset as pretraining_dataset
from albert_tf.data.pretraining import online_masking
from albert_tf.data.pretraining import vocab_record
from albert_tf.errors import AlbertError
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.tasks.base import Task
from albert_tf.text import tokenization

FEATURE_KEYS = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
# The keys of the official eval_results.txt.
OFFICIAL_EVAL_KEYS = ("global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                      "sentence_order_accuracy", "sentence_order_loss")
# Ours, beside them: the masked-LM accuracy of always answering the most frequent token of the
# evaluated masked positions (what a model that learned only token frequencies scores).
MASKED_LM_BASELINE_KEY = "masked_lm_baseline_accuracy"
EVAL_KEYS = OFFICIAL_EVAL_KEYS + (MASKED_LM_BASELINE_KEY,)
# Labels the trainer adds to each accumulation micro-batch (`replica_batch_labels`).
REPLICA_WEIGHT_SUM = "replica_masked_lm_weight_sum"
REPLICA_EXAMPLES = "replica_examples"
INIT_CHECKPOINT_SCHEDULES = ("restart", "continue")


@dataclasses.dataclass
class PretrainingConfig:
  """The official run_pretraining flags the task needs."""
  albert_config: AlbertConfig
  input_file: str = ""
  eval_input_file: Optional[str] = None  # default: input_file (as the official script)
  max_seq_length: int = 512
  max_predictions_per_seq: int = 20
  init_checkpoint: Optional[str] = None
  init_from_group0: bool = False
  shuffle_seed: Optional[int] = None
  # False: training records in file order (--shuffle_train_input=false), to reproduce a run.
  shuffle_train_input: bool = True
  # The official --masked_lm_budget: > 0 re-masks every read instance online (see
  # albert_tf/data/pretraining/online_masking.py); 0 uses the records' own (offline) masks.
  masked_lm_budget: float = 0.0
  # Where a run from init_checkpoint starts its step counter and learning-rate schedule:
  # "restart" at 0 (the official run_pretraining, which loads only the weights), "continue" at
  # the checkpoint's global_step. The optimizer state starts fresh either way.
  init_checkpoint_schedule: str = "restart"
  # The SentencePiece model the records were made with (optional): checked against the config
  # and init_checkpoint's vocabulary (checkpoints/init.py check_init_vocabulary), and copied
  # into the output directory beside the checkpoints.
  spm_model_file: Optional[str] = None

  def __post_init__(self):
    self.albert_config.check_sequence_length(self.max_seq_length)
    for name in ("max_seq_length", "max_predictions_per_seq"):
      if getattr(self, name) <= 0:
        raise AlbertError(f"--{name}={getattr(self, name)} is invalid: expected > 0")
    if self.max_predictions_per_seq > self.max_seq_length:
      raise AlbertError(f"--max_predictions_per_seq={self.max_predictions_per_seq} exceeds "
                        f"--max_seq_length={self.max_seq_length}")
    if self.init_checkpoint_schedule not in INIT_CHECKPOINT_SCHEDULES:
      raise AlbertError(f"--init_checkpoint_schedule={self.init_checkpoint_schedule!r} is "
                        f"invalid: expected one of {', '.join(INIT_CHECKPOINT_SCHEDULES)}")
    if self.init_checkpoint_schedule == "continue" and not self.init_checkpoint:
      raise AlbertError("--init_checkpoint_schedule=continue needs --init_checkpoint (the "
                        "checkpoint whose step and schedule to continue)")
    if self.masked_lm_budget < 0:
      raise AlbertError(f"--masked_lm_budget={self.masked_lm_budget} is invalid: expected >= 0 "
                        "(0: the records' own masks)")


def _existing_files(patterns):
  """The files the comma-separated patterns match, else none (reading the records names a
  pattern that matches nothing, later and as every run does)."""
  try:
    return file_patterns.expand(patterns)
  except AlbertError:
    return []


def masked_lm_example_loss(mlm_logits, masked_lm_ids):
  """Per-prediction cross-entropy, float32 [batch, num_predictions]."""
  log_probs = tf.nn.log_softmax(tf.cast(mlm_logits, tf.float32), axis=-1)
  return -tf.gather(log_probs, masked_lm_ids, axis=-1, batch_dims=2)


def sentence_order_example_loss(sop_logits, labels):
  """Per-example cross-entropy, float32 [batch]."""
  log_probs = tf.nn.log_softmax(tf.cast(sop_logits, tf.float32), axis=-1)
  return -tf.gather(log_probs, labels, axis=-1, batch_dims=1)


def masked_lm_target_counts(ids, weights):
  """(token ids, their summed weights) of flat masked-LM targets; zero-weight padding dropped."""
  real = weights > 0
  tokens, inverse = np.unique(ids[real], return_inverse=True)
  return tokens.tolist(), np.bincount(inverse, weights=weights[real]).tolist()


def masked_lm_baseline_accuracy(counts):
  """The accuracy of always answering the most frequent target: max weight / total weight.

  counts: {token id: summed masked_lm_weights of the positions whose target is that token}, as
  `PretrainingTask.aggregate_outputs` gathers them over the evaluated batches; 0.0 when empty.
  """
  total = sum(counts.values())
  return float(max(counts.values()) / total) if total > 0 else 0.0


def features_and_labels(batch):
  """A batch of decoded records -> (features, labels), as the pretrainer and its loss take them."""
  features = {k: batch[k] for k in FEATURE_KEYS}
  labels = {
      "masked_lm_ids": batch["masked_lm_ids"],
      "masked_lm_weights": batch["masked_lm_weights"],
      "next_sentence_labels": batch["next_sentence_labels"][:, 0],
  }
  return features, labels


def _real_examples(labels):
  """float32 [batch]: 1 for a real example, 0 for eval padding (the trainer's
  is_real_example); None when every example is real."""
  real = labels.get("is_real_example")
  return None if real is None else tf.cast(real, tf.float32)


def _masked_lm_weights(labels, real):
  """masked_lm_weights [batch, max_predictions], 0 on padding examples."""
  weights = labels["masked_lm_weights"]
  return weights if real is None else weights * real[:, None]


class PretrainingTask(Task):
  """ALBERT pretraining on official TFRecords.

  Loss normalisation follows the official TPU run: the masked-LM loss
  sum(w * CE) / (sum(w) + 1e-5) is computed per replica batch (the official computes it per
  TPU core) and averaged over replicas; the SOP loss is the batch mean. Gradient accumulation
  does not change it: each micro-batch divides by the sum(w) of its whole replica batch
  (`replica_batch_labels`). A single replica is exactly the official single-device loss, with
  or without accumulation.
  """

  name = "pretraining"
  fine_tunes = False  # from random weights by design, unless --init_checkpoint
  eval_result_keys = EVAL_KEYS

  def __init__(self, params: PretrainingConfig):
    """Reads the records' vocabulary record (data/pretraining/vocab_record.py), if any: without
    spm_model_file, the SentencePiece model it names becomes the run's.

    Raises:
      AlbertError: spm_model_file has more pieces than the config's vocab_size, or other pieces
        than the records' vocabulary.
    """
    self.params = params
    self.records_vocabulary = vocab_record.read(_existing_files(params.input_file))
    if self.records_vocabulary and not params.spm_model_file:
      params.spm_model_file = vocab_record.usable_model(self.records_vocabulary)
      if params.spm_model_file:
        logging.info("SentencePiece model of the records (%s): %s", self.records_vocabulary[0],
                     params.spm_model_file)
    if params.spm_model_file:
      checkpoint_init.check_init_vocabulary(params.albert_config,
                                            spm_model_file=params.spm_model_file)
      if self.records_vocabulary:
        vocab_record.check_tokenizer(
            self.records_vocabulary,
            tokenization.FullTokenizer(spm_model_file=params.spm_model_file),
            f"--spm_model_file={params.spm_model_file}")

  def build_model(self):
    return AlbertPretrainer(self.params.albert_config)

  def initialize(self, model):
    """init_checkpoint's weights, once its vocabulary is the config's and spm_model_file's
    (checked here, not before: a run that resumes from output_dir never reads it, as the
    official scripts).

    Raises:
      AlbertError: the vocabularies differ (checkpoint_init.check_init_vocabulary), or as
        checkpoint_init.init_from_checkpoint.
    """
    if self.params.init_checkpoint:
      checkpoint_init.check_init_vocabulary(self.params.albert_config,
                                            self.params.init_checkpoint,
                                            self.params.spm_model_file)
      if self.records_vocabulary and not self.params.spm_model_file:
        self._check_records_against_checkpoint()
      checkpoint_init.init_from_checkpoint(model, self.params.init_checkpoint,
                                           init_from_group0=self.params.init_from_group0)

  def _check_records_against_checkpoint(self):
    """The records' vocabulary record against init_checkpoint's own SentencePiece model, when
    the model the record names is gone (records copied to another machine)."""
    source = formats.detect(self.params.init_checkpoint, "--init_checkpoint")
    own = source.spm_model_file()
    if own:
      vocab_record.check_tokenizer(self.records_vocabulary,
                                   tokenization.FullTokenizer(spm_model_file=own),
                                   f"{own} (the SentencePiece model of {source.path})")

  def initial_step(self):
    """0, or with init_checkpoint_schedule "continue" the init checkpoint's global step."""
    if self.params.init_checkpoint_schedule == "continue":
      return checkpoint_init.init_checkpoint_step(self.params.init_checkpoint)
    return 0

  def _input_patterns(self, mode):
    if mode != "train" and self.params.eval_input_file:
      return self.params.eval_input_file
    return self.params.input_file

  def input_files(self, mode):
    return file_patterns.expand(self._input_patterns(mode))

  def build_inputs(self, mode, batch_size, input_context=None):
    is_training = mode == "train"
    config = self.params.albert_config
    ds = pretraining_dataset.pretraining_dataset(
        self._input_patterns(mode), self.params.max_seq_length,
        self.params.max_predictions_per_seq, batch_size, is_training=is_training,
        input_context=input_context, seed=self.params.shuffle_seed,
        shuffle=self.params.shuffle_train_input, vocab_size=config.vocab_size,
        type_vocab_size=config.type_vocab_size, config_source=config.source)
    if self.params.masked_lm_budget > 0:
      # Evaluation draws the same masks every time (seed 0), so its numbers stay comparable.
      ds = online_masking.apply_online_masking(
          ds, self.params.masked_lm_budget, self.params.max_predictions_per_seq,
          self.params.albert_config.vocab_size,
          seed=self.params.shuffle_seed if is_training else 0)
    return ds.map(features_and_labels)

  def replica_batch_labels(self, labels):
    # The masked-LM normaliser sum(w) of the whole replica batch: a micro-batch divides by it
    # (not by its own sum), so K micro-batches add up to the loss of one K-times batch.
    weights = labels["masked_lm_weights"]  # [K, b, max_predictions]
    return {REPLICA_WEIGHT_SUM: tf.reduce_sum(weights),
            REPLICA_EXAMPLES: tf.cast(tf.shape(weights)[0] * tf.shape(weights)[1], tf.float32)}

  def build_losses(self, labels, outputs, global_batch_size):
    real = _real_examples(labels)
    weights = _masked_lm_weights(labels, real)
    per_prediction = masked_lm_example_loss(outputs["mlm_logits"], labels["masked_lm_ids"])
    if REPLICA_WEIGHT_SUM in labels:  # one micro-batch of a replica batch
      weight_sum, examples = labels[REPLICA_WEIGHT_SUM], labels[REPLICA_EXAMPLES]
    else:
      weight_sum = tf.reduce_sum(weights)
      examples = (tf.cast(tf.shape(weights)[0], tf.float32) if real is None
                  else tf.reduce_sum(real))
    share = examples / tf.cast(global_batch_size, tf.float32)
    mlm_loss = tf.reduce_sum(weights * per_prediction) / (weight_sum + 1e-5) * share
    per_example = sentence_order_example_loss(outputs["sop_logits"],
                                              labels["next_sentence_labels"])
    if real is not None:
      per_example = per_example * real
    sop_loss = tf.reduce_sum(per_example) / tf.cast(global_batch_size, tf.float32)
    return mlm_loss + sop_loss, {"mlm_loss": mlm_loss, "sop_loss": sop_loss}

  def build_metrics(self, training=True):
    metrics = [tf_keras.metrics.Mean("masked_lm_accuracy"),
               tf_keras.metrics.Mean("sentence_order_accuracy")]
    if not training:
      metrics += [tf_keras.metrics.Mean("masked_lm_loss"),
                  tf_keras.metrics.Mean("sentence_order_loss")]
    return metrics

  def aggregate_outputs(self, state, features, labels, outputs):
    """Counts the evaluated masked-LM targets, weighted: {token id: summed weight}."""
    del features, outputs
    counts = state if state is not None else {}
    if labels is not None:
      ids = np.asarray(labels["masked_lm_ids"]).reshape(-1)
      weights = np.asarray(labels["masked_lm_weights"], np.float64).reshape(-1)
      for token, weight in zip(*masked_lm_target_counts(ids, weights)):
        counts[token] = counts.get(token, 0.0) + weight
    return counts

  def reduce_outputs(self, state, mode):
    if mode != "eval":
      return {}, None
    return {MASKED_LM_BASELINE_KEY: masked_lm_baseline_accuracy(state or {})}, None

  def update_metrics(self, metrics, labels, outputs):
    by_name = {m.name: m for m in metrics}
    real = _real_examples(labels)
    weights = _masked_lm_weights(labels, real)
    mlm_ids = labels["masked_lm_ids"]
    mlm_pred = tf.argmax(outputs["mlm_logits"], axis=-1, output_type=tf.int32)
    by_name["masked_lm_accuracy"].update_state(
        tf.cast(tf.equal(mlm_pred, mlm_ids), tf.float32), sample_weight=weights)
    sop_labels = labels["next_sentence_labels"]
    sop_pred = tf.argmax(outputs["sop_logits"], axis=-1, output_type=tf.int32)
    by_name["sentence_order_accuracy"].update_state(
        tf.cast(tf.equal(sop_pred, sop_labels), tf.float32), sample_weight=real)
    if "masked_lm_loss" in by_name:
      by_name["masked_lm_loss"].update_state(
          masked_lm_example_loss(outputs["mlm_logits"], mlm_ids), sample_weight=weights)
      by_name["sentence_order_loss"].update_state(
          sentence_order_example_loss(outputs["sop_logits"], sop_labels), sample_weight=real)

