"""RACE fine-tuning as a Task: passages -> 4-choice features -> AlbertMultipleChoice -> accuracy.

Accuracy is reported overall and for the middle- and high-school parts separately
(`eval_accuracy`, `middle_accuracy`, `high_accuracy`), as the RACE papers do. Prediction
writes test_results.tsv, predictions.tsv and, since RACE test sets carry answers, the official
predict_results.txt.
"""

import dataclasses
from typing import Optional

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf.common import fileio, output_layout
from albert_tf.data import classifier_features, race
from albert_tf.errors import AlbertError
from albert_tf.export import export_multiple_choice
from albert_tf.metrics.losses import softmax_cross_entropy
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.tasks.base import Task
from albert_tf.text.multiple_choice_preprocessor import check_qa_length
from albert_tf.tasks.finetuning_data import (MODE_TO_SPLIT, SentenceTaskConfig, SentenceTaskData,
                                             write_probabilities)


@dataclasses.dataclass
class RaceConfig(SentenceTaskConfig):
  """run_race.py's task flags."""
  max_qa_length: int = 128
  high_only: bool = False
  middle_only: bool = False
  # The official --train_file / --eval_file / --predict_file: explicit feature files.
  train_file: Optional[str] = None
  eval_file: Optional[str] = None
  predict_file: Optional[str] = None

  def __post_init__(self):
    super().__post_init__()
    check_qa_length(self.max_qa_length, self.max_seq_length, prefix="--")
    if self.high_only and self.middle_only:
      raise AlbertError("--high_only and --middle_only cannot both be set")


class RaceTask(SentenceTaskData, Task):
  """Multiple choice over 4 options, softmax cross-entropy over the choice scores.

  Features: input_ids / input_mask / segment_ids int32 [batch, 4, seq_len].
  Labels: label_ids int32 [batch] (answer index), is_real_example float32 [batch].
  """

  name = "race"
  cache_name = "race"
  best_metric = "eval_accuracy"

  def __init__(self, params: RaceConfig, tokenizer=None):
    self._init_data(params, tokenizer)
    self.num_choices = race.NUM_CHOICES
    self.explicit_files.update({mode: path for mode, path in (
        ("train", params.train_file), ("eval", params.eval_file),
        ("predict", params.predict_file)) if path})

  @property
  def label_list(self):
    return list(race.LABELS)

  # ------------------------------------------------------------------ data
  def read_examples(self, mode):
    p = self.params
    return race.read_examples(p.data_dir, MODE_TO_SPLIT[mode], high_only=p.high_only,
                              middle_only=p.middle_only, process_text=self.process_text)

  def settings(self, mode):
    # The RACE tree has thousands of files: identify it by names, sizes and mtimes, cheaply.
    p = self.params
    return {"task": "race", "max_qa_length": p.max_qa_length, "high_only": p.high_only,
            "middle_only": p.middle_only,
            "data": race.tree_fingerprint(p.data_dir, MODE_TO_SPLIT[mode])}

  def convert(self, example):
    return classifier_features.convert_race_example(example, self.max_seq_length,
                                                    self.params.max_qa_length, self.tokenizer)

  def build_inputs(self, mode, batch_size, input_context=None):
    path = self.features_file(mode)
    classifier_features.check_record_length(path, self.max_seq_length, self.num_choices)
    dataset = classifier_features.make_dataset(
        path, self.max_seq_length, mode, batch_size, num_choices=self.num_choices,
        input_context=input_context, bucket_boundaries=self.params.bucket_boundaries,
        shuffle=self.params.shuffle_train_input, seed=self.params.shuffle_seed,
        **self.record_bounds())
    if mode == "train":
      return dataset
    # Eval/predict: attach each example's level (0 middle, 1 high) for the per-level accuracy.
    levels = np.array([race.LEVELS.index(e.level) for e in self.examples(mode)], np.int32)
    if "example_index" in dataset.element_spec[0]:  # bucketed: batches sorted by length
      return dataset.map(lambda features, labels: (features, dict(
          labels, level=tf.gather(levels, features["example_index"]))))
    level_dataset = tf.data.Dataset.from_tensor_slices(levels).batch(batch_size)
    return tf.data.Dataset.zip((dataset, level_dataset)).map(
        lambda batch, level: (batch[0], dict(batch[1], level=level)))

  # ------------------------------------------------------------------ model
  def build_model(self):
    return AlbertMultipleChoice(self.params.albert_config, num_choices=self.num_choices,
                                dropout_rate=self.params.dropout_rate)

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

  def labeled_rows(self, labels, outputs):
    label_ids = np.asarray(labels["label_ids"]).astype(np.int64)
    return {"labels": label_ids,
            "losses": softmax_cross_entropy(np.asarray(outputs["logits"], np.float64), label_ids),
            "levels": np.asarray(labels.get("level", np.full(len(label_ids), -1)))}

  def eval_metrics(self, rows):
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

  def write_predictions(self, output_dir, outputs):
    """test_results.tsv, predictions.tsv (`id<TAB>A..D`) and the official predict_results.txt."""
    examples, probabilities, predictions = outputs
    write_probabilities(output_layout.path(output_dir, output_layout.TEST_RESULTS), probabilities)
    fileio.write_text(output_layout.path(output_dir, output_layout.PREDICTIONS), "".join(
        ["id\tprediction\n"] + [f"{e.example_id}\t{race.LABELS[int(p)]}\n"
                                 for e, p in zip(examples, predictions)]))
    # RACE test sets carry answers: the official run_race evaluates the test set with
    # model.ckpt-best into predict_results.txt (its eval keys, then the best dev value).
    labels = np.array([e.label for e in examples])
    correct = np.asarray(predictions).astype(int) == labels
    losses = -np.log(np.maximum(probabilities[np.arange(len(labels)), labels], 1e-30))
    results = {"eval_accuracy": float(correct.mean()) if correct.size else 0.0,
               "eval_loss": float(losses.mean()) if losses.size else 0.0}
    best = _read_best_value(output_dir)
    fileio.write_text(output_layout.path(output_dir, output_layout.PREDICT_RESULTS), "".join(
        ["***** Predict results *****\n"] + [f"{k} = {v!r}\n" for k, v in sorted(results.items())]
        + [f"best = {best!r}\n" if best is not None else ""]))
    return {"predictions": len(examples), "predict_results": results}

  # ------------------------------------------------------------------ export
  def export(self, model, export_dir, precision="fp32"):
    return export_multiple_choice(model, export_dir, max_seq_length=self.max_seq_length,
                                  max_qa_length=self.params.max_qa_length,
                                  spm_model_file=self.params.spm_model_file,
                                  do_lower_case=self.params.do_lower_case, precision=precision,
                                  vocab_file=self.params.vocab_file)


_read_best_value = output_layout.read_best_trial_value  # best_trial.txt's best dev value
