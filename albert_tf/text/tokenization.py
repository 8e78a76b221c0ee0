"""Tokenization as in the official ALBERT release (SentencePiece and WordPiece modes).

The names mirror the official `tokenization.py`, every one of them (`OFFICIAL_NAMES`, the
`_is_*` helpers users call included): `FullTokenizer` (with `from_scratch`, and
`from_hub_module` for local module directories), `preprocess_text`, `encode_pieces`,
`encode_ids`, `convert_to_unicode`, `printable_text`, `load_vocab`, `convert_by_vocab`,
`convert_tokens_to_ids`, `convert_ids_to_tokens`, `whitespace_tokenize`, `BasicTokenizer`,
`WordpieceTokenizer`; `albert_tf.tokenization` re-exports them under the official module's
import path. Differences from the official module, all deliberate:
- `FullTokenizer.tokenize` applies `preprocess_text(text, lower=do_lower_case)` before
  SentencePiece (the official tool made every caller do it). Preprocessing is idempotent on
  practical text, so callers that already preprocess get the same pieces.
- Pieces ending in "," after a digit are re-split the way the official code intends (its Python 3
  path compared str with bytes): `▁3.0,` -> `▁3.0` `,`, and `3,` inside a word -> `3` `,` without a
  stray `▁`. This matches Hugging Face's AlbertTokenizer.
- `tokenize_with_offsets` also returns each piece's character span in the original text.
"""

import collections
import unicodedata

from absl import logging

import sentencepiece as spm

from albert_tf.common import fileio
from albert_tf.errors import AlbertError, file_error_reason, file_errors

# Every module-level name of the official tokenization.py (albert_tf.tokenization offers them).
OFFICIAL_NAMES = (
    "SPIECE_UNDERLINE", "preprocess_text", "encode_pieces", "encode_ids", "convert_to_unicode",
    "printable_text", "load_vocab", "convert_by_vocab", "convert_tokens_to_ids",
    "convert_ids_to_tokens", "whitespace_tokenize", "FullTokenizer", "BasicTokenizer",
    "WordpieceTokenizer", "_is_whitespace", "_is_control", "_is_punctuation")

SPIECE_UNDERLINE = "\u2581"
SPECIAL_TOKENS = ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")


# ----------------------------------------------------------------------------- text helpers


def convert_to_unicode(text):
  """Returns text as str, decoding UTF-8 bytes (errors -> AlbertError)."""
  if isinstance(text, str):
    return text
  if isinstance(text, bytes):
    try:
      return text.decode("utf-8")
    except UnicodeDecodeError as e:
      raise AlbertError(f"text is not valid UTF-8 (byte {e.start}): {text[:40]!r}")
  raise AlbertError(f"expected str or bytes text, got {type(text).__name__}")


def printable_text(text):
  """Text as str, for printing or logging (Python 3: same as convert_to_unicode)."""
  return convert_to_unicode(text)


def preprocess_text(inputs, remove_space=True, lower=False):
  """The official ALBERT text normalisation applied before SentencePiece.

  Whitespace runs collapse to one space and the ends are stripped (when remove_space); NFKD
  normalisation, then every character with a non-zero combining class is dropped (accents);
  lower-casing when `lower`. `` and '' are left as they are (as in the official ALBERT code).
  """
  outputs = convert_to_unicode(inputs)
  if remove_space:
    outputs = " ".join(outputs.strip().split())
  outputs = unicodedata.normalize("NFKD", outputs)
  outputs = "".join(c for c in outputs if not unicodedata.combining(c))
  if lower:
    outputs = outputs.lower()
  return outputs


