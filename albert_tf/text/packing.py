"""How token sequences become encoder inputs: the official truncation rules and the layout
`[CLS] A [SEP] (B [SEP])`, for Python lists (feature writers) and ragged tensors (serving).

Both forms live here so that the TFRecords written for training and the raw-text signatures of an
export pack text the same way:
  classifier (GLUE)  one segment keeps its first max_seq_length - 2 tokens; a pair is cut one
                     token at a time from the end of the longer segment (B on ties) until it
                     fits max_seq_length - 3 (official `_truncate_seq_pair`); a text B
                     without pieces is no segment at all (the official `if tokens_b:`).
  RACE choice        the question+option keeps its *last* max_qa_length tokens and the context
                     its first max_seq_length - 3 - len(question+option) (official race_utils).
Segment ids are 0 for [CLS] A [SEP] and 1 for B [SEP]; padding is id 0 with mask 0.
"""

import tensorflow as tf

CLS, SEP = "[CLS]", "[SEP]"


# ----------------------------------------------------------------------------- Python lists


def truncate_seq_pair(tokens_a, tokens_b, max_length):
  """Truncates in place, one token at a time from the end of the longer list (official rule)."""
  while len(tokens_a) + len(tokens_b) > max_length:
    if len(tokens_a) > len(tokens_b):
      tokens_a.pop()
    else:
      tokens_b.pop()


def fit_classifier_tokens(tokens_a, tokens_b, max_seq_length):
  """(tokens_a, tokens_b) cut so that [CLS] A [SEP] (B [SEP]) fits max_seq_length.

  tokens_b: a list, or None/empty for a single segment. Lists are truncated in place for pairs.
  """
  if tokens_b:
    truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    return tokens_a, tokens_b
  return tokens_a[:max_seq_length - 2], tokens_b


def fit_choice_tokens(context_tokens, ending_tokens, max_seq_length, max_qa_length):
  """RACE: (context, question+option) with the ending's last max_qa_length tokens kept and the
  context's head filling what is left of max_seq_length."""
  ending_tokens = ending_tokens[-max_qa_length:]
  context_tokens = context_tokens[:max(0, max_seq_length - 3 - len(ending_tokens))]
  return context_tokens, ending_tokens


def pack_tokens(tokens_a, tokens_b, max_seq_length):
  """[CLS] A [SEP] (B [SEP]) -> (tokens, segment_ids) with segment 1 for B; no padding."""
  tokens = [CLS] + list(tokens_a) + [SEP]
  segment_ids = [0] * len(tokens)
  if tokens_b:
    tokens += list(tokens_b) + [SEP]
    segment_ids += [1] * (len(tokens_b) + 1)
  assert len(tokens) <= max_seq_length
  return tokens, segment_ids



def pad_ids(ids, max_seq_length):
  """ids + 0s up to max_seq_length."""
  return ids + [0] * (max_seq_length - len(ids))


def ids_mask_segments(tokenizer, tokens, segment_ids, max_seq_length):
  """Packed tokens -> ([max_seq_length] input_ids, input_mask, segment_ids), padded with 0."""
  input_ids = tokenizer.convert_tokens_to_ids(tokens)
  input_mask = [1] * len(input_ids)
  return (pad_ids(list(input_ids), max_seq_length), pad_ids(input_mask, max_seq_length),
          pad_ids(segment_ids, max_seq_length))


def encode_text_pair(text_a, text_b, max_seq_length, tokenizer):
  """`[CLS] A [SEP] (B [SEP])` ids, truncated and padded to max_seq_length as the official
  feature writer (and the serving signature) do.

  tokenizer: has tokenize(text) and convert_tokens_to_ids(tokens).
  Returns:
    {"input_ids", "input_mask", "segment_ids": [max_seq_length] python ints}.
  """
  tokens_a = tokenizer.tokenize(text_a)
  tokens_b = tokenizer.tokenize(text_b) if text_b else None
  tokens_a, tokens_b = fit_classifier_tokens(tokens_a, tokens_b, max_seq_length)
  tokens, segment_ids = pack_tokens(tokens_a, tokens_b, max_seq_length)
  input_ids, input_mask, segment_ids = ids_mask_segments(tokenizer, tokens, segment_ids,
                                                         max_seq_length)
  return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}


# ----------------------------------------------------------------------------- ragged tensors


def classifier_truncation_lengths(len_a, len_b, max_num_tokens):
  """Lengths after the official `_truncate_seq_pair` (pop from the longer; B on ties).

  Closed form of the loop: len_a' = min(len_a, max(max_num_tokens - len_b, ceil(max/2))),
  len_b' = min(len_b, max_num_tokens - len_a'). Works elementwise on int tensors.
  """
  half_up = (max_num_tokens + 1) // 2
  new_a = tf.minimum(len_a, tf.maximum(max_num_tokens - len_b, half_up))
  new_b = tf.minimum(len_b, max_num_tokens - new_a)
  return new_a, new_b


