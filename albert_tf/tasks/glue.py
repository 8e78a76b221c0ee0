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
from albert_tf.heads.early_exit import weighted_layer_losses
from albert_tf.metrics.losses import softmax_cross_entropy
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.tasks.base import Task
from albert_tf.tasks.finetuning_data import (MODE_TO_SPLIT, SentenceTaskConfig, SentenceTaskData,
                                             in_example_order, write_probabilities)


@dataclasses.dataclass
class GlueConfig(SentenceTaskConfig):
  """run_classifier.py's task: which GLUE task (or a spec of the user's own data), and the
  serving threshold to export."""
  task_name: str = ""
  threshold_to_export: float = float("nan")  # official flag; NaN: no `threshold` output
  # The task's spec: None for the GLUE task `task_name`, else e.g. a custom_task.CustomTaskSpec.
  spec: Optional[object] = None
  # Early exit (PABEE, heads/early_exit.py): None, or "patience" to train internal classifiers
  # with the layer-weighted loss and, with early_exit_patience, stop early when evaluating,
  # predicting and in the export; early_exit_threshold: a regression score's "unchanged".
  early_exit: Optional[str] = None
  early_exit_patience: Optional[int] = None
  early_exit_threshold: float = 0.1

  def __post_init__(self):
    if self.spec is None:
      self.spec = glue.get_task(self.task_name)  # an unknown task is the first thing to report
    super().__post_init__()
    if self.early_exit_patience is not None and not self.early_exit:
      raise AlbertError("--early_exit_patience needs --early_exit=patience")
    if self.early_exit_patience is not None and self.early_exit_patience < 1:
      raise AlbertError(f"--early_exit_patience={self.early_exit_patience} is invalid: "
                        "expected >= 1")


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
        shuffle=self.params.shuffle_train_input, seed=self.params.shuffle_seed,
        **self.record_bounds())

  # ------------------------------------------------------------------ model
  def build_model(self):
    params = self.params
    return AlbertClassifier(params.albert_config, num_classes=self.spec.num_labels,
                            is_regression=self.is_regression, dropout_rate=params.dropout_rate,
                            early_exit=params.early_exit, patience=params.early_exit_patience,
                            regression_threshold=params.early_exit_threshold)

  # ------------------------------------------------------------------ loss and metrics
  def per_example_loss(self, labels, outputs):
    """float32 [batch]: softmax cross-entropy, or squared error for regression (official).

    With early exit's layer_logits [batch, L, classes] (training): PABEE's weighted average of
    every layer's loss, layer l weighing l / (1 + ... + L)."""
    layer_logits = outputs.get("layer_logits")
    if layer_logits is None:
      return self._loss(labels["label_ids"], outputs["logits"])
    return weighted_layer_losses(self._loss, labels["label_ids"], layer_logits)

  def _loss(self, label_ids, logits):
    """[n] losses of [n] labels under [n, classes] logits."""
    if self.is_regression:
      return tf.square(logits[:, 0] - tf.cast(label_ids, tf.float32))
    return tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(label_ids, tf.int32), logits=logits)

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
    if "exit_layer" in rows:  # early exit: the mean 1-based layer the answers came from
      result["eval_mean_exit_layer"] = float(rows["exit_layer"].mean()) if losses.size else 0.0
    result["num_examples"] = int(losses.size)
    return result

  # ------------------------------------------------------------------ prediction output
  def predictions_from_outputs(self, outputs):
    """Class indices (or scores for regression) for a batch of model outputs (numpy)."""
    logits = np.asarray(outputs["logits"])
    return logits[:, 0] if self.is_regression else np.argmax(logits, axis=-1)

  def reduce_outputs(self, state, mode):
    """As SentenceTaskData's; prediction rows also carry each example's exit layer (early
    exit; else None)."""
    metrics, outputs = super().reduce_outputs(state, mode)
    if mode == "predict":
      ordered = in_example_order(state) or {}
      exit_layers = (np.concatenate(ordered["exit_layer"]) if "exit_layer" in ordered else None)
      outputs = outputs + (exit_layers,)
    return metrics, outputs

  def write_predictions(self, output_dir, outputs):
    """test_results.tsv (probabilities) as the official, and the spec's prediction file (the
    GLUE submission file; predictions.tsv for the user's own data). Early exit: the exit layer
    of each example too (exit_layers.tsv beside a GLUE submission file, which keeps the official
    layout; a column of predictions.tsv for the user's own data)."""
    examples, probabilities, predictions, exit_layers = outputs
    write_probabilities(output_layout.path(output_dir, output_layout.TEST_RESULTS), probabilities)
    extra = {} if exit_layers is None else {"exit_layers": exit_layers}
    summary = self.spec.write_predictions(output_dir, examples, probabilities, predictions,
                                          **extra)
    if exit_layers is not None:
      summary = dict(summary, mean_exit_layer=float(np.mean(exit_layers)) if len(exit_layers)
                     else 0.0)
    return {"predictions": len(examples), **summary}

  # ------------------------------------------------------------------ export
  def export(self, model, export_dir, precision="fp32"):
    threshold = self.params.threshold_to_export
    return export_classifier(model, export_dir, label_list=self.label_list,
                             max_seq_length=self.max_seq_length,
                             spm_model_file=self.params.spm_model_file,
                             do_lower_case=self.params.do_lower_case, task_name=self.spec.name,
                             text_pair=self.spec.text_pair, precision=precision,
                             threshold=None if math.isnan(threshold) else threshold,
                             vocab_file=self.params.vocab_file)
