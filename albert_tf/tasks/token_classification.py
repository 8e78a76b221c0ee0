"""Token classification (NER) as a Task: tagged files -> windows -> AlbertTokenClassifier ->
seqeval's entity-level precision / recall / F1.

What run_ner.py writes besides checkpoints: eval_results.txt (the runner: seqeval's overall and
per-type numbers of every checkpoint, the best by eval_f1), tag_list.json (the tags in the head's
order and the scheme, so that later runs on the output dir read the same), and for --do_predict
the test file written back in its own format with a predicted tag per word
(test_predictions.<ext>).

The loss of a window is the mean cross-entropy of the pieces that carry a label (each word's first
piece, in the window that owns it: data/token_alignment.py); a window that labels no word adds 0.
The loss is then averaged over the global batch as every task's.
"""

import collections
import dataclasses
import os
from typing import List, Optional

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf.common import fileio, output_layout
from albert_tf.data import tagged_files, token_alignment
from albert_tf.errors import AlbertError
from albert_tf.export import export_token_classifier
from albert_tf.models.token_classifier import AlbertTokenClassifier
from albert_tf.tasks.base import Task
from albert_tf.tasks.finetuning_data import SentenceTaskConfig
from albert_tf.checkpoints.init import init_from_checkpoint
from albert_tf.text.tokenization import make_tokenizer

MODES = ("train", "eval", "predict")
PREDICTIONS_STEM = "test_predictions"


@dataclasses.dataclass
class TokenClassificationConfig(SentenceTaskConfig):
  """run_ner.py's task: the files of each mode, the tags and their scheme, the windows."""
  train_file: Optional[str] = None
  dev_file: Optional[str] = None
  test_file: Optional[str] = None
  # --labels; None: those recorded in tag_list.json, else the training file's.
  labels: Optional[List[str]] = None
  tag_scheme: str = "BIO"
  doc_stride: int = 128
  tag_list_file: Optional[str] = None  # <output_dir>/tag_list.json

  def __post_init__(self):
    super().__post_init__()
    self.tag_scheme = tagged_files.check_scheme(self.tag_scheme)
    if self.doc_stride < 1:
      raise AlbertError(f"--doc_stride={self.doc_stride} is invalid: expected >= 1")

  def file_of(self, mode):
    return {"train": self.train_file, "eval": self.dev_file, "predict": self.test_file}[mode]


def seqeval_results(gold, predicted, scheme):
  """Entity-level precision, recall and F1 (micro over entities) overall and per entity type,
  as seqeval computes them (conlleval's rules for BIO/IO, strict IOBES for BIOES). (Word
  accuracy is the streaming `word_accuracy` every evaluation reports.)

  Args:
    gold, predicted: lists (one per sentence) of tag lists.
  Returns:
    {"eval_precision", "eval_recall", "eval_f1", "eval_f1_<TYPE>",
     "eval_precision_<TYPE>", "eval_recall_<TYPE>", "eval_support_<TYPE>"}.
  """
  from seqeval import metrics  # lazy: only evaluation needs it
  from seqeval import scheme as schemes  # lazy: as above
  kwargs = {"mode": "strict", "scheme": schemes.IOBES} if scheme == "BIOES" else {}
  result = {
      "eval_precision": float(metrics.precision_score(gold, predicted, zero_division=0, **kwargs)),
      "eval_recall": float(metrics.recall_score(gold, predicted, zero_division=0, **kwargs)),
      "eval_f1": float(metrics.f1_score(gold, predicted, zero_division=0, **kwargs)),
  }
  report = metrics.classification_report(gold, predicted, output_dict=True, zero_division=0,
                                         **kwargs)
  for entity_type, row in report.items():
    if entity_type.endswith(" avg"):
      continue
    for key in ("precision", "recall", "f1-score", "support"):
      name = "f1" if key == "f1-score" else key
      value = row[key]
      result[f"eval_{name}_{entity_type}"] = int(value) if key == "support" else float(value)
  return result


def labelled_pieces(label_ids):
  """float32 [batch, seq_len]: 1 at the pieces that carry a word's label (not IGNORE), else 0."""
  return tf.cast(label_ids != token_alignment.IGNORE, tf.float32)


def window_losses(label_ids, logits):
  """float32 [batch]: each window's mean cross-entropy over its labelled pieces (0 for a window
  that labels no word), from label_ids int [batch, seq_len] and logits [batch, seq_len, tags]."""
  labelled = labelled_pieces(label_ids)
  losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.maximum(label_ids, 0), logits=tf.cast(logits, tf.float32)) * labelled
  return tf.reduce_sum(losses, axis=1) / tf.maximum(tf.reduce_sum(labelled, axis=1), 1.0)


