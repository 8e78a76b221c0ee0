"""In-graph ALBERT tokenizer for serving: raw strings -> input_ids / input_mask / segment_ids.

Runs entirely in TensorFlow (tensorflow-text's SentencePiece op), so an exported SavedModel takes
raw text. It reproduces `albert_tf.text.tokenization.FullTokenizer` (SentencePiece mode) step by
step:
  1. whitespace runs (Python's `str.isspace` set) -> one space, ends stripped;
  2. NFKD (ICU), then characters with a non-zero canonical combining class are dropped;
  3. lower-casing (ICU full mapping, as Python's `str.lower`) when do_lower_case;
  4. SentencePiece ids, then the digit-comma re-split (`▁3,` -> `▁3` `,`) by an id table;
  5. packing [CLS] A [SEP] (B [SEP]) with the official classifier truncation (pop from the end of
     the longer segment, B on ties) and zero padding to max_seq_length (`albert_tf.text.packing`,
     the rules the Python feature writers use).
Known divergences from the Python tokenizer (see `KNOWN_DIVERGENCES`) come from Unicode-version
differences between Python's `unicodedata` and TensorFlow's ICU.
"""

import functools
import sys
import unicodedata

import tensorflow as tf
import tensorflow_text as tf_text
import tf_keras

from albert_tf.errors import AlbertError
from albert_tf.text import packing
from albert_tf.text import tokenization

KNOWN_DIVERGENCES = (
    "Characters whose Unicode data differs between Python's unicodedata (Unicode "
    f"{unicodedata.unidata_version}) and TensorFlow's ICU: code points assigned after Unicode "
    f"{unicodedata.unidata_version} (ICU decomposes some, e.g. U+105C9, U+11383, U+16121), and "
    "lower-case mappings added in Unicode 14 that ICU lacks (e.g. U+2C2F, U+A7C0, U+10570).",
    "An <unk> piece whose surface ends in a digit followed by ',' is re-split by the Python "
    "tokenizer but not in graph (needs both the digit and ',' missing from the vocabulary).",
)


# Code-point predicates of Python's `unicodedata`/`str` (the Python tokenizers' own rules), so the
# graph uses the same character sets rather than RE2's built-in (other Unicode version) classes.
_PREDICATES = {
    "space": lambda ch: ch.isspace(),
    "combining": lambda ch: unicodedata.combining(ch) != 0,
    "mark_nonspacing": lambda ch: unicodedata.category(ch) == "Mn",
    # WordPiece (BasicTokenizer) rules, from albert_tf.text.tokenization.
    "punctuation": tokenization.is_punctuation,
    "chinese": lambda ch: tokenization.is_chinese_char(ord(ch)),
    # What BasicTokenizer._clean_text deletes: NUL, U+FFFD and control/format characters.
    "removed_control": lambda ch: ord(ch) in (0, 0xFFFD) or tokenization.is_control(ch),
}


@functools.lru_cache(maxsize=None)
def char_class(predicate_name):
  """An RE2 character class (as ranges) of every code point for which the predicate holds."""
  predicate = _PREDICATES[predicate_name]
  ranges, start, prev = [], None, None
  for cp in range(sys.maxunicode + 1):
    if 0xD800 <= cp <= 0xDFFF or not predicate(chr(cp)):
      continue
    if start is not None and cp == prev + 1:
      prev = cp
      continue
    if start is not None:
      ranges.append((start, prev))
    start = prev = cp
  if start is not None:
    ranges.append((start, prev))
  parts = [f"\\x{{{a:04X}}}" if a == b else f"\\x{{{a:04X}}}-\\x{{{b:04X}}}" for a, b in ranges]
  return "[" + "".join(parts) + "]"


