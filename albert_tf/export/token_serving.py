"""The token classifier's (NER) SavedModel: raw text in, entities with character offsets out.

  serving_default  text string [batch] -> entities and per-word / per-piece tags. In the graph:
                   words split on whitespace (Python's str.split set, with their character
                   offsets), each word tokenized alone with the in-graph SentencePiece tokenizer
                   (text/in_graph_tokenizer.py; a word of no piece is one <unk>, as
                   data/token_alignment.word_pieces), [CLS] pieces [SEP], the model, the tag of
                   each word's first piece, then entities grouped by the scheme's rules with tf
                   ops (BIO: B-X, or an I-X that does not continue an X, starts an entity; BIOES:
                   B-X/S-X start, after E-/S- a new one starts; IO: a run of one type).
  words            pre-split words, string [batch, max_words] ("" pads a row; a word holding
                   whitespace is refused): the same outputs, for the words joined by one space.
  token_ids        input_ids / input_mask / segment_ids int32 [batch, seq_len] -> logits,
                   probabilities, piece_tag / piece_tag_id / piece_score [batch, seq_len].

One window per text: a text of more than max_seq_length - 2 pieces is an InvalidArgumentError
naming it (run_ner.py --do_predict cuts long sentences into windows; the served model does not).

serving_default outputs, padded per batch ("" / -1 / 0 after each example's own count):
  entity_type, entity_text string [batch, E]; entity_start, entity_end int32 [batch, E]
  (characters of the input text, end exclusive: text[start:end] == entity_text);
  entity_word_start, entity_word_end int32 [batch, E] (the same in words, end exclusive);
  entity_score float32 [batch, E] (the mean over the entity's words of their tag's probability);
  num_entities int32 [batch]; word, word_tag string [batch, W]; word_start, word_end int32;
  word_score float32; num_words int32 [batch]; piece_tag string [batch, seq_len].
"""

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.data import tagged_files
from albert_tf.export import input_checks
from albert_tf.export import serving

# Tag prefixes as numbers, for the grouping in the graph.
_OUTSIDE, _BEGIN, _INSIDE, _END, _SINGLE = range(5)
_PREFIX_CODES = {"B": _BEGIN, "I": _INSIDE, "E": _END, "S": _SINGLE}


def tag_tables(label_list):
  """(prefix code per tag, entity type index per tag (0: O), the type names with "" first)."""
  types = [""] + sorted({tag.partition("-")[2] for tag in label_list
                         if tag != tagged_files.OUTSIDE})
  prefixes, type_ids = [], []
  for tag in label_list:
    prefix, _, entity_type = tag.partition("-")
    prefixes.append(_OUTSIDE if tag == tagged_files.OUTSIDE else _PREFIX_CODES[prefix])
    type_ids.append(types.index(entity_type) if tag != tagged_files.OUTSIDE else 0)
  return prefixes, type_ids, types


def entity_starts(prefix, entity_type, first_of_text):
  """bool [words]: the words that start an entity (flat over the batch).

  A word of a type starts one unless it continues the word before: same text, same type, its
  own prefix I- or E-, and the word before not an E- or S- (which end an entity). IO tags
  (all I-) so make a run of one type one entity.
  """
  previous_type = tf.concat([[0], entity_type[:-1]], 0)
  previous_prefix = tf.concat([[_OUTSIDE], prefix[:-1]], 0)
  continues = ((prefix == _INSIDE) | (prefix == _END)) & (previous_type == entity_type) & (
      previous_prefix != _END) & (previous_prefix != _SINGLE) & tf.logical_not(first_of_text)
  return (entity_type > 0) & tf.logical_not(continues)


def _char_offsets(texts, rows, byte_offsets):
  """Byte offsets into texts[rows] -> character offsets (UTF-8 characters before them)."""
  prefixes = tf.strings.substr(tf.gather(texts, rows), tf.zeros_like(byte_offsets), byte_offsets)
  return tf.strings.length(prefixes, unit="UTF8_CHAR")