def _preprocess_with_alignment(text, remove_space=True, lower=False):
  """`preprocess_text` that also returns, per output character, its [start, end) in `text`.

  Returns (processed, spans) with len(spans) == len(processed). A character produced by
  decomposing one input character (e.g. "ﬁ" -> "f", "i") gets that character's span; dropped
  combining marks extend the span of the character they followed, so "e\u0301" maps to both.
  """
  text = convert_to_unicode(text)
  # 1. Whitespace: keep words, join with one space that points at the first whitespace char.
  chars, spans = [], []
  if remove_space:
    i, n = 0, len(text)
    while i < n:
      if text[i].isspace():
        j = i
        while j < n and text[j].isspace():
          j += 1
        if chars and j < n:
          chars.append(" ")
          spans.append((i, i + 1))
        i = j
      else:
        chars.append(text[i])
        spans.append((i, i + 1))
        i += 1
  else:
    chars = list(text)
    spans = [(i, i + 1) for i in range(len(text))]
  # 2. NFKD per character, dropping combining marks. Equivalent to the whole-string version:
  # NFKD's canonical reordering only moves combining marks, which are all dropped.
  out_chars, out_spans = [], []
  for ch, span in zip(chars, spans):
    kept = [c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c)]
    if kept:
      out_chars.extend(kept)
      out_spans.extend([span] * len(kept))
    elif out_spans and out_spans[-1][1] == span[0]:
      out_spans[-1] = (out_spans[-1][0], span[1])
  processed = "".join(out_chars)
  # 3. Lower-casing: str.lower is context-dependent only for the Greek final sigma, which maps
  # one character to one character, so per-character lengths are those of the whole string.
  if lower:
    lowered = processed.lower()
    lower_spans = []
    for ch, span in zip(processed, out_spans):
      lower_spans.extend([span] * len(ch.lower()))
    if len(lower_spans) != len(lowered):  # unreachable with CPython's case tables; stay safe
      raise AlbertError("internal error: lower-casing changed length unexpectedly")
    processed, out_spans = lowered, lower_spans
  return processed, out_spans


# ----------------------------------------------------------------------------- SentencePiece


def split_digit_comma(sp_model, piece):
  """Re-splits a piece like '▁3,' or '0,' into ('▁3', ',') / ('0', ','); None if not such a piece."""
  if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
    cur_pieces = sp_model.EncodeAsPieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
    # EncodeAsPieces adds the dummy-prefix "▁"; drop it when the original piece had none.
    if piece[0] != SPIECE_UNDERLINE and cur_pieces and cur_pieces[0][0] == SPIECE_UNDERLINE:
      if len(cur_pieces[0]) == 1:
        cur_pieces = cur_pieces[1:]
      else:
        cur_pieces[0] = cur_pieces[0][1:]
    return list(cur_pieces) + [piece[-1]]
  return None


def _encode_as_proto(sp_model, text):
  """The pieces of `text` with their byte offsets (`.pieces[i].piece/.begin/.end`).

  SentencePiece 0.2.2 and later spell it encode(..., return_type="proto") and dropped
  encode_as_immutable_proto; 0.2.1 and earlier (what the [beam] extra's protobuf < 7 allows)
  have only the latter."""
  if hasattr(sp_model, "encode_as_immutable_proto"):
    return sp_model.encode_as_immutable_proto(text)
  return sp_model.encode(text, return_type="proto")


def _reserved_pieces(sp_model):
  """(pieces SentencePiece never emits: control/unknown/unused, the <unk> piece)."""
  cached = getattr(sp_model, "_albert_reserved_pieces", None)
  if cached is None:
    reserved = frozenset(
        sp_model.IdToPiece(i) for i in range(sp_model.GetPieceSize())
        if sp_model.IsControl(i) or sp_model.IsUnknown(i) or sp_model.IsUnused(i))
    cached = (reserved, sp_model.IdToPiece(sp_model.unk_id()))
    sp_model._albert_reserved_pieces = cached  # pylint: disable=protected-access
  return cached


