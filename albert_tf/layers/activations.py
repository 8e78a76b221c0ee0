"""Activations by the names the official `albert_config.json` uses."""

import tensorflow as tf

from albert_tf.errors import AlbertError


def gelu(x):
  """GELU, tanh approximation, as the official ALBERT `modeling.gelu`.

  0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))). Official checkpoints were trained with
  this form, not the erf form, so outputs only match with it. TensorFlow's own op computes the
  same formula, and using it lets grappler fuse MatMul + BiasAdd + GELU on oneDNN CPUs.
  """
  return tf.nn.gelu(x, approximate=True)


_ACTIVATIONS = {
    "linear": None,
    "relu": tf.nn.relu,
    "gelu": gelu,
    "gelu_new": gelu,  # Hugging Face's name for the same tanh approximation.
    "tanh": tf.tanh,
}


def get_activation(name):
  """Maps a config's `hidden_act` string to a function (None for linear)."""
  if name is None:
    return None
  key = str(name).lower()
  if key not in _ACTIVATIONS:
    raise AlbertError(f"hidden_act={name!r} is not supported: expected one of "
                      f"{', '.join(_ACTIVATIONS)}")
  return _ACTIVATIONS[key]