class TokenClassifierServing(tf.Module):
  """The signatures of an AlbertTokenClassifier (see the module docstring).

  text_tokenizer: the InGraphTokenizer of the model's SentencePiece model and max_seq_length.
  """

  def __init__(self, model, label_list, max_seq_length, text_tokenizer):
    super().__init__()
    # The weights only; the model through the closure (export/serving.py says why).
    self.model_variables = list(model.variables)
    self._run_model = lambda features: serving.run_for_serving(model, features)
    self._config = model.config
    self.max_seq_length = int(max_seq_length)
    self.text_tokenizer = text_tokenizer
    self._tags = tf.constant(list(label_list) + [""], tf.string)  # "" for padding
    prefixes, type_ids, types = tag_tables(label_list)
    self._prefixes = tf.constant(prefixes, tf.int32)
    self._type_ids = tf.constant(type_ids, tf.int32)
    self._types = tf.constant(types, tf.string)
    self._unk_id = text_tokenizer.unk_id
    self._space_re = text_tokenizer.whitespace_pattern

  # ------------------------------------------------------------------ token ids
  def _tag_pieces(self, features):
    """Model outputs for checked int32 features, with each position's best tag."""
    outputs = self._run_model(serving.trim_padding(features))
    probabilities = tf.cast(outputs["probabilities"], tf.float32)
    tag_id = tf.argmax(probabilities, axis=-1, output_type=tf.int32)
    length = tf.shape(tag_id)[1]
    mask = features["input_mask"][:, :length] > 0
    padding = tf.fill(tf.shape(tag_id), tf.shape(self._tags)[0] - 1)
    return {"logits": tf.cast(outputs["logits"], tf.float32), "probabilities": probabilities,
            "piece_tag_id": tag_id, "piece_score": tf.reduce_max(probabilities, axis=-1),
            "piece_tag": tf.gather(self._tags, tf.where(mask, tag_id, padding))}

  def token_ids_fn(self):
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)] * 3, autograph=False)
    def token_ids(input_ids, input_mask, segment_ids):
      return self._tag_pieces(input_checks.check_token_inputs(
          {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
          self._config))
    return token_ids

  # ------------------------------------------------------------------ raw text
  def _word_pieces(self, words):
    """Flat words [n] -> their piece ids, ragged [n, (pieces)], an empty word's one <unk>."""
    pieces = self.text_tokenizer.tokenize(words)
    unk = tf.fill(tf.stack([tf.shape(words)[0], 1]), self._unk_id)
    with_unk = tf.concat([pieces, tf.RaggedTensor.from_tensor(unk)], axis=1)
    keep = tf.ragged.range(with_unk.row_lengths()) < tf.maximum(
        pieces.row_lengths(), 1)[:, None]
    return tf.ragged.boolean_mask(with_unk, keep)

  def raw_text_fn(self):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")],
                 autograph=False)
    def raw_text(text):
      text = input_checks.after_checks(
          {"text": text}, [input_checks.layout_check("text", text, ("batch",))])["text"]
      return self._tag_texts(text)
    return raw_text

  def words_fn(self):
    """The `words` signature: pre-split words, string [batch, max_words] ("" pads a row), for
    clients that keep their own tokenization (CoNLL files); answered as the text of the words
    joined by single spaces, which the offsets index."""
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.string, name="words")],
                 autograph=False)
    def words(words):
      spaced = tf.strings.regex_full_match(words, ".*" + self._space_re + ".*")
      bad = tf.cast(tf.argmax(tf.cast(tf.reshape(spaced, [-1]), tf.int32)), tf.int32)
      width = tf.maximum(tf.shape(words)[1], 1)
      words = input_checks.after_checks({"words": words}, [
          input_checks.layout_check("words", words, ("batch", "words")),
          input_checks.Check(tf.logical_not(tf.reduce_any(spaced)), lambda: tf.strings.join([
              "words[", tf.strings.as_string(bad // width), ", ",
              tf.strings.as_string(bad % width), "] holds whitespace: one word per entry"]))])
      kept = tf.ragged.boolean_mask(words["words"], words["words"] != "")
      return self._tag_texts(tf.strings.reduce_join(kept, axis=1, separator=" "))
    return words

  def _tag_texts(self, text):
    """Checked texts [batch] -> the serving_default outputs (see the module docstring)."""
    room = self.max_seq_length - 2
    words, byte_starts, byte_ends = tf_text.regex_split_with_offsets(
        text, self._space_re)
    word_pieces = self._word_pieces(words.flat_values)  # [words, (pieces)]
    counts = tf.cast(word_pieces.row_lengths(), tf.int32)
    per_text = tf.RaggedTensor.from_row_splits(word_pieces, words.row_splits)
    ids = per_text.merge_dims(1, 2)  # [batch, (pieces)]
    lengths = tf.cast(ids.row_lengths(), tf.int32)
    too_long = tf.argmax(tf.cast(lengths > room, tf.int32), output_type=tf.int32)
    checks = [input_checks.Check(
        tf.reduce_all(lengths <= room),
        lambda: tf.strings.join([
            "text ", tf.strings.as_string(too_long), " has ",
            tf.strings.as_string(tf.gather(lengths, too_long)), " pieces, more than ",
            str(room), " (max_seq_length - 2): the served model tags one window; split the "
            "text, or tag it with run_ner.py --do_predict"]))]
    ids = input_checks.after_checks({"ids": ids.flat_values}, checks)["ids"]
    ids = tf.RaggedTensor.from_row_splits(ids, per_text.merge_dims(1, 2).row_splits)
    packed = self.text_tokenizer.pack(ids)
    pieces = self._tag_pieces(packed)
    # Each word's first piece: 1 ([CLS]) + the pieces of the words before it in its text.
    rows = tf.cast(words.value_rowids(), tf.int32)
    before = tf.cumsum(counts, exclusive=True)
    text_base = tf.gather(tf.concat([before, [tf.reduce_sum(counts)]], 0),
                          tf.cast(words.row_starts(), tf.int32))
    first_piece = 1 + before - tf.gather(text_base, rows)
    index = tf.stack([rows, first_piece], axis=1)
    word_probabilities = tf.gather_nd(pieces["probabilities"], index)
    word_tag_id = tf.argmax(word_probabilities, axis=-1, output_type=tf.int32)
    word_score = tf.reduce_max(word_probabilities, axis=-1)
    word_start = _char_offsets(text, rows, tf.cast(byte_starts.flat_values, tf.int32))
    word_end = _char_offsets(text, rows, tf.cast(byte_ends.flat_values, tf.int32))
    # Entities over the flat words (a text's first word always starts afresh).
    prefix = tf.gather(self._prefixes, word_tag_id)
    entity_type = tf.gather(self._type_ids, word_tag_id)
    word_index = tf.range(tf.shape(rows)[0]) - tf.gather(tf.cast(words.row_starts(), tf.int32),
                                                         rows)  # within its text
    first_of_text = word_index == 0
    starts = entity_starts(prefix, entity_type, first_of_text)
    in_entity = entity_type > 0
    entity_id = tf.cumsum(tf.cast(starts, tf.int32)) - 1
    members = tf.where(in_entity)[:, 0]
    member_entity = tf.gather(entity_id, members)
    count = tf.reduce_sum(tf.cast(starts, tf.int32))
    entity_row = tf.math.unsorted_segment_min(tf.gather(rows, members), member_entity, count)
    entity_start = tf.math.unsorted_segment_min(tf.gather(word_start, members),
                                                member_entity, count)
    entity_end = tf.math.unsorted_segment_max(tf.gather(word_end, members), member_entity,
                                              count)
    entity_score = tf.math.unsorted_segment_mean(tf.gather(word_score, members),
                                                 member_entity, count)
    entity_first_word = tf.math.unsorted_segment_min(tf.gather(word_index, members),
                                                     member_entity, count)
    entity_end_word = tf.math.unsorted_segment_max(tf.gather(word_index, members),
                                                   member_entity, count) + 1
    entity_kind = tf.math.unsorted_segment_min(tf.gather(entity_type, members), member_entity,
                                               count)
    entity_text = tf.strings.substr(tf.gather(text, entity_row), entity_start,
                                    entity_end - entity_start, unit="UTF8_CHAR")
    batch = tf.shape(text)[0]

    def per_text_dense(values, rows_of, default):
      ragged = tf.RaggedTensor.from_value_rowids(values, tf.cast(rows_of, tf.int64),
                                                 nrows=tf.cast(batch, tf.int64))
      return ragged.to_tensor(default_value=default)

    return {
        "entity_type": per_text_dense(tf.gather(self._types, entity_kind), entity_row, ""),
        "entity_text": per_text_dense(entity_text, entity_row, ""),
        "entity_start": per_text_dense(entity_start, entity_row, -1),
        "entity_end": per_text_dense(entity_end, entity_row, -1),
        "entity_score": per_text_dense(entity_score, entity_row, 0.0),
        "entity_word_start": per_text_dense(entity_first_word, entity_row, -1),
        "entity_word_end": per_text_dense(entity_end_word, entity_row, -1),
        "num_entities": tf.math.bincount(entity_row, minlength=batch, maxlength=batch,
                                         dtype=tf.int32),
        "word": per_text_dense(words.flat_values, rows, ""),
        "word_tag": per_text_dense(tf.gather(self._tags, word_tag_id), rows, ""),
        "word_start": per_text_dense(word_start, rows, -1),
        "word_end": per_text_dense(word_end, rows, -1),
        "word_score": per_text_dense(word_score, rows, 0.0),
        "num_words": tf.cast(words.row_lengths(), tf.int32),
        "piece_tag": pieces["piece_tag"],
    }

  def tf_example_fn(self):
    """No tf.Example signature: token_ids carries the same inputs."""
    return None

