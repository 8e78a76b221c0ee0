"""Activations by their official config names: gelu is the tanh approximation."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.errors import AlbertError
from albert_tf.layers import gelu, get_activation
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
