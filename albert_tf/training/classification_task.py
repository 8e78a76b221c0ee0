"""GLUE fine-tuning as a Task: GLUE files -> cached features -> AlbertClassifier -> GLUE metrics."""

import os

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf.config import AlbertConfig
from albert_tf.data import classifier_features, glue
from albert_tf.errors import AlbertError
from albert_tf.metrics import glue_metrics
from albert_tf.metrics.losses import softmax_cross_entropy
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.training.task import Task

# Which GLUE split each Task mode reads.
MODE_TO_SPLIT = {"train": "train", "eval": "dev", "predict": "test"}
# Official cached file names (<cached_dir>/<task>_train.tf_record, <task>_eval.tf_record).
MODE_TO_SUFFIX = {"train": "train", "eval": "eval", "predict": "predict"}


def make_tokenizer(spm_model_file=None, vocab_file=None, do_lower_case=True):
  """The official `fine_tuning_utils.create_vocab`: SentencePiece when given, else WordPiece."""
  from albert_tf import tokenization  # pylint: disable=g-import-not-at-top
  if not spm_model_file and not vocab_file:
    raise AlbertError("one of --spm_model_file or --vocab_file is required")
  return tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case,
                                    spm_model_file=spm_model_file)


class FineTuningData:
  """Shared by the GLUE and RACE tasks: tokenizer, text processing and the feature cache.

  Subclasses implement `read_examples(mode)`, `convert(example)` and `settings()`.
  """

  def __init__(self, data_dir, max_seq_length, cached_dir, spm_model_file=None, vocab_file=None,
               do_lower_case=True, tokenizer=None):
    self.data_dir = data_dir
    self.max_seq_length = max_seq_length
    self.cached_dir = cached_dir
    self.spm_model_file = spm_model_file
    self.vocab_file = vocab_file
    self.do_lower_case = do_lower_case
    self._tokenizer = tokenizer
    self._examples = {}
    # mode -> explicit features path (run_race's --train_file/--eval_file/--predict_file).
    self.explicit_files = {}

  @property
  def tokenizer(self):
    if self._tokenizer is None:
      self._tokenizer = make_tokenizer(self.spm_model_file, self.vocab_file, self.do_lower_case)
    return self._tokenizer

  def check_vocabulary(self, config):
    """Refuses a vocabulary larger than the model's (checked up front: cached features skip
    the tokenizer)."""
    if self.spm_model_file or self.vocab_file:
      from albert_tf.tokenization import check_vocabulary_fits  # pylint: disable=g-import-not-at-top
      check_vocabulary_fits(self.tokenizer, config)

  @property
  def process_text(self):
    # The official processors run preprocess_text here because the official FullTokenizer does
    # not; ours does it inside tokenize() (and preprocessing twice changes nothing), so the
    # readers keep the raw text.
    return None

  def examples(self, mode):
    """The examples of `mode` ("train", "eval", "predict"), read once and kept."""
    if mode not in self._examples:
      self._examples[mode] = self.read_examples(mode)
    return self._examples[mode]

  def cache_settings(self, mode):
    return {"max_seq_length": self.max_seq_length, "do_lower_case": self.do_lower_case,
            "spm_model_file": classifier_features.file_fingerprint(self.spm_model_file),
            "vocab_file": classifier_features.file_fingerprint(self.vocab_file),
            "mode": mode, **self.settings(mode)}

  def features_file(self, mode, name):
    """Builds (or reuses) the features TFRecord for `mode`; returns its path."""
    path = self.explicit_files.get(mode) or os.path.join(
        self.cached_dir, f"{name}_{MODE_TO_SUFFIX[mode]}.tf_record")
    return classifier_features.cached_features(
        path, self.cache_settings(mode),
        lambda: (self.convert(example) for example in self.examples(mode)))


def concat_real_examples(state):
  """Concatenates each per-batch list of an eval state and keeps the real examples.

  `state["weights"]` holds is_real_example per batch (0 for the padding examples that fill the
  last batch); every other list is filtered by it. Returns {key: array}.
  """
  real = np.concatenate(state["weights"]) > 0
  return {key: np.concatenate(values)[real] for key, values in state.items() if key != "weights"}


