"""TokenClassifier: named-entity recognition (a tag per word) from a notebook, run_ner.py's model,
data path, recipe and files.

  model = albert_tf.TokenClassifier.from_pretrained("albert_base",
                                                    label_list=["O", "B-PER", "I-PER"])
  model.compile()                        # run_ner.py's recipe: AdamW 5e-5, the masked loss
  model.fit(words, tags, epochs=3, batch_size=32)   # words: [["Albert", "lives", ...], ...]
  model.predict_tags(words)              # [["B-PER", "O", ...], ...]
  model.predict_entities(["Albert lives in Paris"])  # what the export serves
  model.evaluate_entities(words, tags)   # seqeval's precision / recall / F1, as run_ner.py
  model.save_for_serving("export/")      # the SavedModel run_ner.py --export_dir writes
  model.save_checkpoint("out/model.ckpt-best")   # official TF1 layout + tag_list.json

Why fit() takes the features path (token ids made in Python, not strings in the graph): a
sentence longer than sequence_length - 2 pieces becomes several windows, so one example of the
user's is several rows of the model's, and the word-to-piece alignment (each word's label on its
first piece, the others IGNORE, every word labelled in the one window where it has most context)
is data/token_alignment.py's, which run_ner.py uses; it is called here, not written again. The
windows are made before Keras sees the data: words and tags (Python lists, or a tf.data of
ragged strings, read once) -> the script's int32 windows -> Keras' fit on those arrays. The
graph path is predict_entities(): raw text through the export's own signature (one window).

The loss is the task's (the mean cross-entropy of a window's labelled pieces, averaged over the
global batch), the metric the task's word accuracy over labelled pieces, the tags' order the
head's (tag_list.json beside a checkpoint, as run_ner.py records it).
"""

import os
import re

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf import pretrained as pretrained_lib
from albert_tf.common import fileio, kinds, output_layout
from albert_tf.config import AlbertConfig
from albert_tf.data import tagged_files, token_alignment
from albert_tf.errors import AlbertError
from albert_tf.export import export_token_classifier
from albert_tf.export.token_serving import TokenClassifierServing
from albert_tf.models.token_classifier import AlbertTokenClassifier
from albert_tf.tasks import token_classification as ner_task
from albert_tf.text.preprocessor import AlbertPreprocessor
from albert_tf.text.tokenization import make_tokenizer
from albert_tf.training.raw_text_model import AlbertTextError
from albert_tf.training.raw_text_model import as_text_column
from albert_tf.training.windowed_model import WindowedModel

_ENCODER_FEATURES = ("input_ids", "input_mask", "segment_ids")


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class WindowLoss(tf_keras.losses.Loss):
  """run_ner.py's loss: y_true label_ids int [batch, seq_len] (IGNORE where no word is
  labelled), y_pred logits [batch, seq_len, tags] -> each window's mean cross-entropy over its
  labelled pieces; Keras averages the windows over the global batch, as the task does."""

  def __init__(self, name="window_loss", **kwargs):
    super().__init__(name=name, **kwargs)

  def call(self, y_true, y_pred):
    return ner_task.window_losses(tf.cast(y_true, tf.int32), y_pred)


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class WordAccuracy(tf_keras.metrics.SparseCategoricalAccuracy):
  """run_ner.py's word_accuracy: the accuracy over the pieces that carry a word's label."""

  def __init__(self, name="word_accuracy", **kwargs):
    super().__init__(name=name, **kwargs)

  def update_state(self, y_true, y_pred, sample_weight=None):
    y_true = tf.cast(y_true, tf.int32)
    weights = ner_task.labelled_pieces(y_true)
    if sample_weight is not None:
      weights = weights * tf.cast(sample_weight, tf.float32)
    return super().update_state(tf.maximum(y_true, 0), y_pred, sample_weight=weights)


