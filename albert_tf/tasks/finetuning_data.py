"""What the GLUE and RACE tasks share: their config, tokenizer, feature cache and prediction rows.

Both read text files of the official layout, convert each example into fixed-length features
cached as TFRecords beside the run (the official `<cached_dir>/<task>_{train,eval,predict}.tf_record`),
and predict one class per example (test_results.tsv: one line of class probabilities each).
"""

import collections
import dataclasses
import os
from typing import Optional, Tuple

import numpy as np

from albert_tf.common import fileio
from albert_tf.checkpoints.init import init_from_checkpoint
from albert_tf.config import AlbertConfig
from albert_tf.data import classifier_features
from albert_tf.errors import AlbertError
from albert_tf.text.tokenization import make_tokenizer

# Which split each Task mode reads.
MODE_TO_SPLIT = {"train": "train", "eval": "dev", "predict": "test"}


@dataclasses.dataclass
class SentenceTaskConfig:
  """The official flags a GLUE or RACE task needs (the model's config included)."""
  albert_config: AlbertConfig
  data_dir: str
  max_seq_length: int = 512
  cached_dir: Optional[str] = None  # where the feature TFRecords go (the scripts: --output_dir)
  spm_model_file: Optional[str] = None
  vocab_file: Optional[str] = None
  do_lower_case: bool = True
  init_checkpoint: Optional[str] = None
  dropout_rate: float = 0.1
  # Lengths each batch is padded to (`albert_tf.data.bucketing`); None: --max_seq_length.
  bucket_boundaries: Optional[Tuple[int, ...]] = None
  # False: training features in file order (--shuffle_train_input=false), to reproduce a run.
  shuffle_train_input: bool = True
  # The training shuffle's seed (--seed; None: random): a resumed run skips the batches already
  # trained on, so the same seed gives it the same order.
  shuffle_seed: Optional[int] = None

  def __post_init__(self):
    if isinstance(self.albert_config, str):
      self.albert_config = AlbertConfig.from_json_file(self.albert_config)
    self.albert_config.check_sequence_length(self.max_seq_length)
    if self.max_seq_length < 3:
      raise AlbertError(f"--max_seq_length={self.max_seq_length} is too small; expected >= 3")


def in_example_order(state):
  """An eval/predict state whose batches came sorted by length (bucketing: each batch's
  features carried `example_index`) -> the same state as one batch in example order."""
  if not state or "example_index" not in state:
    return state
  order = np.argsort(np.concatenate(state["example_index"]), kind="stable")
  return {key: [np.concatenate(values)[order]] for key, values in state.items()
          if key != "example_index"}


def concat_real_examples(state):
  """Concatenates each per-batch list of an eval state and keeps the real examples.

  `state["weights"]` holds is_real_example per batch (0 for the padding examples that fill the
  last batch); every other list is filtered by it. Returns {key: array}.
  """
  real = np.concatenate(state["weights"]) > 0
  return {key: np.concatenate(values)[real] for key, values in state.items() if key != "weights"}


