"""In-graph packing of RACE choices (core TensorFlow ops only).

Sentence (pair) packing for classifiers is `albert_tf.text.InGraphTokenizer.pack`; RACE needs its
own rule (official race_utils): the question+option keeps its *last* max_qa_length tokens and the
context is cut to fit. Mirrors `albert_tf.data.classifier_features.convert_race_example`.
"""

import tensorflow as tf


def _keep_first(ragged, lengths):
  """Keeps the first lengths[i] items of row i of a RaggedTensor."""
  positions = tf.ragged.range(tf.cast(ragged.row_lengths(), tf.int32))
  return tf.ragged.boolean_mask(ragged, positions < tf.expand_dims(lengths, 1))


def _keep_last(ragged, lengths):
  """Keeps the last lengths[i] items of row i of a RaggedTensor."""
  row_lengths = tf.cast(ragged.row_lengths(), tf.int32)
  positions = tf.ragged.range(row_lengths)
  return tf.ragged.boolean_mask(
      ragged, positions >= tf.expand_dims(row_lengths - tf.minimum(lengths, row_lengths), 1))


def _fill(ragged, value):
  return tf.ones_like(ragged) * value


def pack_choice(context_ids, ending_ids, max_seq_length, max_qa_length, cls_id, sep_id):
  """RACE: [CLS] context [SEP] ending [SEP]; the ending keeps its last max_qa_length tokens and
  the context is cut to fit (official race_utils.convert_single_example)."""
  context_ids = tf.cast(context_ids, tf.int32)
  ending_ids = tf.cast(ending_ids, tf.int32)
  batch = tf.cast(context_ids.nrows(), tf.int32)
  ending_ids = _keep_last(ending_ids, tf.fill([batch], max_qa_length))
  context_budget = tf.maximum(0, max_seq_length - 3 - tf.cast(ending_ids.row_lengths(), tf.int32))
  context_ids = _keep_first(context_ids, context_budget)
  cls = tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.constant(cls_id, tf.int32)))
  sep = tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.constant(sep_id, tf.int32)))
  ids = tf.concat([cls, context_ids, sep, ending_ids, sep], axis=1)
  segments = tf.concat([_fill(cls, 0), _fill(context_ids, 0), _fill(sep, 0),
                        _fill(ending_ids, 1), _fill(sep, 1)], axis=1)
  return _to_dense(ids, segments, max_seq_length)


def _to_dense(ids, segments, max_seq_length):
  shape = [None, max_seq_length]
  return {"input_ids": ids.to_tensor(0, shape=shape),
          "input_mask": tf.ones_like(ids).to_tensor(0, shape=shape),
          "segment_ids": segments.to_tensor(0, shape=shape)}
