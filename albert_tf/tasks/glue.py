"""GLUE fine-tuning as a Task: GLUE files -> cached features -> AlbertClassifier -> GLUE metrics.

What run_classifier.py writes besides checkpoints: eval_results.txt (the runner), test_results.tsv
(class probabilities, official) and the GLUE submission file (`<TASK>.tsv`), and for
--export_dir a TF Serving SavedModel with raw-text, token-id and tf.Example signatures.

The same task fine-tunes on the user's own files: its spec is then a
`custom_task.CustomTaskSpec` built from run_classifier's flags instead of a GLUE task's
(files, labels, metrics and the predictions file come from the spec).
"""

import dataclasses
import math
from typing import Optional

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf.common import output_layout
from albert_tf.data import classifier_features, glue
from albert_tf.errors import AlbertError
from albert_tf.export import export_classifier
from albert_tf.metrics.losses import softmax_cross_entropy
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.tasks.base import Task
from albert_tf.tasks.finetuning_data import (MODE_TO_SPLIT, SentenceTaskConfig, SentenceTaskData,
                                             write_probabilities)


@dataclasses.dataclass
class GlueConfig(SentenceTaskConfig):
  """run_classifier.py's task: which GLUE task (or a spec of the user's own data), and the
  serving threshold to export."""
  task_name: str = ""
  threshold_to_export: float = float("nan")  # official flag; NaN: no `threshold` output
  # The task's spec: None for the GLUE task `task_name`, else e.g. a custom_task.CustomTaskSpec.
  spec: Optional[object] = None

  def __post_init__(self):
    if self.spec is None:
      self.spec = glue.get_task(self.task_name)  # an unknown task is the first thing to report
    super().__post_init__()


class ClassificationTask(SentenceTaskData, Task):
  """One GLUE task (or the user's own): classification with softmax cross-entropy, or
  regression (STS-B) with squared error.

  Features: input_ids / input_mask / segment_ids int32 [batch, seq_len].
  Labels: label_ids (int32, float32 for STS-B) [batch], is_real_example float32 [batch].
  Model outputs: AlbertClassifier's logits / probabilities.
  """

  cache_name = None  # the GLUE task's name (set per instance)

  def __init__(self, params: GlueConfig, tokenizer=None):
    self.spec = params.spec
    if self.spec.problem_type not in ("single_label_classification", "regression"):
      raise AlbertError(f"{self.spec.name}: {self.spec.problem_type} is not supported yet "
                        "(single-label classification and regression are)")
    self.cache_name = self.spec.name
    self.name = f"{self.spec.kind}/{self.spec.name}"
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
    return self.spec.read_examples(self.params.data_dir, MODE_TO_SPLIT[mode],
                                   process_text=self.process_text)

  def settings(self, mode):
    return self.spec.cache_settings(self.params.data_dir, MODE_TO_SPLIT[mode])

  def convert(self, example):
    return classifier_features.convert_classifier_example(
        example, self.label_list, self.max_seq_length, self.tokenizer)

  def build_inputs(self, mode, batch_size, input_context=None):
    if mode == "train":
      self.spec.record_labels()  # the head is trained for this label order from now on
    path = self.features_file(mode)
    classifier_features.check_record_length(path, self.max_seq_length)
    return classifier_features.make_dataset(
        path, self.max_seq_length, mode, batch_size, is_regression=self.is_regression,
        input_context=input_context, bucket_boundaries=self.params.bucket_boundaries,
        shuffle=self.params.shuffle_train_input, **self.record_bounds())

  # ------------------------------------------------------------------ model
  def build_model(self):
    return AlbertClassifier(self.params.albert_config, num_classes=self.spec.num_labels,
                            is_regression=self.is_regression,
                            dropout_rate=self.params.dropout_rate)

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

  def labeled_rows(self, labels, outputs):
    logits = np.asarray(outputs["logits"])
    label_ids = np.asarray(labels["label_ids"])
    if self.is_regression:
      losses = (logits[:, 0] - label_ids) ** 2
    else:
      losses = softmax_cross_entropy(logits, label_ids)
    return {"labels": label_ids, "losses": losses}

  def eval_metrics(self, rows):
    result = self.spec.metrics(rows["labels"], rows["predictions"])
    losses = rows["losses"]
    result["eval_loss"] = float(losses.mean()) if losses.size else 0.0
    result["num_examples"] = int(losses.size)
    return result

  # ------------------------------------------------------------------ prediction output
  def predictions_from_outputs(self, outputs):
    """Class indices (or scores for regression) for a batch of model outputs (numpy)."""
    logits = np.asarray(outputs["logits"])
    return logits[:, 0] if self.is_regression else np.argmax(logits, axis=-1)

  def write_predictions(self, output_dir, outputs):
    """test_results.tsv (probabilities) as the official, and the spec's prediction file (the
    GLUE submission file; predictions.tsv for the user's own data)."""
    examples, probabilities, predictions = outputs
    write_probabilities(output_layout.path(output_dir, output_layout.TEST_RESULTS), probabilities)
    summary = self.spec.write_predictions(output_dir, examples, probabilities, predictions)
    return {"predictions": len(examples), **summary}

  # ------------------------------------------------------------------ export
  def export(self, model, export_dir, precision="fp32"):
    threshold = self.params.threshold_to_export
    return export_classifier(model, export_dir, label_list=self.label_list,
                             max_seq_length=self.max_seq_length,
                             spm_model_file=self.params.spm_model_file,
                             do_lower_case=self.params.do_lower_case, task_name=self.spec.name,
                             text_pair=self.spec.text_pair, precision=precision,
                             threshold=None if math.isnan(threshold) else threshold)