def _fix_pieces(sp_model, pieces):
  """Digit-comma re-split, and unknown text spelling a reserved piece becomes <unk>.

  SentencePiece returns the surface of unknown text as its piece, so text like "[CLS]" (when its
  characters are not in the vocabulary) or "<pad>" would map to the special id through
  PieceToId. Control pieces are never produced by encoding, so such a piece is always unknown
  text: it becomes the <unk> piece, and the ids agree with SentencePiece's own ids.
  """
  reserved, unk_piece = _reserved_pieces(sp_model)
  new_pieces = []
  for piece in pieces:
    split = split_digit_comma(sp_model, piece)
    for p in ((piece,) if split is None else split):
      new_pieces.append(unk_piece if p in reserved else p)
  return new_pieces


def encode_pieces(sp_model, text, return_unicode=True, sample=False):
  """SentencePiece pieces of (already preprocessed) text, with the digit-comma re-split.

  `return_unicode` is accepted for API compatibility; pieces are always str in Python 3.
  `sample=True` uses subword regularisation (nbest 64, alpha 0.1) as the official code.
  Unknown text that spells a control piece ("[CLS]", "<pad>") is returned as "<unk>".
  """
  del return_unicode
  text = convert_to_unicode(text)
  if sample:
    pieces = sp_model.SampleEncodeAsPieces(text, 64, 0.1)
  else:
    pieces = sp_model.EncodeAsPieces(text)
  return _fix_pieces(sp_model, pieces)


def encode_ids(sp_model, text, sample=False):
  """Ids of `encode_pieces(sp_model, text)`."""
  return [sp_model.PieceToId(p) for p in encode_pieces(sp_model, text, sample=sample)]


# ----------------------------------------------------------------------------- WordPiece


def load_vocab(vocab_file):
  """Loads a vocabulary file (one token per line; for SentencePiece .vocab, the first column),
  local or any tf.io.gfile URL."""
  vocab = collections.OrderedDict()
  contents = _read_bytes(vocab_file, "vocabulary file")
  for line_number, raw in enumerate(contents.split(b"\n"), 1):
    try:
      line = raw.decode("utf-8")
    except UnicodeDecodeError:
      if _is_sentencepiece_model(contents):
        raise AlbertError(f"--vocab_file {vocab_file} is a SentencePiece model, not a vocabulary "
                          "file: pass it as --spm_model_file") from None
      raise AlbertError(f"{vocab_file}:{line_number}: vocabulary line is not valid UTF-8")
    token = line.strip().split()[0] if line.strip() else ""
    if token and token not in vocab:
      vocab[token] = len(vocab)
  if not vocab:
    raise AlbertError(f"vocabulary file {vocab_file} is empty")
  return vocab


def _is_sentencepiece_model(contents):
  """Whether bytes are a serialized SentencePiece model."""
  try:
    spm.SentencePieceProcessor().LoadFromSerializedProto(contents)
  except (RuntimeError, OSError, TypeError):
    return False
  return True


def _is_text_vocabulary(contents):
  """Whether bytes read as a text vocabulary: UTF-8 lines, one a [CLS] or [UNK] token."""
  try:
    lines = contents.decode("utf-8").splitlines()
  except UnicodeDecodeError:
    return False
  return any(line.split()[:1] in (["[CLS]"], ["[UNK]"]) for line in lines)


def check_vocabularies_agree(spm_model_file, vocab_file, sp_model):
  """The official scripts take --vocab_file beside --spm_model_file (run_glue.sh passes
  30k-clean.vocab and 30k-clean.model): the vocabulary must then list the model's pieces.

  Raises:
    AlbertError: the two files list different pieces (e.g. a WordPiece vocab.txt beside a
      SentencePiece model), naming the first difference.
  """
  vocab = list(load_vocab(vocab_file))
  pieces = [sp_model.IdToPiece(i) for i in range(sp_model.GetPieceSize())]
  if vocab == pieces:
    return
  first = next((i for i, (a, b) in enumerate(zip(vocab, pieces)) if a != b),
               min(len(vocab), len(pieces)))
  found = repr(vocab[first]) if first < len(vocab) else "the end of the file"
  expected = repr(pieces[first]) if first < len(pieces) else "the end of the model"
  raise AlbertError(f"--vocab_file {vocab_file} and --spm_model_file {spm_model_file} disagree: "
                    f"token {first} is {found} in the vocabulary, {expected} in the model "
                    f"({len(vocab)} and {len(pieces)} tokens); pass one of them (WordPiece "
                    "models: --vocab_file alone)")


