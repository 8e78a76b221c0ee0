"""In-graph checks of serving inputs: every exported signature validates what it is fed.

A signature's TensorSpec does not constrain what a caller feeds: `tf.saved_model.load(...)
.signatures[...]` runs the graph with any shape, even another rank or a length other than a
spec's fixed one, and TF Serving hands request tensors to the graph as they come. Unchecked, a
shorter input_mask silently truncates the ids (trim_padding), a batch-1 segment_ids is broadcast
against batch-2 ids, and other mistakes fail deep inside the model (a reshape, a gather), or on
GPU, where tf.gather returns zeros for an index out of range, not at all. So every signature
first runs its checks and raises InvalidArgumentError with one line naming the input and what
was expected:

  assertion failed: [input_mask has shape [1, 16], expected the shape of input_ids [1, 32]]

The checks are ordinary graph ops (reductions, comparisons, tf.debugging.Assert) that the model
waits on through control dependencies, so they hold on CPU, GPU and in TF Serving alike; nothing
is clamped. Their cost is a few reductions over the int inputs and one conditional: the message
strings are built only on the failure branch.

  checks = token_input_checks(features, config)       # [Check], nothing runs yet
  features = after_checks(features, checks)           # the same tensors, gated on the checks
"""

from typing import Callable, NamedTuple

import tensorflow as tf

TOKEN_INPUTS = ("input_ids", "input_mask", "segment_ids")


class Check(NamedTuple):
  """One condition on the inputs.

  ok: bool scalar tensor, True when the inputs pass.
  message: () -> string scalar tensor: the one-line error, built only when a check fails.
  """
  ok: tf.Tensor
  message: Callable[[], tf.Tensor]


def after_checks(tensors, checks):
  """Returns `tensors` (a dict) gated on `checks`: every consumer waits for them to pass.

  Raises (when the graph runs) InvalidArgumentError with the first failing check's message.
  """
  checks = list(checks)
  if not checks:
    return dict(tensors)
  oks = tf.stack([check.ok for check in checks])
  all_ok = tf.reduce_all(oks)

  def fail():
    messages = tf.stack([check.message() for check in checks])
    first_failure = tf.argmin(tf.cast(oks, tf.int32))
    return tf.debugging.Assert(all_ok, [messages[first_failure]])

  verdict = tf.cond(all_ok, tf.no_op, fail, name="check_inputs")
  with tf.control_dependencies([verdict]):
    return {name: tf.identity(value) for name, value in tensors.items()}


# ----------------------------------------------------------------------------- text helpers
def _text(value):
  """A scalar int tensor as a string tensor."""
  return tf.strings.as_string(value)


def shape_text(tensor):
  """The runtime shape of `tensor` as "[1, 16]"."""
  dims = tf.strings.as_string(tf.shape(tensor))
  return tf.strings.join(["[", tf.strings.reduce_join(dims, separator=", "), "]"])


def _join(*parts):
  return tf.strings.join([p if isinstance(p, tf.Tensor) else tf.constant(p) for p in parts])


def _layout_text(layout):
  return "[" + ", ".join(str(d) for d in layout) + "]"


# ----------------------------------------------------------------------------- shapes
def dims(tensor, rank):
  """The runtime sizes of the first rank + 1 dimensions, 0 past the tensor's real rank.

  int32 [rank + 1]. Safe whatever rank the caller fed: entry `rank` is 0 exactly when the
  tensor has at most `rank` dimensions (or a zero-size one, which `layout_check` also catches
  through the element count). The static rank of a signature input cannot be used instead:
  graph optimizers fold it to the spec's rank, whatever the caller feeds.
  """
  return tf.pad(tf.shape(tensor), [[0, rank + 1]])[:rank + 1]


def layout_check(name, tensor, layout, note=""):
  """`tensor` has len(layout) dimensions and the fixed sizes layout names.

  layout: one entry per dimension, an int (a required size) or a str (any size: a name for
  the message), e.g. ("batch", 4, "seq_len").
  """
  rank = len(layout)
  sizes = dims(tensor, rank)
  ok = tf.logical_and(tf.equal(sizes[rank], 0),
                      tf.equal(tf.size(tensor), tf.reduce_prod(sizes[:rank])))
  for axis, size in enumerate(layout):
    if isinstance(size, int):
      ok = tf.logical_and(ok, tf.equal(sizes[axis], size))
  expected = _layout_text(layout) + (f" ({note})" if note else "")
  return Check(ok, lambda: _join(name, " has shape ", shape_text(tensor), ", expected ",
                                 expected))


def same_shape_check(name, tensor, reference_name, reference, rank):
  """`tensor` has exactly the shape of `reference` (both of `rank` dimensions)."""
  ok = tf.logical_and(tf.reduce_all(tf.equal(dims(tensor, rank), dims(reference, rank))),
                      tf.equal(tf.size(tensor), tf.size(reference)))
  return Check(ok, lambda: _join(name, " has shape ", shape_text(tensor),
                                 ", expected the shape of ", reference_name, " ",
                                 shape_text(reference)))