def _rows_of(element):
  """One element of a tf.data (a sentence [words] or a batch [batch, (words)]) -> lists."""
  if isinstance(element, tf.RaggedTensor):
    rows = element.to_list()
  else:
    rows = np.asarray(element).tolist()
  if rows and not isinstance(rows[0], list):  # one sentence, not a batch
    rows = [rows]
  return [[v.decode("utf-8") if isinstance(v, bytes) else v for v in row] for row in rows]


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class TokenClassifier(WindowedModel):
  """Pre-split words in, a tag per word out: run_ner.py's AlbertTokenClassifier and data path.

  Keras sees the script's windows: inputs dict of int32 input_ids / input_mask / segment_ids
  [windows, sequence_length], labels label_ids int32 [windows, sequence_length] (IGNORE where no
  word is labelled); call() returns the logits float32 [windows, sequence_length, tags].
  fit/evaluate/predict take words (a list of sentences, each a list of word strings, or a tf.data
  of ragged strings [batch, (words)], optionally with their tags) and make the windows first.

  Attributes:
    preprocessor: the AlbertPreprocessor (the export's in-graph tokenizer: predict_entities).
    tokenizer: the scripts' FullTokenizer, which makes the windows.
    token_classifier: the AlbertTokenClassifier (what run_ner.py trains, exports and saves).
    label_list: the tags in the head's order; tag_scheme: BIO, BIOES or IO.
    doc_stride: how many pieces a window starts after the one before (run_ner.py's flag).
  """

  def __init__(self, config, label_list, spm_model_file, sequence_length=128, doc_stride=128,
               tag_scheme="BIO", do_lower_case=True, dropout_rate=0.1, **kwargs):
    kwargs.setdefault("name", "token_classifier")
    super().__init__(**kwargs)
    config = config if isinstance(config, AlbertConfig) else AlbertConfig.from_dict(config)
    self.tag_scheme = tagged_files.check_scheme(tag_scheme, "tag_scheme")
    if label_list is None or isinstance(label_list, str):
      raise AlbertError("label_list: expected the tags as a list, e.g. ['O', 'B-PER', 'I-PER']")
    # (a tuple: Keras would wrap a list attribute into its tracking ListWrapper)
    self._tags = tuple(tagged_files.parse_labels(",".join(label_list), self.tag_scheme,
                                                 name="label_list"))
    if int(doc_stride) < 1:
      raise AlbertError(f"doc_stride={doc_stride}: expected >= 1")
    self.doc_stride = int(doc_stride)
    if sequence_length > config.max_position_embeddings:
      raise AlbertError(f"sequence_length={sequence_length}: the model has "
                        f"{config.max_position_embeddings} positions (max_position_embeddings)")
    self.preprocessor = AlbertPreprocessor(spm_model_file, sequence_length=sequence_length,
                                           do_lower_case=do_lower_case)
    # The scripts' tokenizer (its vocabulary checked against the config, as run_ner.py's).
    self.tokenizer = make_tokenizer(spm_model_file, do_lower_case=do_lower_case,
                                    albert_config=config)
    self.token_classifier = AlbertTokenClassifier(config, num_classes=len(self.label_list),
                                                  dropout_rate=dropout_rate)

  @property
  def task_model(self):
    return self.token_classifier

  @property
  def label_list(self):
    """The tags in the head's order (a list)."""
    return list(self._tags)

  @property
  def sequence_length(self):
    return self.preprocessor.sequence_length

  # ------------------------------------------------------------------ loading
  @classmethod
  def from_pretrained(cls, path, label_list=None, sequence_length=128, doc_stride=128,
                      tag_scheme=None, dropout_rate=0.1, seed=None, albert_config_file=None,
                      spm_model_file=None, do_lower_case=None):
    """A TokenClassifier on the weights at `path` (anything albert_tf.from_pretrained reads).

    A pretrained encoder gets a new head of len(label_list) tags, initialised as run_ner.py's
    (truncated normal 0.02, seeded by `seed` when given); a fine-tuned token classifier (its
    tag_list.json beside) keeps its head, tags and scheme. tag_scheme: default BIO (or the
    recorded one).
    """
    loaded = pretrained_lib.from_pretrained(path, albert_config_file=albert_config_file,
                                            spm_model_file=spm_model_file,
                                            do_lower_case=do_lower_case)
    cls._check_sentencepiece(loaded, path)
    fine_tuned = loaded.model_type == kinds.TOKEN_CLASSIFIER
    if fine_tuned:
      recorded = _recorded_tags(path)
      if label_list is not None and list(label_list) != loaded.label_list:
        raise AlbertError(f"{path}: its head is trained for the tags {loaded.label_list}, not "
                          f"label_list={list(label_list)}")
      label_list = loaded.label_list
      tag_scheme = tag_scheme or recorded.get("tag_scheme")
    elif not label_list:
      raise AlbertError("label_list: a new token-classification head needs its tags, e.g. "
                        "['O', 'B-PER', 'I-PER']")
    if seed is not None:
      tf_keras.utils.set_random_seed(int(seed))  # the head's initial weights, then dropout
    model = cls(loaded.config, label_list, loaded.tokenizer.spm_model_file,
                sequence_length=sequence_length, doc_stride=doc_stride,
                tag_scheme=tag_scheme or "BIO", do_lower_case=loaded.tokenizer.do_lower_case,
                dropout_rate=dropout_rate)
    model._take_weights(loaded, fine_tuned)  # pylint: disable=protected-access
    return model

  # ------------------------------------------------------------------ the forward pass
  def call(self, inputs, training=None):
    features = {k: inputs[k] for k in _ENCODER_FEATURES}
    return self.token_classifier(features, training=training)["logits"]

  # ------------------------------------------------------------------ words -> the script's windows
  def _words(self, x):
    """Sentences of words checked: a list of lists of non-empty strings without whitespace."""
    if isinstance(x, str) or x is None:
      raise AlbertTextError("words: expected a list of sentences, each a list of words "
                            "(e.g. [['Albert', 'lives', 'in', 'Paris']])")
    sentences = []
    for i, sentence in enumerate(x):
      if isinstance(sentence, str):
        raise AlbertTextError(f"words[{i}]: expected a list of words, got a string (split it: "
                              "text.split())")
      words = list(sentence)
      if not words:
        raise AlbertError(f"words[{i}]: a sentence without words")
      for j, word in enumerate(words):
        if not isinstance(word, str):
          raise AlbertTextError(f"words[{i}][{j}]: expected a string, got "
                                f"{type(word).__name__}")
        if not word.strip() or word != "".join(word.split()):
          raise AlbertError(f"words[{i}][{j}]: {word!r}: a word is a non-empty string without "
                            "whitespace")
      sentences.append(words)
    if not sentences:
      raise AlbertError("words: no sentences")
    return sentences

  def _tag_ids(self, y, sentences):
    """Tags (strings of label_list, or indices) checked, BIO-repaired as run_ner.py reads a
    file -> one label-id list per sentence."""
    if isinstance(y, str) or len(y) != len(sentences):
      raise AlbertError(f"tags: expected one tag list per sentence ({len(sentences)}), got "
                        f"{'a string' if isinstance(y, str) else len(y)}")
    ids = {tag: i for i, tag in enumerate(self.label_list)}
    result = []
    for i, (tags, words) in enumerate(zip(y, sentences)):
      tags = list(tags) if not isinstance(tags, str) else [tags]
      if len(tags) != len(words):
        raise AlbertError(f"tags[{i}]: {len(tags)} tags for {len(words)} words")
      names = []
      for j, tag in enumerate(tags):
        if isinstance(tag, (int, np.integer)) and not isinstance(tag, bool):
          if not 0 <= tag < len(self.label_list):
            raise AlbertError(f"tags[{i}][{j}]: {tag} is outside the {len(self.label_list)} "
                              f"tags (expected 0..{len(self.label_list) - 1})")
          tag = self.label_list[tag]
        if isinstance(tag, bytes):
          tag = tag.decode("utf-8")
        if not isinstance(tag, str):
          raise AlbertTextError(f"tags[{i}][{j}]: expected a tag of label_list or its index, "
                                f"got {type(tag).__name__}")
        if tag not in ids:
          raise AlbertError(f"tags[{i}][{j}]: {tag!r} is not one of label_list "
                            f"({', '.join(self.label_list)})")
        names.append(tag)
      # (file and line as the script names them: here the sentence and the word's number)
      names = tagged_files.check_tags(names, self.tag_scheme, f"tags[{i}]",
                                      list(range(1, len(names) + 1)))
      result.append([ids[tag] for tag in names])
    return result

  def windows(self, words, tags=None):
    """Sentences (and their tags) -> the script's windows (data/token_alignment.py).

    Returns (features, label_ids, word_ids, sentence_index): features the dict of int32
    [windows, sequence_length] encoder inputs, label_ids int32 [windows, sequence_length] (None
    without tags), word_ids [windows, sequence_length] (the word a window labels, -1
    elsewhere), sentence_index int32 [windows].
    """
    sentences = self._words(words)
    tag_ids = self._tag_ids(tags, sentences) if tags is not None else [None] * len(sentences)
    rows = {key: [] for key in token_alignment.FEATURE_KEYS}
    sentence_index = []
    for index, (sentence, ids) in enumerate(zip(sentences, tag_ids)):
      pieces = token_alignment.word_pieces(self.tokenizer, sentence)
      for window in token_alignment.encode_windows(
          self.tokenizer, pieces, ids, self.sequence_length, self.doc_stride,
          where=lambda j, i=index: f"words[{i}][{j}]"):
        for key, value in window.items():
          rows[key].append(value)
        sentence_index.append(index)
    arrays = {key: np.stack(values) for key, values in rows.items()}
    features = {k: arrays[k] for k in _ENCODER_FEATURES}
    return (features, arrays["label_ids"] if tags is not None else None, arrays["word_ids"],
            np.asarray(sentence_index, np.int32))

  def _read_dataset(self, x, y):
    """A tf.data of words (or (words, tags)) -> Python lists (read once)."""
    if y is not None:
      raise AlbertError("a tf.data carries its tags: give (words, tags) elements, y=None")
    words, tags = [], []
    for element in x:
      if isinstance(element, tuple):
        words.extend(_rows_of(element[0]))
        tags.extend(_rows_of(element[1]))
      else:
        words.extend(_rows_of(element))
    return words, (tags or None)

  def _keras_data(self, x, y):
    """fit/evaluate's (x, y) -> the windows' (features, label_ids) Keras trains on."""
    if isinstance(x, dict):  # already the script's windows
      return x, y
    if isinstance(x, tf.data.Dataset):
      x, y = self._read_dataset(x, y)
    features, label_ids, _, _ = self.windows(x, y)
    return features, label_ids

  # ------------------------------------------------------------------ the task's half
  def _default_loss(self):
    return WindowLoss()

  def _default_metrics(self):
    return [WordAccuracy()]

  def predict(self, x, **kwargs):
    """Words -> a list (one per sentence) of float32 [words, tags] logits: each word's first
    piece in the window that labels it (the script's windows dict -> Keras' [windows, ...])."""
    if isinstance(x, dict):
      return super().predict(x, **kwargs)
    if isinstance(x, tf.data.Dataset):
      x, _ = self._read_dataset(x, None)
    sentences = self._words(x)
    features, _, word_ids, sentence_index = self.windows(sentences)
    logits = super().predict(features, **kwargs)
    return [np.stack(token_alignment.words_from_windows(
        len(sentence), word_ids[sentence_index == i], logits[sentence_index == i]))
            for i, sentence in enumerate(sentences)]

  def predict_tags(self, words, **kwargs):
    """Words -> a list (one per sentence) of tags, one per word (run_ner.py --do_predict's)."""
    return [[self.label_list[i] for i in np.argmax(logits, axis=-1)]
            for logits in self.predict(words, **kwargs)]

  def evaluate_entities(self, words, tags, **kwargs):
    """seqeval's entity-level numbers of the predicted tags against `tags`, as run_ner.py's
    eval_results.txt: eval_precision, eval_recall, eval_f1 and per type."""
    sentences = self._words(words)
    gold = [[self.label_list[i] for i in ids] for ids in self._tag_ids(tags, sentences)]
    return ner_task.seqeval_results(gold, self.predict_tags(sentences, **kwargs),
                                    self.tag_scheme)

  def predict_entities(self, texts):
    """Raw texts -> a list (one per text) of entities, each a dict of type, start and end
    (character offsets, end exclusive), text and score: the export's serving_default computes
    them (export/token_serving.py), so they are what save_for_serving's model serves. A text of
    more than sequence_length - 2 pieces is refused there (the served model tags one window)."""
    texts = as_text_column(texts, "texts")
    if "_entity_signature" not in self.__dict__:
      module = TokenClassifierServing(self.token_classifier, self.label_list,
                                      self.sequence_length, self.preprocessor)
      # Kept out of Keras' tracking: its variables are the model's own.
      self.__dict__["_entity_signature"] = (module, module.raw_text_fn())
    try:
      out = self.__dict__["_entity_signature"][1](tf.constant(texts.astype(str)))
    except tf.errors.InvalidArgumentError as e:
      raise AlbertError(f"predict_entities: {_check_message(e)}") from None
    out = {k: v.numpy() for k, v in out.items()}
    return [[{"type": tf.compat.as_text(out["entity_type"][i, j]),
              "start": int(out["entity_start"][i, j]), "end": int(out["entity_end"][i, j]),
              "text": tf.compat.as_text(out["entity_text"][i, j]),
              "score": float(out["entity_score"][i, j])}
             for j in range(int(out["num_entities"][i]))] for i in range(len(texts))]

  # ------------------------------------------------------------------ saving
  def save_for_serving(self, export_dir):
    """Writes the TF Serving SavedModel run_ner.py --export_dir writes (raw text -> entities,
    pre-split words, token ids; warm-up records) as `<export_dir>/<version>/`. Returns the
    version directory."""
    p = self.preprocessor
    return export_token_classifier(self.token_classifier, os.fspath(export_dir),
                                   self.label_list, p.sequence_length, p.spm_model_file,
                                   do_lower_case=p.do_lower_case)

  def save_checkpoint(self, path):
    """Writes the token classifier in the official TF1 layout at the prefix `path`, with
    albert_config.json, 30k-clean.model and tag_list.json (the tags and scheme, as run_ner.py
    records them) beside it, so that from_pretrained(path) reads it back."""
    path = self._save_tf1_checkpoint(path)
    fileio.write_json(os.path.join(os.path.dirname(path) or ".", output_layout.TAG_LIST),
                      {"tag_scheme": self.tag_scheme, "labels": self.label_list})
    return path

  def get_config(self):
    p = self.preprocessor
    return {"config": self.config.to_dict(), "label_list": self.label_list,
            "spm_model_file": p.spm_model_file, "sequence_length": p.sequence_length,
            "doc_stride": self.doc_stride, "tag_scheme": self.tag_scheme,
            "do_lower_case": p.do_lower_case,
            "dropout_rate": self.token_classifier.dropout_rate, "name": self.name}


def _check_message(error):
  """The one line of a failed serving input check (export/input_checks.py) in an
  InvalidArgumentError's message."""
  found = re.search(r"assertion failed: \[(.*)\]", error.message)
  return found.group(1) if found else error.message.strip().splitlines()[0]


def _recorded_tags(path):
  """tag_list.json beside a checkpoint prefix (or in its directory), {} when there is none."""
  path = os.fspath(path)
  directory = path if fileio.isdir(path) else os.path.dirname(path) or "."
  recorded = os.path.join(directory, output_layout.TAG_LIST)
  return fileio.read_json(recorded) if fileio.exists(recorded) else {}