class TokenClassificationTask(Task):
  """Named-entity recognition: a tag per word, from the word's first piece.

  Features: input_ids / input_mask / segment_ids / word_ids int32 [batch, seq_len] (word_ids:
    the word a window labels at each position, -1 elsewhere), sentence_index int32 [batch].
  Labels: label_ids int32 [batch, seq_len] (IGNORE where no word is labelled).
  Model outputs: AlbertTokenClassifier's logits / probabilities [batch, seq_len, tags].
  """

  name = "ner"
  best_metric = "eval_f1"

  def __init__(self, params: TokenClassificationConfig, tokenizer=None):
    self.params = params
    self.tokenizer = tokenizer or make_tokenizer(
        params.spm_model_file, params.vocab_file, params.do_lower_case, params.albert_config)
    self._sentences = {}
    self._features = {}
    self._label_list = None

  # ------------------------------------------------------------------ data
  def sentences(self, mode):
    """The TaggedSentences of `mode`'s file, read once (prediction input may have no tags)."""
    if mode not in self._sentences:
      path = self.params.file_of(mode)
      if not path:
        flag, action = {"train": ("--train_file", "--do_train"),
                        "eval": ("--dev_file", "--do_eval"),
                        "predict": ("--test_file", "--do_predict")}[mode]
        raise AlbertError(f"{action} needs {flag}")
      sentences = tagged_files.read_tagged_file(path, self.params.tag_scheme,
                                                needs_tags=mode != "predict")
      self._sentences[mode] = sentences
      if mode != "predict":  # (a file to tag may hold tags of its own: they are not used)
        tagged_files.check_known_labels(sentences, self.label_list)
    return self._sentences[mode]

  @property
  def label_list(self):
    """The tags in the head's order: --labels, else tag_list.json of the run that trained in
    output_dir, else the training file's ("O" first, then sorted)."""
    if self._label_list is None:
      self._label_list = self._resolve_labels()
    return self._label_list

  def _resolve_labels(self):
    params = self.params
    recorded = None
    if params.tag_list_file and fileio.exists(params.tag_list_file):
      recorded = fileio.read_json(params.tag_list_file)
      if recorded.get("tag_scheme") != params.tag_scheme:
        raise AlbertError(f"{params.tag_list_file} records --tag_scheme="
                          f"{recorded.get('tag_scheme')} for the model trained there, not "
                          f"{params.tag_scheme}; use a new --output_dir")
    if params.labels:
      labels = tagged_files.parse_labels(",".join(params.labels), params.tag_scheme)
      if recorded and recorded["labels"] != labels:
        raise AlbertError(f"--labels ({', '.join(labels)}) differ from the tags recorded in "
                          f"{params.tag_list_file} ({', '.join(recorded['labels'])}) for the "
                          "model trained there; use a new --output_dir")
      return labels
    if recorded:
      return list(recorded["labels"])
    if not params.train_file:
      raise AlbertError("no tags: give --labels (e.g. O,B-PER,I-PER), or --train_file to read "
                        "them from")
    path = params.train_file
    sentences = tagged_files.read_tagged_file(path, params.tag_scheme)
    self._sentences["train"] = sentences
    return tagged_files.label_list_of(sentences)

  def record_labels(self):
    """tag_list.json: the head is trained for this order from now on."""
    path = self.params.tag_list_file
    if path and not fileio.exists(path):
      fileio.write_json(path, {"tag_scheme": self.params.tag_scheme, "labels": self.label_list})

  def features(self, mode):
    """{key: int32 array [windows, ...]} of `mode`'s sentences (see the class docstring)."""
    if mode not in self._features:
      ids = {label: i for i, label in enumerate(self.label_list)}
      rows = collections.defaultdict(list)
      for index, sentence in enumerate(self.sentences(mode)):
        pieces = token_alignment.word_pieces(self.tokenizer, sentence.words)
        tag_ids = [ids[tag] for tag in sentence.tags] if sentence.tags is not None else None
        windows = token_alignment.encode_windows(
            self.tokenizer, pieces, tag_ids, self.params.max_seq_length, self.params.doc_stride,
            where=lambda i, s=sentence: f"{s.path}: line {s.lines[i]}")
        for window in windows:
          for key, value in window.items():
            rows[key].append(value)
          rows["sentence_index"].append(np.int32(index))
      self._features[mode] = {key: np.stack(values) for key, values in rows.items()}
    return self._features[mode]

  def num_train_examples(self):
    return len(self.features("train")["input_ids"])

  def build_inputs(self, mode, batch_size, input_context=None):
    if mode == "train":
      self.record_labels()
    data = self.features(mode)
    features = {k: data[k] for k in ("input_ids", "input_mask", "segment_ids", "word_ids",
                                     "sentence_index")}
    dataset = tf.data.Dataset.from_tensor_slices((features, {"label_ids": data["label_ids"]}))
    if input_context is not None and input_context.num_input_pipelines > 1:
      dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if mode == "train":
      if self.params.shuffle_train_input:
        dataset = dataset.shuffle(len(data["input_ids"]), seed=self.params.shuffle_seed,
                                  reshuffle_each_iteration=True)
      return dataset.repeat().batch(batch_size, drop_remainder=True)
    return dataset.batch(batch_size)

  # ------------------------------------------------------------------ model
  def build_model(self):
    return AlbertTokenClassifier(self.params.albert_config, num_classes=len(self.label_list),
                                 dropout_rate=self.params.dropout_rate)

  def initialize(self, model):
    if self.init_checkpoint:
      return init_from_checkpoint(model, self.init_checkpoint, label_list=self.label_list)
    return None

  # ------------------------------------------------------------------ loss and metrics
  def build_losses(self, labels, outputs, global_batch_size):
    per_window = window_losses(labels["label_ids"], outputs["logits"])
    weights = labels.get("is_real_example")
    if weights is not None:
      per_window = per_window * tf.cast(weights, tf.float32)
    return tf.reduce_sum(per_window) / tf.cast(global_batch_size, tf.float32), {}

  def build_metrics(self, training=True):
    return [tf_keras.metrics.SparseCategoricalAccuracy(name="word_accuracy")]

  def update_metrics(self, metrics, labels, outputs):
    label_ids = labels["label_ids"]
    weights = labelled_pieces(label_ids)
    if "is_real_example" in labels:
      weights = weights * tf.cast(labels["is_real_example"], tf.float32)[:, None]
    for metric in metrics:
      metric.update_state(tf.maximum(label_ids, 0), outputs["logits"], sample_weight=weights)

  # ------------------------------------------------------------------ evaluation and prediction
  def aggregate_outputs(self, state, features, labels, outputs):
    state = state or collections.defaultdict(list)
    probabilities = np.asarray(outputs["probabilities"])
    state["tag_ids"].append(np.argmax(probabilities, axis=-1))
    state["scores"].append(np.max(probabilities, axis=-1))
    state["word_ids"].append(np.asarray(features["word_ids"]))
    state["sentence_index"].append(np.asarray(features["sentence_index"]))
    if labels is not None:
      label_ids = np.asarray(labels["label_ids"])
      labelled = label_ids != token_alignment.IGNORE
      log_probs = np.log(np.maximum(np.take_along_axis(
          probabilities, np.maximum(label_ids, 0)[..., None], axis=-1)[..., 0], 1e-30))
      state["loss_sum"].append(float(-(log_probs * labelled).sum()))
      state["loss_count"].append(int(labelled.sum()))
    return state

  def word_predictions(self, state, mode):
    """(predicted tags, scores): per sentence of `mode`, a tag and its probability per word."""
    sentences = self.sentences(mode)
    per_sentence = collections.defaultdict(lambda: ([], [], []))
    for key in ("word_ids", "tag_ids", "scores", "sentence_index"):
      state[key] = np.concatenate(state[key]) if state and state[key] else np.zeros([0])
    for word_ids, tag_ids, scores, index in zip(state["word_ids"], state["tag_ids"],
                                                state["scores"], state["sentence_index"]):
      windows = per_sentence[int(index)]
      windows[0].append(word_ids)
      windows[1].append(tag_ids)
      windows[2].append(scores)
    if len(per_sentence) != len(sentences):
      raise AlbertError(f"{mode} returned results for {len(per_sentence)} of "
                        f"{len(sentences)} sentences")
    tags, scores = [], []
    for index, sentence in enumerate(sentences):
      word_ids, tag_ids, window_scores = per_sentence[index]
      n = len(sentence.words)
      tags.append([self.label_list[int(t)] for t in
                   token_alignment.words_from_windows(n, word_ids, tag_ids)])
      scores.append([float(s) for s in
                     token_alignment.words_from_windows(n, word_ids, window_scores)])
    return tags, scores

  def reduce_outputs(self, state, mode):
    if mode == "predict":
      tags, scores = self.word_predictions(state, mode)
      return {}, (tags, scores)
    tags, _ = self.word_predictions(state, mode)
    gold = [sentence.tags for sentence in self.sentences(mode)]
    result = seqeval_results(gold, tags, self.params.tag_scheme)
    count = sum(state["loss_count"])
    result["eval_loss"] = sum(state["loss_sum"]) / count if count else 0.0
    result["num_sentences"] = len(gold)
    return result, None

  def write_predictions(self, output_dir, outputs):
    """The test file in its own format with a predicted tag per word (test_predictions.<ext>)."""
    tags, _ = outputs
    path = self.params.test_file
    extension = os.path.splitext(path)[1] or ".txt"
    target = os.path.join(output_dir, PREDICTIONS_STEM + extension)
    fileio.write_text(target, tagged_files.format_predictions(self.sentences("predict"), tags,
                                                              path))
    return {"predictions": len(tags), "predictions_file": target}


  # ------------------------------------------------------------------ export
  def export(self, model, export_dir, precision="fp32"):
    if precision != "fp32":
      raise AlbertError(f"--export_precision={precision}: the token classifier's export is "
                        "float32 only")
    return export_token_classifier(model, export_dir, self.label_list,
                                   self.params.max_seq_length, self.params.spm_model_file,
                                   do_lower_case=self.params.do_lower_case)


def tag_list_path(output_dir):
  """Where a run records its tags: <output_dir>/tag_list.json."""
  return output_layout.path(output_dir, output_layout.TAG_LIST)
