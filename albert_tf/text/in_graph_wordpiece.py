"""In-graph WordPiece tokenizer for serving WordPiece models (the official Chinese ALBERTs).

Raw strings -> input_ids / input_mask / segment_ids inside the graph, with the same ids as the
Python `FullTokenizer` in WordPiece mode (`albert_tf.text.tokenization`: the official
BasicTokenizer, then greedy longest-match-first WordPiece), step by step:
  1. `_clean_text`: NUL, U+FFFD and control/format characters (Cc, Cf; tab, newline and carriage
     return excepted) are deleted, so "a\u200bb" stays one word; every whitespace character
     (Python's `str.isspace` set, which `str.split` uses) becomes a space;
  2. when do_lower_case: ICU's full lower-casing (as Python's `str.lower`), NFD, and the
     non-spacing marks (Mn) deleted: accents are stripped only when lower-casing;
  3. words: split at spaces; every punctuation character (Unicode P* and ASCII symbols) and every
     CJK ideograph is a word of its own (`regex_split`);
  4. a word longer than 200 characters (the official max_input_chars_per_word, counted in
     characters, not bytes) becomes [UNK]; the others go through tensorflow-text's
     FastWordpieceTokenizer (a word it cannot spell whole is one [UNK], as in Python);
  5. packing as `InGraphTokenizer` (the official classifier truncation, zero padding).
The character sets of steps 1-3 are built from Python's own `unicodedata`, not RE2's tables, so
only the ICU steps (lower-casing, NFD) can differ, for characters whose Unicode data changed
between the two libraries' versions (`in_graph_tokenizer.KNOWN_DIVERGENCES`).

Why not tensorflow-text's FastBertTokenizer or BertTokenizer whole: on the test texts
(tests/helpers/text.py WORDPIECE_TEXTS) FastBertTokenizer's ids differ from Python's on 8 of 32
and BertTokenizer's on 9. Both normalise by compatibility when lower-casing (full-width "，"
becomes ",", "…" becomes "...": wrong ids for every Chinese vocabulary, whose vocab_chinese.txt
holds the full-width forms), split words at control characters that Python deletes
(BertTokenizer at zero-width ones too), and cut over-long words by bytes, not characters. This module keeps the Python
rules for normalising and splitting and uses FastWordpieceTokenizer for the subwords: 2.4x
faster than BertTokenizer's WordpieceTokenizer in the same pipeline (0.8 against 1.9 ms per 64
sentences on 2 shared cores; FastBertTokenizer whole: 0.5 ms, BertTokenizer: 1.5 ms, the Python
tokenizer: 3.6 ms).
"""

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.errors import AlbertError
from albert_tf.text import tokenization
from albert_tf.text.in_graph_tokenizer import InGraphTokenizer, PackingTokenizer, char_class

# The official WordpieceTokenizer's max_input_chars_per_word.
MAX_CHARS_PER_WORD = 200
_UNK = "[UNK]"


class InGraphWordpieceTokenizer(PackingTokenizer):
  """Raw text (one segment or a pair) -> ALBERT encoder inputs, WordPiece, inside the graph.

  Call with a string tensor [batch] or a tuple (text_a, text_b) of string tensors [batch];
  returns a dict of int32 [batch, max_seq_length] tensors (input_ids, input_mask, segment_ids).
  `tokenize(texts)` gives the WordPiece ids alone, int32 RaggedTensor [batch, (pieces)];
  `words(texts)` the BasicTokenizer words, tf.string RaggedTensor [batch, (words)].
  """

  def __init__(self, vocab_file, max_seq_length=512, do_lower_case=True, **kwargs):
    super().__init__(max_seq_length=max_seq_length, do_lower_case=do_lower_case, **kwargs)
    self.vocab_file = vocab_file
    self._py_tokenizer = tokenization.FullTokenizer(vocab_file=vocab_file,
                                                    do_lower_case=do_lower_case)
    self._py_tokenizer.check_special_tokens()
    vocab = self._py_tokenizer.vocab
    if _UNK not in vocab:
      raise AlbertError(f"vocabulary {vocab_file} has no {_UNK} token (WordPiece needs it)")
    self.cls_id = self._py_tokenizer.cls_id
    self.sep_id = self._py_tokenizer.sep_id
    self.pad_id = 0
    self.unk_id = vocab[_UNK]
    self.mask_id = self._py_tokenizer.mask_id
    self.vocab_size = len(vocab)
    # load_vocab numbers the distinct tokens 0..n-1 in file order: the list is the id table.
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=list(vocab), suffix_indicator="##",
        max_bytes_per_word=4 * MAX_CHARS_PER_WORD,  # the character rule below decides
        token_out_type=tf.int32, unknown_token=_UNK, no_pretokenization=True)
    self._removed_re = char_class("removed_control")
    self._space_re = char_class("space")
    self._mark_re = char_class("mark_nonspacing")
    self._split_re = f"( |{char_class('punctuation')}|{char_class('chinese')})"
    self._keep_re = f"({char_class('punctuation')}|{char_class('chinese')})"

  def preprocess(self, texts):
    """Steps 1-2 in graph: tf.string [batch] -> tf.string [batch]."""
    texts = tf.strings.regex_replace(texts, self._removed_re, "")
    texts = tf.strings.regex_replace(texts, self._space_re, " ")
    if self.do_lower_case:
      texts = tf.strings.lower(texts, encoding="utf-8")
      texts = tf_text.normalize_utf8(texts, "NFD")
      texts = tf.strings.regex_replace(texts, self._mark_re, "")
    return texts

  def words(self, texts):
    """BasicTokenizer.tokenize in graph: tf.string [batch] -> RaggedTensor [batch, (words)]."""
    texts = tf.convert_to_tensor(texts, dtype=tf.string)
    return tf_text.regex_split(self.preprocess(texts), self._split_re, self._keep_re)

  def tokenize_words(self, texts):
    """tf.string [batch] -> int32 RaggedTensor [batch, (words), (pieces)] (TF Hub's BERT
    preprocessors' `tokenize` layout)."""
    words = self.words(texts)
    too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > MAX_CHARS_PER_WORD
    words = words.with_flat_values(tf.where(too_long, _UNK, words.flat_values))
    return self._wordpiece.tokenize(words)

  def tokenize(self, texts):
    """tf.string [batch] -> int32 RaggedTensor [batch, (pieces)], as FullTokenizer.encode."""
    return self.tokenize_words(texts).merge_dims(1, 2)

  def get_config(self):
    config = super().get_config()
    config.update(vocab_file=self.vocab_file)
    return config


def make_in_graph_tokenizer(spm_model_file=None, vocab_file=None, max_seq_length=512,
                            do_lower_case=True):
  """The in-graph tokenizer of a model: SentencePiece when spm_model_file, else WordPiece."""
  if spm_model_file:
    return InGraphTokenizer(spm_model_file, max_seq_length=max_seq_length,
                            do_lower_case=do_lower_case)
  if vocab_file:
    return InGraphWordpieceTokenizer(vocab_file, max_seq_length=max_seq_length,
                                     do_lower_case=do_lower_case)
  raise AlbertError("an in-graph tokenizer needs a SentencePiece model or a WordPiece vocabulary")