def batch_check(name, tensor, reference_name, reference):
  """`tensor` and `reference` have the same size in dimension 0."""
  ok = tf.equal(dims(tensor, 1)[0], dims(reference, 1)[0])
  return Check(ok, lambda: _join(name, " has shape ", shape_text(tensor), ", expected the batch ",
                                 "size of ", reference_name, " ", shape_text(reference)))


def length_check(name, length, limit, what):
  """1 <= length <= limit (a scalar int tensor: a sequence length)."""
  ok = tf.logical_and(tf.greater_equal(length, 1), tf.less_equal(length, limit))
  return Check(ok, lambda: _join(name, " has seq_len ", _text(length), ", expected 1 to ",
                                 str(limit), " (", what, ")"))


# ----------------------------------------------------------------------------- values
def range_check(name, tensor, low, high, expected):
  """Every value of `tensor` is in [low, high). high: int or a scalar int tensor.

  expected: what the message says was expected, e.g. "token ids in [0, 30000) (vocab_size)",
    or a function returning it as a string tensor (for a bound known only at run time).
  An empty tensor passes.
  """
  # Flattened first: tf.reduce_* would reduce over the spec's static axes, not the fed rank.
  values = tf.reshape(tensor, [-1])
  smallest, largest = tf.reduce_min(values), tf.reduce_max(values)
  high = tf.cast(high, tensor.dtype)
  ok = tf.logical_and(tf.greater_equal(smallest, tf.cast(low, tensor.dtype)),
                      tf.less(largest, high))
  return Check(ok, lambda: _join(name, " has values from ", _text(smallest), " to ",
                                 _text(largest), ", expected ",
                                 expected() if callable(expected) else expected))


def token_value_check(name, tensor, config):
  """The value range of a token input: ids in the vocabulary, segment ids below
  type_vocab_size, masks 0 or 1 (input_mask, p_mask)."""
  if name == "input_ids":
    return range_check(name, tensor, 0, config.vocab_size,
                       f"token ids in [0, {config.vocab_size}) (vocab_size)")
  if name == "segment_ids":
    return range_check(name, tensor, 0, config.type_vocab_size,
                       f"segment ids in [0, {config.type_vocab_size}) (type_vocab_size)")
  return range_check(name, tensor, 0, 2, "0 or 1")


def token_input_checks(features, config, num_choices=None, seq_length=None):
  """The checks of encoder inputs: one shape for all, a valid sequence length, valid values.

  Args:
    features: dict of int tensors input_ids, input_mask, segment_ids (+ p_mask for SQuAD v2.0),
      each [batch, seq_len], or [batch, num_choices, seq_len] for multiple choice.
    config: the model's AlbertConfig (vocab_size, type_vocab_size, max_position_embeddings).
    num_choices: the fixed middle dimension of multiple-choice inputs, else None.
    seq_length: a fixed seq_len (an export's max_seq_length), else None: any length from 1 to
      max_position_embeddings.
  Returns:
    a list of Check, in the order their messages take precedence.
  """
  layout = ("batch",) + ((num_choices,) if num_choices else ()) + (
      seq_length if seq_length else "seq_len",)
  rank = len(layout)
  note = f"max_seq_length {seq_length}" if seq_length else ""
  reference = features["input_ids"]
  checks = [layout_check("input_ids", reference, layout, note)]
  checks += [same_shape_check(name, value, "input_ids", reference, rank)
             for name, value in features.items() if name != "input_ids"]
  if not seq_length:
    checks.append(length_check("input_ids", dims(reference, rank)[rank - 1],
                               config.max_position_embeddings, "max_position_embeddings"))
  checks += [token_value_check(name, value, config) for name, value in features.items()]
  return checks


def check_token_inputs(features, config, num_choices=None, seq_length=None):
  """`features` gated on `token_input_checks` (same arguments)."""
  return after_checks(features, token_input_checks(features, config, num_choices, seq_length))


def position_checks(name, positions, input_ids):
  """Positions into the sequences of input_ids: [batch, num_positions], each in [0, seq_len)."""
  seq_len = dims(input_ids, 2)[1]
  return [layout_check(name, positions, ("batch", "num_positions")),
          batch_check(name, positions, "input_ids", input_ids),
          range_check(name, positions, 0, seq_len,
                      lambda: _join("positions in [0, ", _text(seq_len),
                                    ") (the seq_len of input_ids)"))]


# ----------------------------------------------------------------------------- tf.Example
def record_length_checks(parsed, length, what):
  """Every record of a parsed batch holds `length` values of each feature.

  parsed: {name: RaggedTensor [num_records, (values)]} from tf.io.RaggedFeature.
  what: how the message explains `length`, e.g. "max_seq_length".
  """
  checks = []
  for name, ragged in parsed.items():
    row_lengths = ragged.row_lengths()

    def message(name=name, row_lengths=row_lengths):
      record = tf.argmax(tf.cast(tf.not_equal(row_lengths, length), tf.int32))
      return _join("tf_example record ", _text(record), " has ", _text(row_lengths[record]),
                   f" {name} values, expected {length} ({what})")

    checks.append(Check(tf.reduce_all(tf.equal(row_lengths, length)), message))
  return checks