class ClassificationTask(Task, FineTuningData):
  """One GLUE task: classification with softmax cross-entropy, or STS-B regression (MSE).

  Features: input_ids / input_mask / segment_ids int32 [batch, seq_len].
  Labels: label_ids (int32, float32 for STS-B) [batch], is_real_example float32 [batch].
  Model outputs: AlbertClassifier's logits / probabilities.
  """

  def __init__(self, task_name, data_dir, albert_config, max_seq_length=512, cached_dir=None,
               spm_model_file=None, vocab_file=None, do_lower_case=True, init_checkpoint=None,
               dropout_rate=0.1, tokenizer=None):
    self.spec = glue.get_task(task_name)
    if isinstance(albert_config, str):
      albert_config = AlbertConfig.from_json_file(albert_config)
    if max_seq_length > albert_config.max_position_embeddings:
      raise AlbertError(f"--max_seq_length={max_seq_length} exceeds the model's "
                        f"max_position_embeddings={albert_config.max_position_embeddings}")
    if max_seq_length < 3:
      raise AlbertError(f"--max_seq_length={max_seq_length} is too small; expected >= 3")
    FineTuningData.__init__(self, data_dir, max_seq_length, cached_dir, spm_model_file,
                            vocab_file, do_lower_case, tokenizer)
    self.name = f"glue/{self.spec.name}"
    self.albert_config = albert_config
    self.check_vocabulary(albert_config)
    self.init_checkpoint = init_checkpoint
    self.dropout_rate = dropout_rate

  # ------------------------------------------------------------------ data
  @property
  def label_list(self):
    return list(self.spec.labels)

  @property
  def is_regression(self):
    return self.spec.is_regression

  def read_examples(self, mode):
    return glue.read_examples(self.data_dir, self.spec, MODE_TO_SPLIT[mode],
                              process_text=self.process_text)

  def settings(self, mode):
    split = MODE_TO_SPLIT[mode]
    return {"task": self.spec.name, "data_file": classifier_features.file_fingerprint(
        glue.split_path(self.data_dir, self.spec, split))}

  def convert(self, example):
    return classifier_features.convert_classifier_example(
        example, self.label_list, self.max_seq_length, self.tokenizer)

  def build_inputs(self, mode, batch_size, input_context=None):
    path = self.features_file(mode, self.spec.name)
    classifier_features.check_record_length(path, self.max_seq_length)
    return classifier_features.make_dataset(
        path, self.max_seq_length, mode, batch_size, is_regression=self.is_regression,
        input_context=input_context)

  # ------------------------------------------------------------------ model
  def build_model(self):
    return AlbertClassifier(self.albert_config, num_classes=self.spec.num_labels,
                            is_regression=self.is_regression, dropout_rate=self.dropout_rate)

  def initialize(self, model):
    if self.init_checkpoint:
      from albert_tf.checkpoints import init_from_checkpoint  # pylint: disable=g-import-not-at-top
      return init_from_checkpoint(model, self.init_checkpoint)
    return None

  # ------------------------------------------------------------------ loss and metrics
  def per_example_loss(self, labels, outputs):
    """float32 [batch]: softmax cross-entropy, or squared error for regression (official)."""
    logits = outputs["logits"]
    if self.is_regression:
      return tf.square(logits[:, 0] - tf.cast(labels["label_ids"], tf.float32))
    return tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(labels["label_ids"], tf.int32), logits=logits)

  def build_losses(self, labels, outputs, global_batch_size):
    weights = labels.get("is_real_example")
    losses = self.per_example_loss(labels, outputs)
    if weights is not None:
      losses = losses * tf.cast(weights, tf.float32)
    loss = tf.reduce_sum(losses) / tf.cast(global_batch_size, tf.float32)
    return loss, {}

  def build_metrics(self, training=True):
    if self.is_regression:
      return [tf_keras.metrics.MeanSquaredError(name="MSE")]
    return [tf_keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

  def update_metrics(self, metrics, labels, outputs):
    weights = labels.get("is_real_example")
    for metric in metrics:
      if self.is_regression:
        # [batch, 1] both: Keras' MSE averages over the last axis, so [batch] values would
        # collapse to one number per batch (and no longer line up with the [batch] weights).
        metric.update_state(tf.cast(labels["label_ids"], tf.float32)[:, None],
                            outputs["logits"][:, :1], sample_weight=weights)
      else:
        metric.update_state(labels["label_ids"], outputs["logits"], sample_weight=weights)

  def aggregate_outputs(self, state, features, labels, outputs):
    state = state or {"labels": [], "predictions": [], "weights": [], "losses": []}
    logits = np.asarray(outputs["logits"])
    label_ids = np.asarray(labels["label_ids"])
    if self.is_regression:
      predictions = logits[:, 0]
      losses = (predictions - label_ids) ** 2
    else:
      predictions = np.argmax(logits, axis=-1)
      losses = softmax_cross_entropy(logits, label_ids)
    state["labels"].append(label_ids)
    state["predictions"].append(predictions)
    state["losses"].append(losses)
    state["weights"].append(np.asarray(labels.get("is_real_example", np.ones_like(losses))))
    return state

  def reduce_outputs(self, state):
    if not state:
      return {}
    rows = concat_real_examples(state)
    result = glue_metrics.task_metrics(self.spec.name, rows["labels"], rows["predictions"])
    losses = rows["losses"]
    result["eval_loss"] = float(losses.mean()) if losses.size else 0.0
    result["num_examples"] = int(losses.size)
    return result

  # ------------------------------------------------------------------ prediction output
  def predictions_from_outputs(self, outputs):
    """Class indices (or scores for regression) for a batch of model outputs (numpy)."""
    logits = np.asarray(outputs["logits"])
    return logits[:, 0] if self.is_regression else np.argmax(logits, axis=-1)
