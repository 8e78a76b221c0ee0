"""Activations by the names the official `albert_config.json` uses."""

import math

import tensorflow as tf

from albert_tf.errors import AlbertError


def gelu(x):
  """GELU, tanh approximation, as the official ALBERT `modeling.gelu`.

  0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))). Official checkpoints were trained with
  this form, not the erf form, so outputs only match with it. TensorFlow's own op computes the
  same formula, and using it lets grappler fuse MatMul + BiasAdd + GELU on oneDNN CPUs.
  """
  return tf.nn.gelu(x, approximate=True)


_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


@tf.custom_gradient
def gelu_float32_inside(x):
  """The same tanh GELU for bfloat16/float16 training: computed in float32, with its derivative
  written out (one fused expression instead of autodiff through Pow, Mul, Tanh and their grads).

  Why: TensorFlow runs elementwise ops on bfloat16 tensors through float conversions element by
  element (about 2x slower than float32 on CPU, measured on [1024, 3072]: forward + backward 27 ms
  in bfloat16, 18 ms this way), and the GELU is the largest elementwise work of a train step.
  The output and the gradient are cast back to x's dtype. Serving and float32 training keep `gelu`
  (there, grappler fuses MatMul + BiasAdd + GELU into one oneDNN call).
  x: [..., units] bfloat16 / float16 (float32 works too).
  """
  x32 = tf.cast(x, tf.float32)
  t = tf.tanh(_GELU_C * (x32 + _GELU_A * x32 * x32 * x32))
  y = 0.5 * x32 * (1.0 + t)

  def grad(dy):
    # d/dx 0.5 x (1 + tanh(u)) = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx, u' = c (1 + 3 a x^2)
    derivative = 0.5 * (1.0 + t) + 0.5 * x32 * (1.0 - t * t) * (
        _GELU_C * (1.0 + 3.0 * _GELU_A * x32 * x32))
    return tf.cast(tf.cast(dy, tf.float32) * derivative, x.dtype)

  return tf.cast(y, x.dtype), grad


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
