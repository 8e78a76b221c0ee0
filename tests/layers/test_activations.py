"""Activations by their official config names: gelu is the tanh approximation."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.errors import AlbertError
from albert_tf.layers import activations, gelu, get_activation
from tests.helpers import albert_numpy


def test_gelu_is_the_tanh_approximation():
  x = np.linspace(-6.0, 6.0, 97)
  np.testing.assert_allclose(gelu(tf.constant(x)).numpy(), albert_numpy.gelu(x), atol=1e-6)
  # The erf form differs by up to ~5e-4: the test would see a switch to it.
  erf_form = tf.nn.gelu(tf.constant(x), approximate=False).numpy()
  assert np.abs(erf_form - albert_numpy.gelu(x)).max() > 1e-4


def test_unknown_activation_is_a_one_line_error():
  with pytest.raises(AlbertError, match="hidden_act='swish' is not supported"):
    get_activation("swish")


def _value_and_gradient(fn, x, dtype):
  x = tf.constant(x, dtype)
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = fn(x)
    loss = tf.reduce_sum(tf.cast(y, tf.float32) * tf.linspace(0.5, 1.5, x.shape[0]))
  return (tf.cast(y, tf.float64).numpy(), tf.cast(tape.gradient(loss, x), tf.float64).numpy())


def test_float32_inside_gelu_is_the_same_function_with_the_same_gradient():
  """The bfloat16/float16 training GELU: in float32 it equals the official tanh form and its
  hand-written derivative equals autodiff's; in bfloat16 it is the float32 result rounded once
  (closer to float32 than bfloat16 autodiff through every op)."""
  x = np.linspace(-6.0, 6.0, 97)
  value, grad = _value_and_gradient(activations.gelu_float32_inside, x, tf.float32)
  expected_value, expected_grad = _value_and_gradient(gelu, x, tf.float32)
  np.testing.assert_allclose(value, albert_numpy.gelu(x), atol=1e-6)
  np.testing.assert_allclose(grad, expected_grad, atol=2e-6)
  assert np.ptp(grad) > 1.0  # the derivative is not trivial on this range
  low_value, low_grad = _value_and_gradient(activations.gelu_float32_inside, x, tf.bfloat16)
  assert low_grad.dtype == np.float64  # (returned in x's dtype, bfloat16, then widened here)
  np.testing.assert_allclose(low_value, expected_value, atol=4e-2, rtol=1e-2)
  np.testing.assert_allclose(low_grad, expected_grad, atol=2e-2, rtol=1e-2)
  autodiff_value, _ = _value_and_gradient(gelu, x, tf.bfloat16)
  assert (np.abs(low_value - expected_value).max()
          <= np.abs(autodiff_value - expected_value).max())
