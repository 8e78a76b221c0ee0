"""Patience-based early exit at inference: the layers run in a tf.while_loop that each example
leaves as soon as its internal classifier's answer has stopped changing (PABEE's rule,
albert_tf/heads/early_exit.py), and that ends once every example of the batch has left.

Per example, not per batch: after each layer the examples that exit are written into the
result at their place in the batch and dropped from the running batch, so later layers run for
the rest only (a batch of 32 gains too, not only batch 1). The last layer is the classifier's
own (its first-token-only form, as the full model runs it), so with a patience no example can
reach (>= L - 1) the answers are the full model's, bit for bit.
"""

import tensorflow as tf


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
                  regression_threshold=0.1):
  """Runs a classifier with early exit for inference.

  Args:
    encoder: the AlbertEncoder (its pooler is every layer's).
    internal_heads: the L - 1 internal ClassificationHeads (layer 1 first).
    final_head: the ordinary ClassificationHead (the last layer's).
    inputs: dict of int [batch, seq_len] input_ids, input_mask, segment_ids.
    patience: int >= 1: an example exits at the first layer l < L whose prediction equals
      (regression: differs by less than regression_threshold from) that of each of the
      `patience` layers before it.
  Returns:
    (logits float32 [batch, num_classes] of each example's exit layer,
     exit_layer int32 [batch], 1-based: L for the examples that ran every layer).
  """
  num_layers = encoder.config.num_hidden_layers
  _, hidden, mask_adder = encoder.embed(inputs, training=False)
  batch = tf.shape(hidden)[0]
  width = hidden.shape[-1]
  num_classes = final_head.num_classes
  logits_out = tf.zeros([batch, num_classes], tf.float32)
  exit_out = tf.zeros([batch], tf.int32)
  index = tf.range(batch)

  def written(out, where, values):
    return tf.tensor_scatter_nd_update(out, where[:, None], values)

  if num_layers > 1:
    run_layer = _layer_fn(encoder, num_layers)
    # [L-1, classes, hidden] and [L-1, classes]: the internal heads picked by the layer index.
    weights = tf.stack([head.output_weights for head in internal_heads])
    biases = tf.stack([head.output_bias for head in internal_heads])

    def body(i, hidden, mask_adder, index, previous, count, logits_out, exit_out):
      hidden = run_layer(i, hidden, mask_adder)
      pooled = encoder.pooler(hidden[:, 0, :])
      logits = tf.cast(tf.matmul(pooled, tf.cast(tf.gather(weights, i), pooled.dtype),
                                 transpose_b=True), tf.float32)
      logits += tf.cast(tf.gather(biases, i), tf.float32)
      if is_regression:
        value = logits[:, 0]
        same = tf.abs(value - previous) < regression_threshold
      else:
        value = tf.cast(tf.argmax(logits, axis=-1, output_type=tf.int32), tf.float32)
        same = tf.equal(value, previous)
      count = tf.where(same & (i > 0), count + 1, 0)
      done = count >= patience
      where = tf.boolean_mask(index, done)
      logits_out = written(logits_out, where, tf.boolean_mask(logits, done))
      exit_out = written(exit_out, where, tf.fill(tf.shape(where), i + 1))
      keep = tf.logical_not(done)
      return (i + 1, tf.boolean_mask(hidden, keep), tf.boolean_mask(mask_adder, keep),
              tf.boolean_mask(index, keep), tf.boolean_mask(value, keep),
              tf.boolean_mask(count, keep), logits_out, exit_out)

    state = (tf.constant(0), hidden, mask_adder, index, tf.zeros([batch], tf.float32),
             tf.zeros([batch], tf.int32), logits_out, exit_out)
    invariants = (tf.TensorShape([]), tf.TensorShape([None, None, width]),
                  tf.TensorShape([None, 1, 1, None]), tf.TensorShape([None]),
                  tf.TensorShape([None]), tf.TensorShape([None]),
                  tf.TensorShape([None, num_classes]), tf.TensorShape([None]))
    # Layers depend on each other: parallel_iterations=1 keeps no copies in flight.
    _, hidden, mask_adder, index, _, _, logits_out, exit_out = tf.while_loop(
        lambda i, h, m, index, *_: tf.logical_and(i < num_layers - 1, tf.size(index) > 0),
        body, state, shape_invariants=invariants, parallel_iterations=1)

  def last_layer():
    last = encoder.run_layer(hidden, mask_adder, encoder.layer_blocks(num_layers - 1),
                             first_token_only=True)
    logits = final_head(encoder.pooler(last[:, 0, :]), training=False)
    return (written(logits_out, index, logits),
            written(exit_out, index, tf.fill(tf.shape(index), num_layers)))

  if num_layers == 1:
    return last_layer()
  return tf.cond(tf.size(index) > 0, last_layer, lambda: (logits_out, exit_out))