class PackingTokenizer(tf_keras.layers.Layer):
  """Shared by the in-graph tokenizers: raw text (one segment or a pair) -> encoder inputs.

  Subclasses set cls_id, sep_id, pad_id, mask_id, vocab_size and define `tokenize(texts)`:
  tf.string [batch] -> int32 RaggedTensor [batch, (pieces)].
  """

  def __init__(self, max_seq_length=512, do_lower_case=True, **kwargs):
    super().__init__(**kwargs)
    self.max_seq_length = int(max_seq_length)
    self.do_lower_case = bool(do_lower_case)
    if self.max_seq_length < 3:
      raise AlbertError(f"max_seq_length={max_seq_length}: expected at least 3")

  def call(self, inputs):
    if isinstance(inputs, (tuple, list)):
      if len(inputs) != 2:
        raise AlbertError(f"{type(self).__name__} takes one or two text tensors, "
                          f"got {len(inputs)}")
      ids_a, ids_b = self.tokenize(inputs[0]), self.tokenize(inputs[1])
    else:
      ids_a, ids_b = self.tokenize(inputs), None
    return self.pack(ids_a, ids_b)

  def pack(self, ids_a, ids_b=None):
    """Ragged piece ids -> padded dict(input_ids, input_mask, segment_ids) int32 [batch, S]."""
    ids_a, ids_b = packing.fit_classifier_ids(ids_a, ids_b, self.max_seq_length)
    # A pair whose B has no pieces is one segment, as the official feature writer packs it.
    return packing.pack_ids(ids_a, ids_b, self.max_seq_length, self.cls_id, self.sep_id,
                            self.pad_id, sep_after_empty_b=False)

  def get_config(self):
    config = super().get_config()
    config.update(max_seq_length=self.max_seq_length, do_lower_case=self.do_lower_case)
    return config


class InGraphTokenizer(PackingTokenizer):
  """Raw text (one segment or a pair) -> ALBERT encoder inputs, inside the graph.

  Call with a string tensor [batch] (single segments) or a tuple/list (text_a, text_b) of two
  string tensors [batch]. Returns a dict of int32 [batch, max_seq_length] tensors:
  input_ids ([CLS] A [SEP] B [SEP], zero-padded), input_mask, segment_ids.
  `tokenize(texts)` gives the piece ids alone as a RaggedTensor [batch, (pieces)].
  """

  def __init__(self, spm_model_file, max_seq_length=512, do_lower_case=True, **kwargs):
    super().__init__(max_seq_length=max_seq_length, do_lower_case=do_lower_case, **kwargs)
    self.spm_model_file = spm_model_file
    # The Python tokenizer supplies the special ids and the digit-comma split table.
    self._py_tokenizer = tokenization.make_tokenizer(spm_model_file,
                                                     do_lower_case=do_lower_case)
    self._py_tokenizer.check_special_tokens()
    sp = self._py_tokenizer.sp_model
    self.cls_id = self._py_tokenizer.cls_id
    self.sep_id = self._py_tokenizer.sep_id
    self.pad_id = 0
    self.unk_id = self._py_tokenizer.unk_id
    self.mask_id = sp.PieceToId("[MASK]")
    self.vocab_size = sp.GetPieceSize()
    with tf.io.gfile.GFile(spm_model_file, "rb") as f:
      self._sp_op = tf_text.SentencepieceTokenizer(model=f.read(), out_type=tf.int32)
    rows = []
    for i in range(sp.GetPieceSize()):
      split = tokenization.split_digit_comma(sp, sp.IdToPiece(i))
      if split is None or sp.IsControl(i) or sp.IsUnknown(i):
        rows.append([i])
      else:
        rows.append([sp.PieceToId(p) for p in split])
    self._split_table = tf.ragged.constant(rows, dtype=tf.int32)
    self._space_re = char_class("space") + "+"
    # A run of what Python's str.split() splits on (RE2), for splitting text into words.
    self.whitespace_pattern = self._space_re
    self._combining_re = char_class("combining")

  def preprocess(self, texts):
    """`preprocess_text` in graph: tf.string [batch] -> tf.string [batch]."""
    texts = tf.strings.regex_replace(texts, self._space_re, " ")
    texts = tf.strings.strip(texts)  # the collapsed ends are single ASCII spaces now
    texts = tf_text.normalize_utf8(texts, "NFKD")
    texts = tf.strings.regex_replace(texts, self._combining_re, "")
    if self.do_lower_case:
      # ICU's full lower-casing, like Python's: "İ" -> "i̇", word-final "Σ" -> "ς".
      texts = tf.strings.lower(texts, encoding="utf-8")
    return texts

  def tokenize(self, texts):
    """tf.string [batch] -> int32 RaggedTensor [batch, (pieces)], as FullTokenizer.tokenize."""
    texts = tf.convert_to_tensor(texts, dtype=tf.string)
    ids = self._sp_op.tokenize(self.preprocess(texts))
    return tf.gather(self._split_table, ids).merge_dims(1, 2)

  def get_config(self):
    config = super().get_config()
    config.update(spm_model_file=self.spm_model_file)
    return config