def convert_by_vocab(vocab, items):
  """Maps each item through vocab (a dict)."""
  return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
  """Tokens -> ids through vocab (dict token -> id)."""
  return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
  """Ids -> tokens through inv_vocab (dict id -> token)."""
  return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
  """Strips and splits on whitespace."""
  text = text.strip()
  return text.split() if text else []


def is_whitespace(char):
  """Space, tab, newline, carriage return or any Unicode space separator (Zs)."""
  if char in (" ", "\t", "\n", "\r"):
    return True
  return unicodedata.category(char) == "Zs"


def is_control(char):
  """A control or format character (Cc, Cf), tab / newline / carriage return excepted."""
  if char in ("\t", "\n", "\r"):
    return False
  return unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char):
  """Unicode punctuation (P*) or any ASCII symbol that is not a letter, digit or space."""
  cp = ord(char)
  # All non-letter/number ASCII is treated as punctuation, as in BERT ("^", "$", "`").
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True
  return unicodedata.category(char).startswith("P")


def is_chinese_char(cp):
  return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or
          0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or
          0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


# The official module's names of the character classes (users call them).
_is_whitespace, _is_control, _is_punctuation = is_whitespace, is_control, is_punctuation


class BasicTokenizer:
  """BERT's basic tokenization: clean, split CJK characters and punctuation, optional lower-case
  with accent stripping."""

  def __init__(self, do_lower_case=True):
    self.do_lower_case = do_lower_case

  def tokenize(self, text):
    text = self._tokenize_chinese_chars(self._clean_text(convert_to_unicode(text)))
    split_tokens = []
    for token in whitespace_tokenize(text):
      if self.do_lower_case:
        token = self._run_strip_accents(token.lower())
      split_tokens.extend(self._split_on_punc(token))
    return whitespace_tokenize(" ".join(split_tokens))

  # The official method names (users subclass and call them).
  @staticmethod
  def _run_strip_accents(text):
    """NFD, then without the combining marks (Mn)."""
    return "".join(c for c in unicodedata.normalize("NFD", text)
                   if unicodedata.category(c) != "Mn")

  @staticmethod
  def _tokenize_chinese_chars(text):
    """Spaces around every CJK ideograph, so that each is a token."""
    return "".join(f" {c} " if is_chinese_char(ord(c)) else c for c in text)

  @staticmethod
  def _is_chinese_char(cp):
    return is_chinese_char(cp)

  def _run_split_on_punc(self, text):
    return self._split_on_punc(text)

  @staticmethod
  def _split_on_punc(text):
    output = []
    start_new_word = True
    for char in text:
      if is_punctuation(char):
        output.append([char])
        start_new_word = True
      else:
        if start_new_word:
          output.append([])
        start_new_word = False
        output[-1].append(char)
    return ["".join(x) for x in output]

  @staticmethod
  def _clean_text(text):
    output = []
    for char in text:
      cp = ord(char)
      if cp == 0 or cp == 0xFFFD or is_control(char):
        continue
      output.append(" " if is_whitespace(char) else char)
    return "".join(output)


