"""RACE's raw text -> the multiple-choice model's inputs, in the graph: the one in-graph owner of
the RACE rule, for the notebook model's preprocessor and the export's raw-text signature alike.

The rule is the official race_utils' (its Python form: albert_tf/data/race.py
`question_with_option`, which the feature writer uses): each option joins its question, filling
every "_" blank of a cloze question or, without a blank, after the question and one space; then
each choice is packed `[CLS] article [SEP] question+option [SEP]`, the question+option keeping
its last max_qa_length pieces and the article its first ones (text/packing.py `pack_choice`).
"""

import tensorflow as tf
import tf_keras

from albert_tf.errors import AlbertError
from albert_tf.text import packing
from albert_tf.text.preprocessor import AlbertPreprocessor
from albert_tf.text.preprocessor import check_strings

INPUT_NAMES = ("article", "question", "options")  # the export's raw-text signature's names


def check_qa_length(max_qa_length, max_seq_length, prefix=""):
  """Raises AlbertError unless 1 <= max_qa_length <= max_seq_length - 3 ([CLS], 2 x [SEP]).
  prefix: "--" for the scripts' flags."""
  if not 0 < max_qa_length <= max_seq_length - 3:
    raise AlbertError(f"{prefix}max_qa_length={max_qa_length} must be in [1, max_seq_length - 3 "
                      f"= {max_seq_length - 3}]")


def input_columns(inputs, what):
  """(articles, questions, options) from that tuple or a dict with the keys INPUT_NAMES.

  what: who takes them, for the message. Raises AlbertError for anything else (one column of
  texts, two columns, a dict without a key)."""
  if isinstance(inputs, dict):
    missing = [name for name in INPUT_NAMES if name not in inputs]
    if missing:
      raise AlbertError(f"{what}: no {', '.join(missing)} in the inputs (expected the keys "
                        f"{', '.join(INPUT_NAMES)})")
    return tuple(inputs[name] for name in INPUT_NAMES)
  columns = (len(inputs) if isinstance(inputs, (tuple, list)) and inputs
             and not isinstance(inputs[0], (str, bytes)) else 1)
  if columns != 3:
    raise AlbertError(f"{what} takes (articles, questions, options), got "
                      f"{'one column of texts' if columns == 1 else f'{columns} columns'}")
  return tuple(inputs)


def fill_blanks(parts, options):
  """Elementwise `question.replace("_", option)` with core string ops.

  parts: RaggedTensor [n, (blanks + 1)] of each question split on "_"; options: tf.string [n].
  Returns tf.string [n].
  """
  row_lengths = parts.row_lengths()
  rows = parts.value_rowids()
  positions = tf.ragged.range(row_lengths).flat_values
  # Every part but the last is followed by the option.
  followed = positions < tf.gather(row_lengths, rows) - 1
  suffix = tf.where(followed, tf.gather(options, rows), "")
  joined = parts.with_flat_values(tf.strings.join([parts.flat_values, suffix]))
  return tf.strings.reduce_join(joined, axis=1)


def questions_with_options(questions, options):
  """The question+option strings: tf.string [batch] x [batch, C] -> [batch * C], a question's
  choices side by side (data/race.py `question_with_option`, elementwise)."""
  num_choices = tf.shape(options)[1]
  questions = tf.repeat(questions, num_choices)
  options = tf.reshape(options, [-1])
  # Split rather than matched: a regular expression's "." stops at a newline, `in` does not.
  parts = tf.strings.split(questions, "_")
  has_blank = parts.row_lengths() > 1
  appended = tf.strings.join([questions, options], separator=" ")
  return tf.where(has_blank, fill_blanks(parts, options), appended)


def encode_choices(tokenizer, articles, questions, options, max_seq_length, max_qa_length):
  """RACE's raw text -> padded multiple-choice inputs, as the feature writer packs them.

  Args:
    tokenizer: an in-graph tokenizer (tokenize(texts) -> ragged ids, cls_id, sep_id).
    articles, questions: tf.string [batch]; options: tf.string [batch, C].
    max_seq_length, max_qa_length: as run_race.py's flags.
  Returns:
    dict of int32 [batch, C, max_seq_length]: input_ids, input_mask, segment_ids.
  """
  num_choices = options.shape[1] if options.shape[1] is not None else tf.shape(options)[1]
  endings = tokenizer.tokenize(questions_with_options(questions, options))
  # Each article is tokenized once and its pieces repeated for its choices.
  articles = tokenizer.tokenize(articles)
  contexts = tf.gather(articles, tf.repeat(tf.range(articles.nrows()), num_choices))
  packed = packing.pack_choice(contexts, endings, max_seq_length, max_qa_length,
                               tokenizer.cls_id, tokenizer.sep_id)
  return {k: tf.reshape(v, [-1, num_choices, max_seq_length]) for k, v in packed.items()}


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class MultipleChoicePreprocessor(AlbertPreprocessor):
  """(articles, questions, options) strings -> dict of int32 input_ids / input_mask / segment_ids.

  Call with a tuple (articles [batch], questions [batch], options [batch, num_choices]) or a
  dict with the keys `article`, `question`, `options` (the export's names); one example
  (scalars and options [num_choices]) gives [num_choices, sequence_length] outputs, so it runs in
  a tf.data map before or after `batch`. Returns int32 [batch, num_choices, sequence_length].
  """

  def __init__(self, spm_model_file, sequence_length=512, max_qa_length=128, num_choices=4,
               do_lower_case=True, **kwargs):
    super().__init__(spm_model_file, sequence_length=sequence_length,
                     do_lower_case=do_lower_case, **kwargs)
    check_qa_length(max_qa_length, self.sequence_length)
    if int(num_choices) < 2:
      raise AlbertError(f"num_choices={num_choices}: expected at least 2")
    self.max_qa_length = int(max_qa_length)
    self.num_choices = int(num_choices)

  def call(self, inputs):
    inputs = input_columns(inputs, "MultipleChoicePreprocessor")
    articles, questions, options = (tf.convert_to_tensor(t) for t in inputs)
    for name, tensor in zip(INPUT_NAMES, (articles, questions, options)):
      check_strings(tensor, name)
    one_example = articles.shape.rank == 0
    if options.shape[-1] is not None and options.shape[-1] != self.num_choices:
      raise AlbertError(f"options: expected {self.num_choices} per question (num_choices), got "
                        f"{options.shape[-1]}")
    # A [batch, 1] column (Keras' 2-D view of a 1-D array) or one example -> [batch].
    articles, questions = tf.reshape(articles, [-1]), tf.reshape(questions, [-1])
    options = tf.reshape(options, [-1, self.num_choices])
    outputs = encode_choices(self, articles, questions, options, self.sequence_length,
                             self.max_qa_length)
    if one_example:
      outputs = {k: v[0] for k, v in outputs.items()}
    return outputs

  def get_config(self):
    config = super().get_config()
    config.update(max_qa_length=self.max_qa_length, num_choices=self.num_choices)
    return config
