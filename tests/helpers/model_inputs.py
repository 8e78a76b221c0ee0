"""Random model inputs for the model tests (ids, a padding mask and segment ids) and random
weights."""

import numpy as np
import tensorflow as tf


def random_features(batch, seq, seed=0, extra_dims=(), vocab_size=1000):
  """{input_ids, input_mask, segment_ids} tensors of shape [batch, *extra_dims, seq].

  The last 3 positions are padding; the second half of the sequence is segment 1.
  """
  rng = np.random.default_rng(seed)
  shape = (batch,) + tuple(extra_dims) + (seq,)
  ids = rng.integers(5, vocab_size, size=shape).astype(np.int32)
  mask = np.ones(shape, np.int32)
  mask[..., seq - 3:] = 0
  return {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
          "segment_ids": tf.constant((np.arange(seq) >= seq // 2).astype(np.int32)
                                     * np.ones(shape, np.int32))}


def random_pretraining_arrays(cfg, batch=3, seq=12, predictions=4, seed=1):
  """(ids, mask, segment_ids, masked positions) as NumPy arrays for a config dict `cfg`.

  Rows 1 and 2 are padded (from 7 and 3) so that padding leaks would show in the real tokens.
  """
  rng = np.random.RandomState(seed)
  ids = rng.randint(0, cfg["vocab_size"], (batch, seq)).astype(np.int32)
  mask = np.ones((batch, seq), np.int32)
  mask[1, 7:] = 0  # padding must not leak into real tokens
  mask[2, 3:] = 0
  seg = np.zeros((batch, seq), np.int32)
  seg[:, seq // 2:] = 1
  pos = np.stack([rng.choice(seq, predictions, replace=False) for _ in range(batch)])
  return ids, mask, seg, pos.astype(np.int32)


def randomize_weights(model, seed=0):
  """Weights ~ N(0, 0.2) (LayerNorm scales around 1): outputs far from uniform, so they bite.
  Returns the model."""
  rng = np.random.default_rng(seed)
  for variable in model.variables:
    value = 0.2 * rng.standard_normal(variable.shape.as_list())
    if "gamma" in variable.name:
      value += 1.0
    variable.assign(value.astype(np.float32))
  return model