class WordpieceTokenizer:
  """Greedy longest-match-first WordPiece tokenization ("##" marks continuations)."""

  def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
    self.vocab = vocab
    self.unk_token = unk_token
    self.max_input_chars_per_word = max_input_chars_per_word

  def tokenize(self, text):
    output_tokens = []
    for token in whitespace_tokenize(convert_to_unicode(text)):
      if len(token) > self.max_input_chars_per_word:
        output_tokens.append(self.unk_token)
        continue
      sub_tokens = []
      start = 0
      while start < len(token):
        end = len(token)
        cur_substr = None
        while start < end:
          substr = token[start:end]
          if start > 0:
            substr = "##" + substr
          if substr in self.vocab:
            cur_substr = substr
            break
          end -= 1
        if cur_substr is None:
          sub_tokens = None
          break
        sub_tokens.append(cur_substr)
        start = end
      output_tokens.extend(sub_tokens if sub_tokens is not None else [self.unk_token])
    return output_tokens


# ----------------------------------------------------------------------------- FullTokenizer


def _read_bytes(path, flag):
  """File contents, local or any tf.io.gfile URL (gs://...; TensorFlow is loaded only then).

  Raises:
    AlbertError: "cannot read <flag> <path>: <reason>", the same words locally and on a URL.
  """
  try:
    return fileio.read_bytes(path)
  except file_errors() as e:
    raise AlbertError(f"cannot read {flag} {path}: {file_error_reason(e)}") from None


def check_vocabulary_fits(tokenizer, config):
  """The tokenizer's vocabulary must fit the model's embedding table (config.vocab_size).

  A larger vocabulary (e.g. another model's 30k-clean.model with a smaller config) yields ids past
  the table; a smaller one works but leaves rows unused, which usually means a mismatch too.
  Raises:
    AlbertError: more pieces than config.vocab_size (both sizes named).
  """
  size = len(tokenizer.vocab)
  source = tokenizer.spm_model_file or tokenizer.vocab_file
  config_name = getattr(config, "source", None) or "the albert config"
  if size > config.vocab_size:
    raise AlbertError(f"{source}: vocabulary has {size} pieces but {config_name} has "
                      f"vocab_size={config.vocab_size} (is this the model's own vocabulary?)")
  if size < config.vocab_size:
    logging.warning("%s: vocabulary has %d pieces, fewer than vocab_size=%d of %s (is this the "
                    "model's own vocabulary?)", source, size, config.vocab_size, config_name)


