"""Seeded (stateless) dropout: the same seed gives the same mask, so a recomputed layer matches.

The encoder draws the seeds of every dropout in a layer once per call, outside the part that
`recompute` runs a second time in the backward pass; the recomputation then drops exactly the
units the forward pass dropped, and its gradients equal those of storing the activations.
"""

import tensorflow as tf

# Dropouts per applied transformer layer: attention probabilities, attention output, FFN output.
SEEDS_PER_LAYER = 3


def draw_layer_seeds(num_layers):
  """Fresh seeds for every dropout of `num_layers` layers, from TF's stateful RNG.

  Follows `tf.random.set_seed` like the Keras dropout layers do; each replica and each
  execution (step, micro-batch) draws new seeds.
  Returns:
    int32 [num_layers, SEEDS_PER_LAYER, 2].
  """
  return tf.random.uniform([num_layers, SEEDS_PER_LAYER, 2], minval=tf.int32.min,
                           maxval=tf.int32.max, dtype=tf.int32)


def seeded_dropout(x, rate, seed):
  """Inverted dropout of `x` with a stateless mask.

  Args:
    x: a float tensor of any shape (any float dtype).
    rate: python float in [0, 1), the probability of dropping a unit.
    seed: int32 [2]; the mask is a pure function of (seed, shape).
  Returns:
    A tensor like x: kept units scaled by 1 / (1 - rate), dropped ones 0.
  """
  if not rate:
    return x
  # The uniform draw is float32 whatever x's dtype (fp16 and bf16 cannot hold every threshold);
  # only the boolean mask is kept for the backward pass.
  keep = tf.random.stateless_uniform(tf.shape(x), seed=seed, dtype=tf.float32) >= rate
  scale = tf.cast(1.0 / (1.0 - rate), x.dtype)
  return tf.where(keep, x * scale, tf.zeros_like(x))
