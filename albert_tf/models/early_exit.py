"""Patience-based early exit at inference: the layers run in a tf.while_loop that each example
leaves as soon as its internal classifier's answer has stopped changing (PABEE's rule,
albert_tf/heads/early_exit.py), and that ends once every example of the batch has left.

Per example, not per batch: after each layer the examples that exit are written into the
result at their place in the batch and dropped from the running batch, so later layers run for
the rest only (a batch of 32 gains too, not only batch 1). The last layer is the classifier's
own (its first-token-only form, as the full model runs it), so with a patience no example can
reach (>= L - 1) the answers are the full model's, bit for bit.

Compiled (XLA: `--xla_whole_step`, every step on a TPU) shapes must be static, and a shrinking
batch is not: XLA keeps a boolean-masked tensor at its padded full size, so rows would be
written from stale entries. Under `static_shapes()` the loop therefore keeps every row: each
layer runs for the whole batch, finished rows are only masked (their answer is written once,
when they exit), and the loop still ends once every row has left (batch 1 keeps its speed-up;
a larger batch runs until its slowest example exits). The trainer enters `static_shapes()`
around every step it compiles.
"""

import contextlib

import tensorflow as tf

# How many `static_shapes()` blocks are open (a counter, not a thread-local: a
# MirroredStrategy traces its replicas' steps in threads of its own).
_STATIC_SHAPES = [0]


@contextlib.contextmanager
def static_shapes():
  """While open, `patience_exit` traces its fixed-shape loop (for XLA / TPU compilation)."""
  _STATIC_SHAPES[0] += 1
  try:
    yield
  finally:
    _STATIC_SHAPES[0] -= 1


def static_shapes_wanted():
  """Whether a `static_shapes()` block is open."""
  return _STATIC_SHAPES[0] > 0


def _layer_fn(encoder, num_layers):
  """(layer index tensor, hidden, mask_adder) -> hidden after that layer (0-based, any layer
  but the last): one function when every layer shares its blocks (ALBERT's official layout),
  else a switch over the distinct layers."""
  signatures = [encoder.layer_blocks(layer) for layer in range(num_layers - 1)]
  distinct = sorted(set(signatures))
  if len(distinct) == 1:
    return lambda i, hidden, mask_adder: encoder.run_layer(hidden, mask_adder, distinct[0])
  branch_of_layer = tf.constant([distinct.index(s) for s in signatures], tf.int32)

  def run(i, hidden, mask_adder):
    return tf.switch_case(tf.gather(branch_of_layer, i), [
        (lambda blocks=blocks: encoder.run_layer(hidden, mask_adder, blocks))
        for blocks in distinct])
  return run


def patience_exit(encoder, internal_heads, final_head, inputs, patience, is_regression=False,
                  regression_threshold=0.1, fixed_shapes=None):
  """Runs a classifier with early exit for inference.

  Args:
    encoder: the AlbertEncoder (its pooler is every layer's).
    internal_heads: the L - 1 internal ClassificationHeads (layer 1 first).
    final_head: the ordinary ClassificationHead (the last layer's).
    inputs: dict of int [batch, seq_len] input_ids, input_mask, segment_ids.
    patience: int >= 1: an example exits at the first layer l < L whose prediction equals
      (regression: differs by less than regression_threshold from) that of each of the
      `patience` layers before it.
    fixed_shapes: keep every row through the loop (for XLA); None: as `static_shapes()` says.
  Returns:
    (logits float32 [batch, num_classes] of each example's exit layer,
     exit_layer int32 [batch], 1-based: L for the examples that ran every layer).
  """
  if fixed_shapes is None:
    fixed_shapes = static_shapes_wanted()
  num_layers = encoder.config.num_hidden_layers
  _, hidden, mask_adder = encoder.embed(inputs, training=False)
  batch = tf.shape(hidden)[0]
  logits_out = tf.zeros([batch, final_head.num_classes], tf.float32)
  exit_out = tf.zeros([batch], tf.int32)
  if num_layers > 1:
    layer_logits = _internal_logits(encoder, internal_heads, num_layers)
    loop = _masked_loop if fixed_shapes else _shrinking_loop
    hidden, mask_adder, running, logits_out, exit_out = loop(
        hidden, mask_adder, logits_out, exit_out, layer_logits, num_layers, patience,
        is_regression, regression_threshold)
  else:
    running = None

  def last_layer():
    last = encoder.run_layer(hidden, mask_adder, encoder.layer_blocks(num_layers - 1),
                             first_token_only=True)
    logits = final_head(encoder.pooler(last[:, 0, :]), training=False)
    if running is None:
      return logits, tf.fill([batch], num_layers)
    if fixed_shapes:  # running: bool [batch]
      return (tf.where(running[:, None], logits, logits_out),
              tf.where(running, num_layers, exit_out))
    return (_written(logits_out, running, logits),  # running: the rows' int32 [n] places
            _written(exit_out, running, tf.fill(tf.shape(running), num_layers)))

  if running is None:
    return last_layer()
  any_running = (tf.reduce_any(running) if fixed_shapes else tf.size(running) > 0)
  return tf.cond(any_running, last_layer, lambda: (logits_out, exit_out))