class FullTokenizer:
  """End-to-end tokenizer: SentencePiece when `spm_model_file` is given, else WordPiece.

  Attributes:
    vocab: dict piece -> id (for SentencePiece, built from the model).
    inv_vocab: dict id -> piece.
    sp_model: the `sentencepiece.SentencePieceProcessor`, or None in WordPiece mode.
    do_lower_case: whether text is lower-cased before tokenization.
  """

  def __init__(self, vocab_file=None, do_lower_case=True, spm_model_file=None):
    self.do_lower_case = do_lower_case
    self.sp_model = None
    self.spm_model_file = spm_model_file
    self.vocab_file = vocab_file
    if spm_model_file:
      self.sp_model = spm.SentencePieceProcessor()
      proto = _read_bytes(spm_model_file, "--spm_model_file")
      try:
        self.sp_model.LoadFromSerializedProto(proto)
      except (RuntimeError, OSError):
        hint = (": it is a text vocabulary (WordPiece); pass it as --vocab_file"
                if _is_text_vocabulary(proto) else "")
        raise AlbertError(f"--spm_model_file {spm_model_file} is not a SentencePiece "
                          f"model{hint}") from None
      self.vocab = {self.sp_model.IdToPiece(i): i for i in range(self.sp_model.GetPieceSize())}
    elif vocab_file:
      self.vocab = load_vocab(vocab_file)
      self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
      self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)
    else:
      raise AlbertError("a tokenizer needs --spm_model_file or --vocab_file")
    self.inv_vocab = {v: k for k, v in self.vocab.items()}

  @classmethod
  def from_scratch(cls, vocab_file, do_lower_case, spm_model_file):
    """The official constructor alias."""
    return cls(vocab_file, do_lower_case, spm_model_file)

  @classmethod
  def from_hub_module(cls, hub_module, use_spm=True):
    """The tokenizer of a TF-Hub module, as its `tokenization_info` gives it (vocabulary file and
    do_lower_case): a local module directory, in the official TF1 hub format or
    export_savedmodel.py's (URLs are refused: nothing is downloaded at run time).

    use_spm: the vocabulary file is a SentencePiece model (True, ALBERT's), else a WordPiece
      vocabulary.
    """
    from albert_tf.text import hub_tokenization  # lazy: it imports TensorFlow
    vocab_file, do_lower_case = hub_tokenization.read_tokenization_info(hub_module)
    if use_spm:
      return cls(vocab_file=None, do_lower_case=do_lower_case, spm_model_file=vocab_file)
    return cls(vocab_file=vocab_file, do_lower_case=do_lower_case)

  # --- special tokens

  def special_id(self, token):
    """Id of a special token ('<pad>', '<unk>', '[CLS]', '[SEP]', '[MASK]') from the vocabulary.

    Raises AlbertError naming the vocabulary when it is missing.
    """
    if self.sp_model is not None:
      if token == "<pad>":
        pad = self.sp_model.pad_id()
        if pad >= 0:
          return pad
      if token == "<unk>":
        return self.sp_model.unk_id()
    if token in self.vocab:
      return self.vocab[token]
    if token == "<unk>" and "[UNK]" in self.vocab:
      return self.vocab["[UNK]"]
    if token == "<pad>" and "[PAD]" in self.vocab:
      return self.vocab["[PAD]"]
    source = self.spm_model_file or self.vocab_file
    raise AlbertError(f"vocabulary {source} has no {token} token (needed: [CLS], [SEP], [MASK])")

  @property
  def pad_id(self):
    return self.special_id("<pad>")

  @property
  def unk_id(self):
    return self.special_id("<unk>")

  @property
  def cls_id(self):
    return self.special_id("[CLS]")

  @property
  def sep_id(self):
    return self.special_id("[SEP]")

  @property
  def mask_id(self):
    return self.special_id("[MASK]")

  def check_special_tokens(self):
    """Raises AlbertError unless [CLS], [SEP] and [MASK] are in the vocabulary."""
    for token in ("[CLS]", "[SEP]", "[MASK]"):
      self.special_id(token)

  # --- tokenization

  def preprocess(self, text):
    """The text normalisation `tokenize` applies (SentencePiece mode) before encoding."""
    return preprocess_text(text, lower=self.do_lower_case)

  def tokenize(self, text):
    """Text -> list of pieces (str). Text spelling "[CLS]" is ordinary text, never a special id."""
    if self.sp_model is not None:
      return encode_pieces(self.sp_model, self.preprocess(text))
    split_tokens = []
    for token in self.basic_tokenizer.tokenize(text):
      split_tokens.extend(self.wordpiece_tokenizer.tokenize(token))
    return split_tokens

  def tokenize_with_offsets(self, text):
    """Pieces of `text` and each piece's character span in the ORIGINAL (unprocessed) text.

    SQuAD uses it to map answer character spans to pieces. WordPiece mode: each piece spans the
    characters it spells (a word's pieces tile the word, CJK characters one each, so text
    without spaces maps too); an [UNK] spans its whole word; dropped accents and removed
    control characters stay inside the span of the character before them.

    Returns:
      (pieces, offsets): pieces == self.tokenize(text); offsets[i] = (start, end) with
      text[start:end] the original characters piece i came from, through preprocess_text:
      - the "▁" word-boundary marker is not part of a span: "▁the" spans just "the";
      - a piece that is only "▁" gets an empty span (start == end) at the next word's start;
      - accents dropped by NFKD stay inside the span of their base letter ("é" -> "e" spans
        the whole "é" or "e\u0301");
      - a character that decomposes into several (e.g. "ﬁ" -> "fi", "½" -> "1⁄2") gives every
        piece touching it the whole character's span, so spans may overlap there;
      - lower-casing and whitespace collapsing keep spans on the original characters;
      - the digit-comma re-split ("▁3,000," -> "▁3,000" ",") gives "," its own one-char span.
      Spans are non-decreasing in start.
    """
    if self.sp_model is None:
      return _wordpiece_with_offsets(self, text)
    processed, char_spans = _preprocess_with_alignment(text, lower=self.do_lower_case)
    proto = _encode_as_proto(self.sp_model, processed)
    # SentencePiece offsets are UTF-8 byte offsets into `processed`: map bytes -> chars.
    byte_to_char = []
    for ci, ch in enumerate(processed):
      byte_to_char.extend([ci] * len(ch.encode("utf-8")))
    byte_to_char.append(len(processed))
    n_chars = len(processed)

    def to_original(c_start, c_end):
      # Drop the space the "▁" stands for; an all-space piece is empty at the next character.
      while c_start < c_end and processed[c_start] == " ":
        c_start += 1
      if c_start >= c_end:
        pos = char_spans[c_start][0] if c_start < n_chars else len(text)
        return (pos, pos)
      return (char_spans[c_start][0], char_spans[c_end - 1][1])

    reserved, unk_piece = _reserved_pieces(self.sp_model)
    pieces, offsets = [], []
    for sp_piece in proto.pieces:
      piece = sp_piece.piece
      c_start, c_end = byte_to_char[sp_piece.begin], byte_to_char[sp_piece.end]
      split = split_digit_comma(self.sp_model, piece)
      if split is None:
        pieces.append(unk_piece if piece in reserved else piece)
        offsets.append(to_original(c_start, c_end))
        continue
      split = _fix_pieces(self.sp_model, [piece])
      # The "," is the last character of the surface; the rest keeps the remaining characters.
      body_start, body_end = c_start, max(c_start, c_end - 1)
      body_pieces = split[:-1]
      body_text = processed[body_start:body_end].lstrip(" ")
      body_start = body_end - len(body_text)
      pos = body_start
      joined = "".join(p.replace(SPIECE_UNDERLINE, "") for p in body_pieces)
      for sub in body_pieces:
        sub_len = len(sub.replace(SPIECE_UNDERLINE, ""))
        if joined == body_text:  # the usual case: pieces spell the surface exactly
          offsets.append(to_original(pos, pos + sub_len) if sub_len else
                         to_original(pos, pos))
          pos += sub_len
        else:  # SentencePiece normalisation changed characters: give the whole body span
          offsets.append(to_original(body_start, body_end))
        pieces.append(sub)
      pieces.append(",")
      offsets.append(to_original(c_end - 1, c_end))
    return pieces, offsets

  def convert_tokens_to_ids(self, tokens):
    if self.sp_model is not None:
      return [self.sp_model.PieceToId(token) for token in tokens]
    unk = self.vocab.get("[UNK]")
    return [self.vocab.get(t, unk) if unk is not None else self.vocab[t] for t in tokens]

  def convert_ids_to_tokens(self, ids):
    if self.sp_model is not None:
      return [self.sp_model.IdToPiece(int(i)) for i in ids]
    return convert_by_vocab(self.inv_vocab, ids)

  def encode(self, text):
    """Text -> ids (tokenize + convert_tokens_to_ids)."""
    return self.convert_tokens_to_ids(self.tokenize(text))


