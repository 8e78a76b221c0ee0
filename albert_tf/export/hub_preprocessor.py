"""The text preprocessor as a SavedModel with TF Hub's preprocessor API (as albert_en_preprocess/3).

Pairs with the encoder export (albert_tf/export/hub_encoder.py) the way tfhub.dev's
`albert_en_preprocess/3` pairs with `albert_en_base/3`:

  obj(sentences)                      tf.string [batch]
      -> input_word_ids, input_mask, input_type_ids: int32 [batch, seq_length]
         ([CLS] A [SEP], zero-padded; seq_length is the export's default, 128 unless set)
  obj.tokenize(sentences)             tf.string [batch]
      -> int32 RaggedTensor [batch, (pieces)]: SentencePiece ids, as albert_en_preprocess/3
         (a SentencePiece tokenizer has no word level, so there is no (words) dimension)
  obj.tokenize.get_special_tokens_dict()
      -> vocab_size, start_of_sequence_id ([CLS]), end_of_segment_id ([SEP]), padding_id,
         mask_id ([MASK]): int32 scalars
  obj.bert_pack_inputs(segments, seq_length=<default>)
      segments: a list of 1 or 2 int32 RaggedTensors [batch, (tokens)] (or [batch, (words),
      (tokens)], flattened per row); seq_length: int32 scalar
      -> the three int32 [batch, seq_length] tensors: [CLS] A [SEP] (B [SEP])

Tokenization is our in-graph SentencePiece tokenizer (albert_tf/text/in_graph_tokenizer.py: the
Python `FullTokenizer`'s normalisation, lower-casing and digit-comma split, so the ids equal the
Python tokenizer's). Packing follows the official ALBERT classifier rules
(`albert_tf.text.packing`): a single segment keeps its first seq_length - 2 tokens; a pair is cut
one token at a time from the end of the longer segment (B on ties) until it fits seq_length - 3.
(The model garden's BertPackInputs cuts round-robin instead; both agree whenever nothing is cut.)

Assets: the SentencePiece model (30k-clean.model). The tokenizer op itself holds the model's
bytes, so the export needs tensorflow-text's ops (`import tensorflow_text`) to load.

WordPiece models (the official Chinese ALBERTs, `vocab_file=` instead of `spm_model_file=`) get
the in-graph WordPiece tokenizer (albert_tf/text/in_graph_wordpiece.py, the Python WordPiece ids
exactly) and the asset vocab.txt; their `obj.tokenize` keeps the word level, int32 RaggedTensor
[batch, (words), (pieces)], as TF Hub's BERT preprocessors (bert_zh_preprocess/3).
"""

import tensorflow as tf

from albert_tf.common import fileio
from albert_tf.errors import AlbertError
from albert_tf.export import serving
from albert_tf.export.saved_model_writer import write_atomically
from albert_tf.common.export_format import SPM_ASSET_NAME, WORDPIECE_VOCAB_ASSET_NAME
from albert_tf.text import packing
from albert_tf.text.in_graph_tokenizer import InGraphTokenizer
from albert_tf.text.in_graph_wordpiece import make_in_graph_tokenizer

DEFAULT_SEQ_LENGTH = 128

_Trackable = tf.__internal__.tracking.AutoTrackable
_STRINGS = tf.TensorSpec([None], tf.string)
_SEQ_LENGTH = tf.TensorSpec([], tf.int32)


def _flat_rows(segment):
  """[batch, (tokens)] or [batch, (words), (tokens)] int ragged -> int32 [batch, (tokens)]."""
  if segment.ragged_rank > 1:
    segment = segment.merge_dims(1, -1)
  return tf.cast(segment, tf.int32)


def pack_segments(segments, seq_length, cls_id, sep_id, pad_id=0):
  """`bert_pack_inputs`: 1 or 2 ragged segments -> padded TF Hub encoder inputs.

  Args:
    segments: list of 1 or 2 int RaggedTensors [batch, (tokens)] (ragged rank 1 or 2).
    seq_length: int32 scalar (a tensor or a Python int), at least 3.
    cls_id, sep_id, pad_id: the special ids.
  Returns:
    dict of int32 [batch, seq_length]: input_word_ids, input_mask, input_type_ids.
  """
  if len(segments) not in (1, 2):
    raise ValueError(f"bert_pack_inputs takes 1 or 2 segments, got {len(segments)}")
  seq_length = tf.cast(seq_length, tf.int64)
  check = tf.debugging.assert_greater_equal(
      seq_length, tf.constant(3, tf.int64),
      message="bert_pack_inputs: seq_length must be at least 3 ([CLS] and [SEP]s)")
  with tf.control_dependencies([check]):
    seq_length = tf.identity(seq_length)
  ids = [_flat_rows(s) for s in segments]
  if len(ids) == 1:
    ids[0] = packing.truncate_rows(ids[0], tf.fill([ids[0].nrows()], seq_length - 2))
  else:
    new_a, new_b = packing.classifier_truncation_lengths(
        ids[0].row_lengths(), ids[1].row_lengths(), seq_length - 3)
    ids = [packing.truncate_rows(ids[0], new_a), packing.truncate_rows(ids[1], new_b)]
  batch = ids[0].nrows()

  def column(value):
    return tf.RaggedTensor.from_tensor(tf.fill(tf.stack([batch, 1]), tf.constant(value, tf.int32)))

  parts, types = [], []
  for segment_index, segment in enumerate(ids):
    pieces = ([column(cls_id)] if segment_index == 0 else []) + [segment, column(sep_id)]
    parts += pieces
    types += [tf.ones_like(p) * segment_index for p in pieces]
  word_ids = tf.concat(parts, axis=1)
  shape = tf.stack([batch, seq_length])
  return {
      "input_word_ids": word_ids.to_tensor(default_value=pad_id, shape=shape),
      "input_mask": tf.ones_like(word_ids).to_tensor(default_value=0, shape=shape),
      "input_type_ids": tf.concat(types, axis=1).to_tensor(default_value=0, shape=shape),
  }