def truncate_rows(ragged, lengths, from_end=False):
  """Keeps the first (or, with from_end, the last) lengths[i] items of row i.

  Args:
    ragged: RaggedTensor [batch, (n_i)].
    lengths: int tensor [batch] (any int dtype); rows shorter than their length stay whole.
    from_end: keep the tail of each row instead of its head.
  Returns:
    RaggedTensor [batch, (min(n_i, lengths[i]))], same dtype as `ragged`.
  """
  row_lengths = ragged.row_lengths()
  kept = tf.minimum(tf.cast(lengths, row_lengths.dtype), row_lengths)
  positions = tf.ragged.range(row_lengths)
  if from_end:
    keep = positions >= tf.expand_dims(row_lengths - kept, 1)
  else:
    keep = positions < tf.expand_dims(kept, 1)
  return tf.ragged.boolean_mask(ragged, keep)


def fit_classifier_ids(ids_a, ids_b, max_seq_length):
  """`fit_classifier_tokens` in graph: ragged [batch, (n)] ids -> (ids_a, ids_b or None)."""
  len_a = ids_a.row_lengths()
  if ids_b is None:
    return truncate_rows(ids_a, tf.minimum(len_a, max_seq_length - 2)), None
  len_b = ids_b.row_lengths()
  new_a, new_b = classifier_truncation_lengths(
      len_a, len_b, tf.constant(max_seq_length - 3, len_a.dtype))
  # A B without pieces is no second segment (official `if tokens_b:`): A keeps max - 2.
  new_a = tf.where(len_b > 0, new_a, tf.minimum(len_a, max_seq_length - 2))
  return truncate_rows(ids_a, new_a), truncate_rows(ids_b, new_b)


def fit_choice_ids(context_ids, ending_ids, max_seq_length, max_qa_length):
  """`fit_choice_tokens` in graph: ragged [batch, (n)] ids -> (context_ids, ending_ids)."""
  ending_ids = truncate_rows(ending_ids, tf.fill([ending_ids.nrows()], max_qa_length),
                             from_end=True)
  context_budget = tf.maximum(0, max_seq_length - 3 - tf.cast(ending_ids.row_lengths(), tf.int32))
  return truncate_rows(context_ids, context_budget), ending_ids


def _column(value, batch):
  """A ragged [batch, 1] column of one int32 id."""
  return tf.RaggedTensor.from_tensor(tf.fill(tf.stack([batch, 1]), tf.constant(value, tf.int32)))


def pack_ids(ids_a, ids_b, max_seq_length, cls_id, sep_id, pad_id=0, sep_after_empty_b=True):
  """`pack_tokens` in graph, padded: fitted ragged ids -> dense encoder inputs.

  Args:
    ids_a, ids_b: RaggedTensor [batch, (n)] of ids that already fit (see fit_*_ids); ids_b may be
      None for single segments.
    max_seq_length: S, the padded length.
    cls_id, sep_id, pad_id: the special ids.
    sep_after_empty_b: False for classifier pairs: a row whose B is empty ends after A's [SEP]
      (the official feature writer's `if tokens_b:`); RACE always writes B's [SEP].
  Returns:
    dict of int32 [batch, S]: input_ids, input_mask, segment_ids.
  """
  batch = ids_a.nrows()
  cls, sep = _column(cls_id, batch), _column(sep_id, batch)
  parts = [cls, tf.cast(ids_a, tf.int32), sep]
  segments = [tf.zeros_like(p) for p in parts]
  if ids_b is not None:
    sep_b = sep
    if not sep_after_empty_b:
      has_b = tf.cast(ids_b.row_lengths() > 0, tf.int64)
      sep_b = tf.RaggedTensor.from_row_lengths(
          tf.fill(tf.reshape(tf.reduce_sum(has_b), [1]), tf.constant(sep_id, tf.int32)), has_b)
    parts += [tf.cast(ids_b, tf.int32), sep_b]
    segments += [tf.ones_like(p) for p in parts[3:]]
  input_ids = tf.concat(parts, axis=1)
  shape = [None, max_seq_length]
  return {
      "input_ids": input_ids.to_tensor(default_value=pad_id, shape=shape),
      "input_mask": tf.ones_like(input_ids).to_tensor(default_value=0, shape=shape),
      "segment_ids": tf.concat(segments, axis=1).to_tensor(default_value=0, shape=shape),
  }


def pack_choice(context_ids, ending_ids, max_seq_length, max_qa_length, cls_id, sep_id):
  """RACE in graph: [CLS] context [SEP] ending [SEP] under the RACE truncation rule.

  context_ids, ending_ids: RaggedTensor [batch, (n)]. Returns dict of int32 [batch, S].
  """
  context_ids, ending_ids = fit_choice_ids(context_ids, ending_ids, max_seq_length,
                                           max_qa_length)
  return pack_ids(context_ids, ending_ids, max_seq_length, cls_id, sep_id)
