"""RACE fine-tuning as a Task: passages -> 4-choice features -> AlbertMultipleChoice -> accuracy.

Accuracy is reported overall and for the middle- and high-school parts separately
(`eval_accuracy`, `middle_accuracy`, `high_accuracy`), as the RACE papers do.
"""

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf.config import AlbertConfig
from albert_tf.data import classifier_features, race
from albert_tf.errors import AlbertError
from albert_tf.metrics.losses import softmax_cross_entropy
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.training.classification_task import (MODE_TO_SPLIT, FineTuningData,
                                                     concat_real_examples)
from albert_tf.training.task import Task


class RaceTask(Task, FineTuningData):
  """Multiple choice over 4 options, softmax cross-entropy over the choice scores.

  Features: input_ids / input_mask / segment_ids int32 [batch, 4, seq_len].
  Labels: label_ids int32 [batch] (answer index), is_real_example float32 [batch].
  """

  name = "race"

  def __init__(self, data_dir, albert_config, max_seq_length=512, max_qa_length=128,
               cached_dir=None, spm_model_file=None, vocab_file=None, do_lower_case=True,
               init_checkpoint=None, dropout_rate=0.1, high_only=False, middle_only=False,
               tokenizer=None):
    if isinstance(albert_config, str):
      albert_config = AlbertConfig.from_json_file(albert_config)
    if max_seq_length > albert_config.max_position_embeddings:
      raise AlbertError(f"--max_seq_length={max_seq_length} exceeds the model's "
                        f"max_position_embeddings={albert_config.max_position_embeddings}")
    if not 0 < max_qa_length <= max_seq_length - 3:
      raise AlbertError(f"--max_qa_length={max_qa_length} must be in [1, max_seq_length - 3 = "
                        f"{max_seq_length - 3}]")
    if high_only and middle_only:
      raise AlbertError("--high_only and --middle_only cannot both be set")
    FineTuningData.__init__(self, data_dir, max_seq_length, cached_dir, spm_model_file,
                            vocab_file, do_lower_case, tokenizer)
    self.albert_config = albert_config
    self.check_vocabulary(albert_config)
    self.max_qa_length = max_qa_length
    self.init_checkpoint = init_checkpoint
    self.dropout_rate = dropout_rate
    self.high_only = high_only
    self.middle_only = middle_only
    self.num_choices = race.NUM_CHOICES
    self.spec_best_metric = "eval_accuracy"

  @property
  def label_list(self):
    return list(race.LABELS)

  # ------------------------------------------------------------------ data
  def read_examples(self, mode):
    return race.read_examples(self.data_dir, MODE_TO_SPLIT[mode], high_only=self.high_only,
                              middle_only=self.middle_only, process_text=self.process_text)

  def settings(self, mode):
    # The RACE tree has thousands of files: identify it by names, sizes and mtimes, cheaply.
    return {"task": "race", "max_qa_length": self.max_qa_length, "high_only": self.high_only,
            "middle_only": self.middle_only,
            "data": race.tree_fingerprint(self.data_dir, MODE_TO_SPLIT[mode])}

  def convert(self, example):
    return classifier_features.convert_race_example(example, self.max_seq_length,
                                                    self.max_qa_length, self.tokenizer)

  def features_file(self, mode, name="race"):
    return FineTuningData.features_file(self, mode, name)

  def build_inputs(self, mode, batch_size, input_context=None):
    path = self.features_file(mode)
    classifier_features.check_record_length(path, self.max_seq_length, self.num_choices)
    dataset = classifier_features.make_dataset(
        path, self.max_seq_length, mode, batch_size, num_choices=self.num_choices,
        input_context=input_context)
    if mode == "train":
      return dataset
    # Eval/predict: attach each example's level (0 middle, 1 high) for the per-level accuracy.
    levels = np.array([race.LEVELS.index(e.level) for e in self.examples(mode)], np.int32)
    level_dataset = tf.data.Dataset.from_tensor_slices(levels).batch(batch_size)
    return tf.data.Dataset.zip((dataset, level_dataset)).map(
        lambda batch, level: (batch[0], dict(batch[1], level=level)))

  # ------------------------------------------------------------------ model
  def build_model(self):
    return AlbertMultipleChoice(self.albert_config, num_choices=self.num_choices,
                                dropout_rate=self.dropout_rate)

  def initialize(self, model):
    if self.init_checkpoint:
      from albert_tf.checkpoints import init_from_checkpoint  # pylint: disable=g-import-not-at-top
      return init_from_checkpoint(model, self.init_checkpoint)
    return None

  # ------------------------------------------------------------------ loss and metrics
  def build_losses(self, labels, outputs, global_batch_size):
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(labels["label_ids"], tf.int32), logits=outputs["logits"])
    if "is_real_example" in labels:
      losses = losses * tf.cast(labels["is_real_example"], tf.float32)
    return tf.reduce_sum(losses) / tf.cast(global_batch_size, tf.float32), {}

  def build_metrics(self, training=True):
    return [tf_keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

  def update_metrics(self, metrics, labels, outputs):
    for metric in metrics:
      metric.update_state(labels["label_ids"], outputs["logits"],
                          sample_weight=labels.get("is_real_example"))

  def aggregate_outputs(self, state, features, labels, outputs):
    state = state or {"labels": [], "predictions": [], "levels": [], "weights": [], "losses": []}
    logits = np.asarray(outputs["logits"], np.float64)
    label_ids = np.asarray(labels["label_ids"]).astype(np.int64)
    state["losses"].append(softmax_cross_entropy(logits, label_ids))
    state["labels"].append(label_ids)
    state["predictions"].append(np.argmax(logits, axis=-1))
    state["levels"].append(np.asarray(labels.get("level", np.full(len(label_ids), -1))))
    state["weights"].append(np.asarray(labels.get("is_real_example", np.ones(len(label_ids)))))
    return state

  def reduce_outputs(self, state):
    if not state:
      return {}
    rows = concat_real_examples(state)
    levels = rows["levels"]
    correct = rows["labels"] == rows["predictions"]
    result = {"eval_accuracy": float(correct.mean()) if correct.size else 0.0,
              "eval_loss": float(rows["losses"].mean()) if correct.size else 0.0,
              "num_examples": int(correct.size)}
    for index, level in enumerate(race.LEVELS):
      in_level = levels == index
      if in_level.any():
        result[f"{level}_accuracy"] = float(correct[in_level].mean())
        result[f"{level}_num_examples"] = int(in_level.sum())
    return result

  def predictions_from_outputs(self, outputs):
    return np.argmax(np.asarray(outputs["logits"]), axis=-1)