class SentenceTaskData:
  """Tokenizer, examples, the feature cache and prediction rows of a GLUE or RACE task.

  Subclasses call `_init_data(params)` (a SentenceTaskConfig) and implement
  `read_examples(mode)`, `convert(example)`, `settings(mode)`, `predictions_from_outputs(outputs)`
  and, for evaluation, `labeled_rows(labels, outputs)` (per-example arrays of a batch) and
  `eval_metrics(rows)` (those arrays over the real examples -> metrics).
  """

  # Which cached file each mode writes: <cached_dir>/<name>_{train,eval,predict}.tf_record.
  cache_name = None

  def _init_data(self, params, tokenizer=None):
    self.params = params
    # Made (and checked against the config) up front: a cached feature file would otherwise
    # skip the tokenizer.
    self.tokenizer = tokenizer or make_tokenizer(
        params.spm_model_file, params.vocab_file, params.do_lower_case, params.albert_config)
    self._examples = {}
    # mode -> explicit features path (run_race's --train_file/--eval_file/--predict_file).
    self.explicit_files = {}

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

  def num_train_examples(self):
    return len(self.examples("train"))

  def cache_settings(self, mode):
    return {"max_seq_length": self.max_seq_length, "do_lower_case": self.params.do_lower_case,
            "spm_model_file": fileio.file_fingerprint(self.params.spm_model_file),
            "vocab_file": fileio.file_fingerprint(self.params.vocab_file),
            "mode": mode, **self.settings(mode)}

  def features_path(self, mode):
    """Where the features TFRecord of `mode` is (or will be) cached."""
    suffix = {"train": "train", "eval": "eval", "predict": "predict"}[mode]
    return self.explicit_files.get(mode) or os.path.join(
        self.params.cached_dir, f"{self.cache_name}_{suffix}.tf_record")

  def input_files(self, mode):
    return [self.features_path(mode)]

  def features_file(self, mode):
    """Builds (or reuses, once checked) the features TFRecord for `mode`; returns its path."""
    return classifier_features.cached_features(
        self.features_path(mode), self.cache_settings(mode),
        lambda: (self.convert(example) for example in self.examples(mode)),
        count_examples=lambda: len(self.examples(mode)))

  def record_bounds(self):
    """What bounds the records' ids and labels: the model's vocabulary and segment types, the
    task's classes (for `classifier_features.make_dataset`)."""
    return {"vocab_size": self.params.albert_config.vocab_size,
            "type_vocab_size": self.params.albert_config.type_vocab_size,
            "num_labels": len(self.label_list) or None}

  def initialize(self, model):
    if self.init_checkpoint:
      # The labels put an HF classifier head's rows (named by its id2label) in the task's order.
      return init_from_checkpoint(model, self.init_checkpoint,
                                  label_list=self.label_list or None)
    return None

  # ------------------------------------------------------------------ evaluation and prediction
  def aggregate_outputs(self, state, features, labels, outputs):
    """Per batch: class probabilities and predictions; when evaluating (labels given) also the
    subclass's `labeled_rows` and is_real_example (0 for the padding that fills a last batch)."""
    state = state or collections.defaultdict(list)
    state["probabilities"].append(np.asarray(outputs["probabilities"]))
    state["predictions"].append(self.predictions_from_outputs(outputs))
    if "exit_layer" in outputs:  # early exit (classifiers): each answer's layer
      state["exit_layer"].append(np.asarray(outputs["exit_layer"]))
    if features is not None and "example_index" in features:
      state["example_index"].append(np.asarray(features["example_index"]))
    if labels is not None:
      for key, value in self.labeled_rows(labels, outputs).items():
        state[key].append(value)
      count = len(state["predictions"][-1])
      state["weights"].append(np.asarray(labels.get("is_real_example", np.ones(count))))
    return state

  def reduce_outputs(self, state, mode):
    """eval: the task's metrics over the real examples (no outputs); predict: the prediction
    rows `write_predictions` writes."""
    state = in_example_order(state)
    if mode == "predict":
      return {}, self.prediction_rows(state)
    if not state:
      return {}, None
    return self.eval_metrics(concat_real_examples(state)), None

  def prediction_rows(self, state):
    """(examples, probabilities [N, C], predictions [N]) for exactly the N test examples."""
    examples = self.examples("predict")
    probabilities = np.concatenate(state["probabilities"]) if state else np.zeros([0, 1])
    predictions = np.concatenate(state["predictions"]) if state else np.zeros([0])
    if len(predictions) != len(examples):
      raise AlbertError(f"prediction returned {len(predictions)} results for "
                        f"{len(examples)} test examples")
    return examples, probabilities, predictions


def write_probabilities(path, probabilities):
  """test_results.tsv as the official: one line of tab-separated class probabilities each."""
  fileio.write_text(path, "".join(
      "\t".join(repr(float(p)) for p in np.atleast_1d(row)) + "\n" for row in probabilities))