def _basic_words_with_spans(text, do_lower_case):
  """BasicTokenizer.tokenize with each word's characters' spans in `text`.

  Returns a list of (word, spans) with spans[i] = (start, end) of word[i] in the original text.
  """
  text = convert_to_unicode(text)
  # Words of the cleaned text: whitespace ends a word, a CJK character is a word of its own.
  raw_words, chars, spans = [], [], []

  def end_word():
    if chars:
      raw_words.append(("".join(chars), list(spans)))
      chars.clear()
      spans.clear()

  for i, ch in enumerate(text):
    cp = ord(ch)
    if cp == 0 or cp == 0xFFFD or is_control(ch):
      if spans:  # removed: it stays inside the span of the character before it
        spans[-1] = (spans[-1][0], i + 1)
      continue
    if ch.isspace():
      end_word()
    elif is_chinese_char(cp):
      end_word()
      raw_words.append((ch, [(i, i + 1)]))
    else:
      chars.append(ch)
      spans.append((i, i + 1))
  end_word()
  words = []
  for word, word_spans in raw_words:
    if do_lower_case:
      word, word_spans = _lower_strip_accents_with_spans(word, word_spans)
    # Punctuation characters are words of their own.
    start = 0
    for k, ch in enumerate(word):
      if is_punctuation(ch):
        if k > start:
          words.append((word[start:k], word_spans[start:k]))
        words.append((ch, word_spans[k:k + 1]))
        start = k + 1
    if start < len(word):
      words.append((word[start:], word_spans[start:]))
  return words


