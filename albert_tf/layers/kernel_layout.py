"""Dense kernels stored [out, in], as TFLite's FULLY_CONNECTED wants its weights.

A Keras Dense kernel is [in, out]. Converting `x @ kernel`, the TFLite converter puts a TRANSPOSE
in front of FULLY_CONNECTED and then folds it into the constant, except when the constant holds
2^26 values or more: ALBERT-xxlarge's FFN kernels, [4096, 16384] and [16384, 4096]. Those two
then stay float32 behind a TRANSPOSE that runs on every call, even in an int8 (dynamic-range)
file: measured on this project's xxlarge classifier, 597 MiB instead of about a quarter of its
853 MiB, and 3.7x our fp32 SavedModel's time per request instead of well under it.

Inside `transposed_kernels()`, the layers that call `dense` multiply by a copy of the kernel
stored [out, in] (`tf.matmul(x, copy, transpose_b=True)`), which the converter maps onto
FULLY_CONNECTED with nothing to fold. The copies are variables made once per kernel, outside
any graph being traced; the scope's `variables` lists them for the converter's trackable object.
Outputs are the same numbers: only the stored layout differs.

  with kernel_layout.transposed_kernels() as copies:
    concrete = serve.get_concrete_function()
  module.model_variables = list(model.variables) + copies.variables
"""

import contextlib
import threading

import tensorflow as tf

_active = threading.local()


class TransposedKernels:
  """The [out, in] copies made in one `transposed_kernels()` scope, one per kernel."""

  def __init__(self):
    self._copies = {}

  def copy_of(self, kernel):
    """The [out, in] variable holding tf.transpose(kernel) ([in, out]), made on first use."""
    key = kernel.ref()
    if key not in self._copies:
      # Made eagerly even while a tf.function traces, so the graph reads it as a captured
      # variable (frozen to a constant by the converter) rather than recomputing it.
      with tf.init_scope():
        name = kernel.name.split(":")[0].replace("/", "_") + "_transposed"
        self._copies[key] = tf.Variable(tf.transpose(kernel), trainable=False, name=name)
    return self._copies[key]

  @property
  def variables(self):
    return list(self._copies.values())


@contextlib.contextmanager
def transposed_kernels():
  """Inside it, `dense` calls traced by this thread multiply by [out, in] kernel copies.

  Yields:
    the TransposedKernels holding the copies made in the scope.
  """
  previous = getattr(_active, "copies", None)
  _active.copies = TransposedKernels()
  try:
    yield _active.copies
  finally:
    _active.copies = previous


def dense(layer, inputs):
  """`layer(inputs)` for a built Keras Dense on 2-D inputs [rows, in] -> [rows, out].

  Inside `transposed_kernels()` the same function (bias, activation) computed as
  inputs · copy^T with the [out, in] copy of the kernel.
  """
  copies = getattr(_active, "copies", None)
  if copies is None:
    return layer(inputs)
  outputs = tf.matmul(inputs, copies.copy_of(layer.kernel), transpose_b=True)
  if layer.use_bias:
    outputs = tf.nn.bias_add(outputs, layer.bias)
  return layer.activation(outputs) if layer.activation is not None else outputs
