"""Weight initializers and LayerNorm settings as the official code uses them."""

import tf_keras

# The official LayerNorm (tf.contrib.layers.layer_norm) epsilon; its variance is the biased one,
# as tf_keras' LayerNormalization computes it.
LAYER_NORM_EPSILON = 1e-12


def truncated_normal(stddev):
  """The official `create_initializer`: truncated normal with the config's initializer_range."""
  return tf_keras.initializers.TruncatedNormal(stddev=stddev)


def layer_norm(name):
  """LayerNorm over the last axis with the official epsilon.

  Under mixed precision tf_keras computes the statistics in float32 and returns the compute dtype.
  Under a pure half-precision policy (a bfloat16 serving export, see `albert_tf.export`) the
  LayerNorm alone keeps the mixed policy: float32 scale/offset and statistics, since a mean and
  variance over hundreds of values lose too much in 8 mantissa bits.
  """
  policy = tf_keras.mixed_precision.global_policy()
  dtype = None
  if policy.variable_dtype in ("float16", "bfloat16"):
    dtype = tf_keras.mixed_precision.Policy("mixed_" + policy.variable_dtype)
  return tf_keras.layers.LayerNormalization(axis=-1, epsilon=LAYER_NORM_EPSILON, name=name,
                                            dtype=dtype)