def _written(out, where, values):
  return tf.tensor_scatter_nd_update(out, where[:, None], values)


def _internal_logits(encoder, internal_heads, num_layers):
  """(layer index i, hidden) -> (hidden after layer i, float32 [rows, classes] logits of that
  layer's internal classifier)."""
  run_layer = _layer_fn(encoder, num_layers)
  # [L-1, classes, hidden] and [L-1, classes]: the internal heads picked by the layer index.
  weights = tf.stack([head.output_weights for head in internal_heads])
  biases = tf.stack([head.output_bias for head in internal_heads])

  def layer_logits(i, hidden, mask_adder):
    hidden = run_layer(i, hidden, mask_adder)
    pooled = encoder.pooler(hidden[:, 0, :])
    logits = tf.cast(tf.matmul(pooled, tf.cast(tf.gather(weights, i), pooled.dtype),
                               transpose_b=True), tf.float32)
    return hidden, logits + tf.cast(tf.gather(biases, i), tf.float32)
  return layer_logits


def _agreement(i, logits, previous, count, is_regression, regression_threshold):
  """PABEE's count after layer i: (this layer's value float32 [rows], int32 [rows] count of
  consecutive layers agreeing with the one before)."""
  if is_regression:
    value = logits[:, 0]
    same = tf.abs(value - previous) < regression_threshold
  else:
    value = tf.cast(tf.argmax(logits, axis=-1, output_type=tf.int32), tf.float32)
    same = tf.equal(value, previous)
  return value, tf.where(same & (i > 0), count + 1, 0)


def _shrinking_loop(hidden, mask_adder, logits_out, exit_out, layer_logits, num_layers,
                    patience, is_regression, regression_threshold):
  """Layers 1 .. L-1, dropping exited rows (dynamic shapes). Returns the running rows' hidden
  and mask_adder, their int32 [n] places in the batch, and the outputs so far."""
  batch = tf.shape(hidden)[0]
  width = hidden.shape[-1]

  def body(i, hidden, mask_adder, index, previous, count, logits_out, exit_out):
    hidden, logits = layer_logits(i, hidden, mask_adder)
    value, count = _agreement(i, logits, previous, count, is_regression, regression_threshold)
    done = count >= patience
    where = tf.boolean_mask(index, done)
    logits_out = _written(logits_out, where, tf.boolean_mask(logits, done))
    exit_out = _written(exit_out, where, tf.fill(tf.shape(where), i + 1))
    keep = tf.logical_not(done)
    return (i + 1, tf.boolean_mask(hidden, keep), tf.boolean_mask(mask_adder, keep),
            tf.boolean_mask(index, keep), tf.boolean_mask(value, keep),
            tf.boolean_mask(count, keep), logits_out, exit_out)

  state = (tf.constant(0), hidden, mask_adder, tf.range(batch), tf.zeros([batch], tf.float32),
           tf.zeros([batch], tf.int32), logits_out, exit_out)
  invariants = (tf.TensorShape([]), tf.TensorShape([None, None, width]),
                tf.TensorShape([None, 1, 1, None]), tf.TensorShape([None]),
                tf.TensorShape([None]), tf.TensorShape([None]),
                tf.TensorShape([None, logits_out.shape[-1]]), tf.TensorShape([None]))
  # Layers depend on each other: parallel_iterations=1 keeps no copies in flight.
  _, hidden, mask_adder, index, _, _, logits_out, exit_out = tf.while_loop(
      lambda i, h, m, index, *_: tf.logical_and(i < num_layers - 1, tf.size(index) > 0),
      body, state, shape_invariants=invariants, parallel_iterations=1)
  return hidden, mask_adder, index, logits_out, exit_out


def _masked_loop(hidden, mask_adder, logits_out, exit_out, layer_logits, num_layers, patience,
                 is_regression, regression_threshold):
  """Layers 1 .. L-1 for every row, exited rows masked (static shapes). Returns hidden,
  mask_adder, bool [batch] running and the outputs so far."""
  batch = tf.shape(hidden)[0]

  def body(i, hidden, running, previous, count, logits_out, exit_out):
    hidden, logits = layer_logits(i, hidden, mask_adder)
    value, count = _agreement(i, logits, previous, count, is_regression, regression_threshold)
    exits = running & (count >= patience)
    logits_out = tf.where(exits[:, None], logits, logits_out)
    exit_out = tf.where(exits, i + 1, exit_out)
    return i + 1, hidden, running & ~exits, value, count, logits_out, exit_out

  state = (tf.constant(0), hidden, tf.ones([batch], tf.bool), tf.zeros([batch], tf.float32),
           tf.zeros([batch], tf.int32), logits_out, exit_out)
  _, hidden, running, _, _, logits_out, exit_out = tf.while_loop(
      lambda i, h, running, *_: tf.logical_and(i < num_layers - 1, tf.reduce_any(running)),
      body, state, parallel_iterations=1)
  return hidden, mask_adder, running, logits_out, exit_out
