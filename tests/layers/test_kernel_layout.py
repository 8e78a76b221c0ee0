"""kernel_layout: Dense kernels as [out, in] copies inside the TFLite converter's scope.

Why it exists is measured, not tested here: the converter leaves a transposed constant of 2^26+
values unfolded (float32 behind a TRANSPOSE), which takes an ALBERT-xxlarge-sized kernel (GBs of
memory to convert) to see; the xxlarge figures are bench/peers' (README, "TFLite at xxlarge").
These tests hold the parts that make it work: the same numbers, the [out, in] variable read by a
transpose_b MatMul, one copy per kernel, and nothing outside the scope.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf import AlbertConfig
from albert_tf.export import tflite
from albert_tf.layers import AlbertFeedForwardBlock, kernel_layout
from albert_tf.models import AlbertClassifier


@pytest.mark.parametrize("activation,use_bias", [("gelu", True), (None, True), ("relu", False)])
def test_dense_inside_the_scope_computes_the_same_function(activation, use_bias):
  layer = tf_keras.layers.Dense(5, activation=activation, use_bias=use_bias,
                                bias_initializer="random_normal")
  x = tf.random.stateless_normal([3, 7], seed=[1, 2])
  want = layer(x).numpy()
  with kernel_layout.transposed_kernels() as copies:
    got = kernel_layout.dense(layer, x).numpy()
  np.testing.assert_allclose(got, want, atol=1e-6)
  (copy,) = copies.variables
  assert copy.shape == (5, 7) and not copy.trainable
  np.testing.assert_array_equal(copy.numpy(), layer.kernel.numpy().T)


def test_traced_block_reads_each_kernel_as_one_out_in_copy_through_transpose_b():
  block = AlbertFeedForwardBlock(hidden_size=6, intermediate_size=10)
  block.build()
  serve = tf.function(lambda x: block(x, training=False) + block(x, training=False),
                      input_signature=[tf.TensorSpec([2, 3, 6])])
  with kernel_layout.transposed_kernels() as copies:
    graph = serve.get_concrete_function().graph
  # Two calls of the block, two kernels: one copy each, shared by both calls.
  assert sorted(tuple(v.shape) for v in copies.variables) == [(6, 10), (10, 6)]
  matmuls = [op for op in graph.get_operations() if op.type == "MatMul"]
  assert len(matmuls) == 4 and all(op.get_attr("transpose_b") for op in matmuls)
  x = tf.random.stateless_normal([2, 3, 6], seed=[3, 4])
  want = 2 * block(x, training=False).numpy()
  with kernel_layout.transposed_kernels():
    got = tf.function(lambda x: block(x, training=False) * 2)(x).numpy()
  np.testing.assert_allclose(got, want, atol=1e-5)


def test_outside_the_scope_layers_use_their_own_kernels():
  block = AlbertFeedForwardBlock(hidden_size=6, intermediate_size=10)
  block.build()
  with kernel_layout.transposed_kernels():
    with kernel_layout.transposed_kernels():
      pass
    assert kernel_layout._active.copies is not None  # the outer scope is back
  assert getattr(kernel_layout._active, "copies", None) is None
  graph = tf.function(lambda x: block(x, training=False)).get_concrete_function(
      tf.TensorSpec([2, 3, 6])).graph
  matmuls = [op for op in graph.get_operations() if op.type == "MatMul"]
  assert len(matmuls) == 2 and not any(op.get_attr("transpose_b") for op in matmuls)


def test_tflite_conversion_copies_every_ffn_kernel_and_nothing_else(monkeypatch):
  config = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=3,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=16)
  model = AlbertClassifier(config, num_classes=2)
  model({n: tf.zeros([1, 8], tf.int32) for n in tflite.input_names(model)})
  ffn_kernels = [v.numpy() for v in model.variables if tuple(v.shape) in ((16, 32), (32, 16))]
  copied = []
  original = kernel_layout.TransposedKernels.copy_of

  def spy(self, kernel):
    with tf.init_scope():  # called while the converter's function traces
      copied.append(kernel.numpy())
    return original(self, kernel)

  monkeypatch.setattr(kernel_layout.TransposedKernels, "copy_of", spy)
  data = tflite.tflite_bytes(model, 8, quantize="dynamic")
  assert data[4:8] == b"TFL3"
  # One shared layer used 3 times (the last pooled-only): its two FFN kernels are copied (from
  # the fp32 serving copy the converter traces), no other kernel.
  assert len(ffn_kernels) == 2 and len(copied) >= 2
  for kernel in copied:
    assert any(kernel.shape == k.shape and np.array_equal(kernel, k) for k in ffn_kernels)
  assert {kernel.shape for kernel in copied} == {(16, 32), (32, 16)}
