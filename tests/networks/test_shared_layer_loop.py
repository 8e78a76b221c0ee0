"""`shared_layers_in_one_loop`: inference with each run of weight-sharing layers as one loop.

Checked against the NumPy reference of the official forward pass (not against the unrolled
encoder), in every sharing layout, and on the traced graph: one set of layer kernels whatever L.
"""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.networks.encoder import shared_layers_in_one_loop, layer_runs
from tests.helpers import albert_numpy
from tests.helpers.model_inputs import random_pretraining_arrays
from tests.helpers.tiny_config import tiny_config_dict
from tests.networks.test_encoder import LAYOUTS, load_weights

_MATMUL_OPS = {"MatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum", "_MklMatMul",
               "_FusedMatMul", "_MklFusedMatMul"}


def _traced(encoder, inputs, pooled_only, loop):
  fn = tf.function(lambda: encoder(inputs, training=False, pooled_only=pooled_only))
  if loop:
    with shared_layers_in_one_loop():
      concrete = fn.get_concrete_function()
  else:
    concrete = fn.get_concrete_function()
  return concrete


def _ops(concrete):
  """Every op type in the traced graph and the functions it calls (loop bodies), with counts."""
  graph_def = concrete.graph.as_graph_def()
  nodes = list(graph_def.node)
  for function in graph_def.library.function:
    nodes.extend(function.node_def)
  counts = {}
  for node in nodes:
    counts[node.op] = counts.get(node.op, 0) + 1
  return counts


@pytest.mark.parametrize("pooled_only", [False, True])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_looped_inference_matches_the_official_forward_pass(layout, pooled_only, tmp_path):
  cfg = tiny_config_dict(**LAYOUTS[layout])
  encoder = AlbertEncoder(AlbertConfig.from_dict(cfg))
  weights = {k: v for k, v in albert_numpy.make_official_weights(cfg, seed=3).items()
             if k.startswith("bert/")}
  report = load_weights(encoder, weights, tmp_path)
  assert not report.missing
  ids, mask, seg, pos = random_pretraining_arrays(cfg)
  inputs = dict(input_ids=tf.constant(ids), input_mask=tf.constant(mask),
                segment_ids=tf.constant(seg))
  out = _traced(encoder, inputs, pooled_only, loop=True)()
  ref = albert_numpy.forward(albert_numpy.make_official_weights(cfg, seed=3), cfg, ids, mask,
                             seg, pos)
  np.testing.assert_allclose(out["pooled_output"].numpy(), ref["pooled_output"], atol=1e-5,
                             rtol=0)
  want = ref["sequence_output"][:, :1] if pooled_only else ref["sequence_output"]
  np.testing.assert_allclose(out["sequence_output"].numpy(), want, atol=1e-5, rtol=0)
  # The loop keeps no per-layer outputs: asking for them is a KeyError, never a wrong list.
  assert "encoder_outputs" not in out


def test_the_official_layout_traces_one_set_of_layer_kernels_whatever_the_depth():
  counts = {}
  for layers in (2, 6):
    cfg = tiny_config_dict(num_hidden_layers=layers)
    encoder = AlbertEncoder(AlbertConfig.from_dict(cfg))
    ids, mask, seg, _ = random_pretraining_arrays(cfg)
    inputs = dict(input_ids=tf.constant(ids), input_mask=tf.constant(mask),
                  segment_ids=tf.constant(seg))
    for loop in (False, True):
      ops = _ops(_traced(encoder, inputs, pooled_only=False, loop=loop))
      counts[layers, loop] = sum(n for op, n in ops.items() if op in _MATMUL_OPS)
      assert (ops.get("While", 0) + ops.get("StatelessWhile", 0) > 0) == loop
  # Unrolled, every layer adds its own matmuls; looped, the count does not depend on L.
  assert counts[6, False] > counts[2, False]
  assert counts[6, True] == counts[2, True] < counts[2, False]


def test_training_calls_and_calls_outside_the_scope_stay_unrolled():
  cfg = tiny_config_dict(num_hidden_layers=3, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0)
  encoder = AlbertEncoder(AlbertConfig.from_dict(cfg))
  ids, mask, seg, _ = random_pretraining_arrays(cfg)
  inputs = dict(input_ids=ids, input_mask=mask, segment_ids=seg)
  with shared_layers_in_one_loop():
    trained = encoder(inputs, training=True)
  assert len(trained["encoder_outputs"]) == 3
  assert len(encoder(inputs, training=False)["encoder_outputs"]) == 3


def testlayer_runs_merge_equal_neighbours_and_keep_the_pooled_only_layer_alone():
  assert layer_runs(((0, 0),) * 4, pooled_only=False) == [[0, 0, 4, False]]
  assert layer_runs(((0, 0),) * 4, pooled_only=True) == [[0, 0, 3, False], [0, 0, 1, True]]
  # Inner groups alternate (K = 2): nothing to merge.
  assert layer_runs(((0, 0), (1, 1), (0, 0), (1, 1)), pooled_only=False) == [
      [0, 0, 1, False], [1, 1, 1, False], [0, 0, 1, False], [1, 1, 1, False]]
  # Two groups of two layers (G = 2, L = 4).
  assert layer_runs(((0, 0), (0, 0), (1, 1), (1, 1)), pooled_only=True) == [
      [0, 0, 2, False], [1, 1, 1, False], [1, 1, 1, True]]
