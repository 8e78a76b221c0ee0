"""What the GLUE and RACE tasks share: their config, tokenizer, feature cache and prediction rows.

Both read text files of the official layout, convert each example into fixed-length features
cached as TFRecords beside the run (the official `<cached_dir>/<task>_{train,eval,predict}.tf_record`),
and predict one class per example (test_results.tsv: one line of class probabilities each).
"""

import dataclasses
import os
from typing import Optional

import numpy as np

from albert_tf import fileio
from albert_tf.config import AlbertConfig
from albert_tf.data import classifier_features
from albert_tf.errors import AlbertError

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
  dropout_prob: float = 0.1

  def __post_init__(self):
    if isinstance(self.albert_config, str):
      self.albert_config = AlbertConfig.from_json_file(self.albert_config)
    self.albert_config.check_sequence_length(self.max_seq_length)
    if self.max_seq_length < 3:
      raise AlbertError(f"--max_seq_length={self.max_seq_length} is too small; expected >= 3")


def make_tokenizer(spm_model_file=None, vocab_file=None, do_lower_case=True):
  """The official `fine_tuning_utils.create_vocab`: SentencePiece when given, else WordPiece."""
  from albert_tf import tokenization  # pylint: disable=g-import-not-at-top
  if not spm_model_file and not vocab_file:
    raise AlbertError("one of --spm_model_file or --vocab_file is required")
  return tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case,
                                    spm_model_file=spm_model_file)


def concat_real_examples(state):
  """Concatenates each per-batch list of an eval state and keeps the real examples.

  `state["weights"]` holds is_real_example per batch (0 for the padding examples that fill the
  last batch); every other list is filtered by it. Returns {key: array}.
  """
  real = np.concatenate(state["weights"]) > 0
  return {key: np.concatenate(values)[real] for key, values in state.items() if key != "weights"}


class SentenceTaskData:
  """Tokenizer, examples, the feature cache and prediction rows of a GLUE or RACE task.

  Subclasses set `self.params` (a SentenceTaskConfig) and implement `read_examples(mode)`,
  `convert(example)`, `settings(mode)` and `predictions_from_outputs(outputs)`.
  """

  # Which cached file each mode writes: <cached_dir>/<name>_{train,eval,predict}.tf_record.
  cache_name = None

  def _init_data(self, params, tokenizer=None):
    self.params = params
    self.albert_config = params.albert_config
    self.data_dir = params.data_dir
    self.max_seq_length = params.max_seq_length
    self.cached_dir = params.cached_dir
    self.spm_model_file = params.spm_model_file
    self.vocab_file = params.vocab_file
    self.do_lower_case = params.do_lower_case
    self.init_checkpoint = params.init_checkpoint
    self.dropout_rate = params.dropout_prob
    self._tokenizer = tokenizer
    self._examples = {}
    # mode -> explicit features path (run_race's --train_file/--eval_file/--predict_file).
    self.explicit_files = {}
    if tokenizer is None:
      # Checked up front: a cached feature file would otherwise skip the tokenizer.
      from albert_tf.tokenization import check_vocabulary_fits  # pylint: disable=g-import-not-at-top
      check_vocabulary_fits(self.tokenizer, self.albert_config)

  @property
  def tokenizer(self):
    if self._tokenizer is None:
      self._tokenizer = make_tokenizer(self.spm_model_file, self.vocab_file, self.do_lower_case)
    return self._tokenizer

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
    return {"max_seq_length": self.max_seq_length, "do_lower_case": self.do_lower_case,
            "spm_model_file": fileio.file_fingerprint(self.spm_model_file),
            "vocab_file": fileio.file_fingerprint(self.vocab_file),
            "mode": mode, **self.settings(mode)}

  def features_path(self, mode):
    """Where the features TFRecord of `mode` is (or will be) cached."""
    suffix = {"train": "train", "eval": "eval", "predict": "predict"}[mode]
    return self.explicit_files.get(mode) or os.path.join(
        self.cached_dir, f"{self.cache_name}_{suffix}.tf_record")

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
    return {"vocab_size": self.albert_config.vocab_size,
            "type_vocab_size": self.albert_config.type_vocab_size,
            "num_labels": len(self.label_list) or None}

  def initialize(self, model):
    if self.init_checkpoint:
      from albert_tf.checkpoints import init_from_checkpoint  # pylint: disable=g-import-not-at-top
      return init_from_checkpoint(model, self.init_checkpoint)
    return None

  # ------------------------------------------------------------------ prediction rows
  def aggregate_predictions(self, state, features, outputs):
    state = state or {"probabilities": [], "predictions": []}
    state["probabilities"].append(np.asarray(outputs["probabilities"]))
    state["predictions"].append(self.predictions_from_outputs(outputs))
    return state

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