def _track_tokenizer_op(owner, tokenizer):
  """The tokenizer op's resource becomes an attribute of `owner` (saved with it)."""
  if isinstance(tokenizer, InGraphTokenizer):
    owner.sentencepiece = tokenizer._sp_op  # pylint: disable=protected-access
  else:
    owner.wordpiece = tokenizer._wordpiece  # pylint: disable=protected-access


class _Tokenize(_Trackable):
  """`preprocessor.tokenize`: strings -> ragged ids (WordPiece: with words); special tokens."""

  def __init__(self, tokenizer, special_tokens):
    super().__init__()
    # Tracked here too: a model built on `hub.KerasLayer(preprocessor.tokenize)` alone must own
    # the resource its saved functions capture (else tf.saved_model.save refuses the model).
    _track_tokenizer_op(self, tokenizer)
    tokenize = (tokenizer.tokenize if isinstance(tokenizer, InGraphTokenizer) else
                tokenizer.tokenize_words)
    self.__call__ = tf.function(tokenize, input_signature=[_STRINGS], autograph=False)
    self.get_special_tokens_dict = tf.function(
        lambda: {k: tf.constant(v, tf.int32) for k, v in special_tokens.items()},
        input_signature=[], autograph=False)


class _PackInputs(_Trackable):
  """`preprocessor.bert_pack_inputs(segments, seq_length=default)`."""

  def __init__(self, default_seq_length, cls_id, sep_id):
    super().__init__()

    @tf.function(autograph=False)
    def call(inputs, seq_length=default_seq_length):
      return pack_segments(list(inputs), seq_length, cls_id, sep_id)

    self.__call__ = call
    for ragged_rank in (1, 2):
      for num_segments in (1, 2):
        call.get_concrete_function(
            [tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32, ragged_rank=ragged_rank)
             for _ in range(num_segments)], seq_length=_SEQ_LENGTH)


class HubPreprocessorModule(_Trackable):
  """The preprocessor SavedModel's root object (see the module docstring)."""

  def __init__(self, tokenizer, seq_length, vocabulary_asset):
    super().__init__()
    # Tracked: the tokenizer op's resource (the Keras layer itself is reached by closure).
    _track_tokenizer_op(self, tokenizer)
    self.vocab_file = vocabulary_asset
    special = {"vocab_size": tokenizer.vocab_size, "start_of_sequence_id": tokenizer.cls_id,
               "end_of_segment_id": tokenizer.sep_id, "padding_id": tokenizer.pad_id,
               "mask_id": tokenizer.mask_id}
    self.tokenize = _Tokenize(tokenizer, special)
    self.bert_pack_inputs = _PackInputs(seq_length, tokenizer.cls_id, tokenizer.sep_id)
    self.__call__ = tf.function(
        lambda sentences: pack_segments([tokenizer.tokenize(sentences)], seq_length,
                                        tokenizer.cls_id, tokenizer.sep_id),
        input_signature=[_STRINGS], autograph=False)


def export_preprocessor(export_dir, spm_model_file, do_lower_case=True,
                        seq_length=DEFAULT_SEQ_LENGTH, config=None, vocab_file=None):
  """Writes the TF Hub style preprocessor SavedModel atomically; returns the export dir.

  Args:
    export_dir: the SavedModel directory to write.
    spm_model_file: the SentencePiece model (becomes the asset 30k-clean.model).
    vocab_file: a WordPiece vocabulary instead (spm_model_file None; becomes vocab.txt).
    do_lower_case: lower-case the text first (uncased models).
    seq_length: the default sequence length of `obj(sentences)` and `obj.bert_pack_inputs`.
    config: the paired encoder's AlbertConfig, recorded in the export's info (optional).
  """
  seq_length = int(seq_length)
  if seq_length < 3:
    raise AlbertError(f"seq_length={seq_length}: expected at least 3 ([CLS] A [SEP])")
  tokenizer = make_in_graph_tokenizer(spm_model_file, vocab_file, max_seq_length=seq_length,
                                      do_lower_case=do_lower_case)
  vocabulary = ((SPM_ASSET_NAME, spm_model_file) if spm_model_file else
                (WORDPIECE_VOCAB_ASSET_NAME, vocab_file))
  identity = {"kind": "albert_hub_preprocessor", "seq_length": seq_length,
              "spm_model_sha1": serving.file_sha1(spm_model_file),
              **serving.vocabulary_identity(spm_model_file, vocab_file),
              "do_lower_case": bool(do_lower_case),
              "albert_config": config.to_dict() if config is not None else None}

  def write(tmp_dir):
    staging = tmp_dir + "-assets"
    try:
      staged = serving.stage_assets(staging, [vocabulary])
      module = HubPreprocessorModule(tokenizer, seq_length, tf.saved_model.Asset(staged[0]))
      tf.saved_model.save(module, tmp_dir)
    finally:
      fileio.remove(staging)
  return write_atomically(export_dir, identity, write)