def _lower_strip_accents_with_spans(word, spans):
  """BasicTokenizer's lower-casing and accent stripping of one word, with per-character spans."""
  expected = BasicTokenizer._run_strip_accents(word.lower())  # pylint: disable=protected-access
  lowered = word.lower()
  # str.lower is per character except the final sigma, which stays one character.
  lower_spans = [span for ch, span in zip(word, spans) for _ in ch.lower()]
  out, out_spans = [], []
  for ch, span in zip(lowered, lower_spans):
    kept = [c for c in unicodedata.normalize("NFD", ch) if unicodedata.category(c) != "Mn"]
    if kept:
      out.extend(kept)
      out_spans.extend([span] * len(kept))
    elif out_spans:
      out_spans[-1] = (out_spans[-1][0], span[1])
  if len(lower_spans) != len(lowered) or "".join(out) != expected:
    # Unreachable with CPython's tables; stay exact: every character spans the whole word.
    whole = (spans[0][0], spans[-1][1])
    return expected, [whole] * len(expected)
  return expected, out_spans


def _wordpiece_with_offsets(tokenizer, text):
  """FullTokenizer.tokenize_with_offsets in WordPiece mode (see there)."""
  wordpiece = tokenizer.wordpiece_tokenizer
  pieces, offsets = [], []
  for word, spans in _basic_words_with_spans(text, tokenizer.do_lower_case):
    word_pieces = wordpiece.tokenize(word)
    if word_pieces == [wordpiece.unk_token]:
      pieces.append(wordpiece.unk_token)
      offsets.append((spans[0][0], spans[-1][1]))
      continue
    position = 0
    for piece in word_pieces:
      length = len(piece[2:] if piece.startswith("##") and position else piece)
      pieces.append(piece)
      offsets.append((spans[position][0], spans[position + length - 1][1]))
      position += length
  return pieces, offsets


def make_tokenizer(spm_model_file=None, vocab_file=None, do_lower_case=True, albert_config=None):
  """The tokenizer of a job (the official `fine_tuning_utils.create_vocab`).

  SentencePiece when `spm_model_file` is given, else WordPiece from `vocab_file`. With
  `albert_config`, the vocabulary must fit the model's embedding table (checked up front: a
  cached feature file would otherwise skip the tokenizer and train on ids past the table).
  Both files given: the vocabulary must list the SentencePiece model's pieces (its .vocab).
  Raises:
    AlbertError: neither file is given; both disagree; the vocabulary is larger than the
      config's.
  """
  tokenizer = FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case,
                            spm_model_file=spm_model_file)
  if spm_model_file and vocab_file:
    check_vocabularies_agree(spm_model_file, vocab_file, tokenizer.sp_model)
  if albert_config is not None:
    check_vocabulary_fits(tokenizer, albert_config)
  return tokenizer
