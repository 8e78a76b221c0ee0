"""GLUE fine-tuning as a Task: GLUE files -> cached features -> AlbertClassifier -> GLUE metrics.

What run_classifier.py writes besides checkpoints: eval_results.txt (the runner), test_results.tsv
(class probabilities, official) and the GLUE submission file (`<TASK>.tsv`), and for
--export_dir a TF Serving SavedModel with raw-text, token-id and tf.Example signatures.
"""

import dataclasses
import math
import os

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf import fileio
from albert_tf.data import classifier_features, glue
from albert_tf.metrics import glue_metrics
from albert_tf.metrics.losses import softmax_cross_entropy
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.tasks.base import Task
from albert_tf.tasks.finetuning_data import (MODE_TO_SPLIT, SentenceTaskConfig, SentenceTaskData,
                                             concat_real_examples, write_probabilities)


@dataclasses.dataclass
class GlueConfig(SentenceTaskConfig):
  """run_classifier.py's task: which GLUE task, and the serving threshold to export."""
  task_name: str = ""
  threshold_to_export: float = float("nan")  # official flag; NaN: no `threshold` output

  def __post_init__(self):
    self.spec = glue.get_task(self.task_name)  # an unknown task is the first thing to report
    super().__post_init__()


class ClassificationTask(SentenceTaskData, Task):
  """One GLUE task: classification with softmax cross-entropy, or STS-B regression (MSE).

  Features: input_ids / input_mask / segment_ids int32 [batch, seq_len].
  Labels: label_ids (int32, float32 for STS-B) [batch], is_real_example float32 [batch].
  Model outputs: AlbertClassifier's logits / probabilities.
  """

  cache_name = None  # the GLUE task's name (set per instance)

  def __init__(self, params: GlueConfig, tokenizer=None):
    self.spec = params.spec
    self.cache_name = self.spec.name
    self.name = f"glue/{self.spec.name}"
    self.best_metric = self.spec.best_metric
    self._init_data(params, tokenizer)

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
    return {"task": self.spec.name, "data_file": fileio.file_fingerprint(
        glue.split_path(self.data_dir, self.spec, split))}

  def convert(self, example):
    return classifier_features.convert_classifier_example(
        example, self.label_list, self.max_seq_length, self.tokenizer)

  def build_inputs(self, mode, batch_size, input_context=None):
    path = self.features_file(mode)
    classifier_features.check_record_length(path, self.max_seq_length)
    return classifier_features.make_dataset(
        path, self.max_seq_length, mode, batch_size, is_regression=self.is_regression,
        input_context=input_context, **self.record_bounds())

  # ------------------------------------------------------------------ model
  def build_model(self):
    return AlbertClassifier(self.albert_config, num_classes=self.spec.num_labels,
                            is_regression=self.is_regression, dropout_rate=self.dropout_rate)

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

  def write_predictions(self, output_dir, state):
    """test_results.tsv (probabilities) and the GLUE submission file, as the official."""
    examples, probabilities, predictions = self.prediction_rows(state)
    write_probabilities(os.path.join(output_dir, "test_results.tsv"), probabilities)
    for name in ("submit_results.tsv", self.spec.submission_file):
      glue.write_submission(os.path.join(output_dir, name), self.spec, examples, predictions)
    return {"predictions": len(examples)}

  # ------------------------------------------------------------------ export
  def export(self, model, export_dir, precision="fp32"):
    from albert_tf.export import export_classifier  # pylint: disable=g-import-not-at-top
    threshold = self.params.threshold_to_export
    return export_classifier(model, export_dir, label_list=self.label_list,
                             max_seq_length=self.max_seq_length,
                             spm_model_file=self.spm_model_file,
                             do_lower_case=self.do_lower_case, task_name=self.spec.name,
                             text_pair=self.spec.text_pair, precision=precision,
                             threshold=None if math.isnan(threshold) else threshold)
