"""SQuAD heads against plain NumPy references of the official computations."""

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf.heads.squad import SquadSpanHead, SquadV2Head

BATCH, SEQ, HIDDEN = 3, 7, 8
# p_mask: [CLS]=0, two question tokens and [SEP] = 1, context = 0, final [SEP] and padding = 1.
P_MASK = np.array([[0, 1, 1, 1, 0, 0, 1],
                   [0, 1, 1, 0, 0, 0, 0],
                   [0, 1, 0, 0, 0, 1, 1]], np.int32)


def _inputs(seed=0):
  return np.random.RandomState(seed).normal(size=(BATCH, SEQ, HIDDEN)).astype(np.float32)


def _log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _layer_norm(x, gamma, beta):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + 1e-12) * gamma + beta


def _weights(head):
  return {w.name.split("/", 1)[1].rsplit(":", 1)[0]: w.numpy() for w in head.weights}


def _v2_reference(head, seq, p_mask, start_positions=None):
  """The official create_v2_model, written out with NumPy."""
  w = _weights(head)
  mask = p_mask.astype(np.float64)
  start_logits = (seq @ w["start_logits/dense/kernel"] + w["start_logits/dense/bias"])[..., 0]
  start_masked = start_logits * (1 - mask) - 1e30 * mask
  start_log_probs = _log_softmax(start_masked)

  def end_logits(seq_part, start_feat):
    h = np.tanh(np.concatenate([seq_part, start_feat], -1) @ w["end_logits/dense_0/kernel"]
                + w["end_logits/dense_0/bias"])
    h = _layer_norm(h, w["end_logits/LayerNorm/gamma"], w["end_logits/LayerNorm/beta"])
    return (h @ w["end_logits/dense_1/kernel"] + w["end_logits/dense_1/bias"])[..., 0]

  out = {}
  if start_positions is not None:
    start_feat = seq[np.arange(BATCH), start_positions]  # [B, H]
    logits = end_logits(seq, np.repeat(start_feat[:, None], SEQ, axis=1))
    out["start_log_probs"] = start_log_probs
    out["end_log_probs"] = _log_softmax(logits * (1 - mask) - 1e30 * mask)
  else:
    k, k_end = head.start_n_top, head.end_n_top
    start_idx = np.argsort(-start_log_probs, axis=-1, kind="stable")[:, :k]
    out["start_top_index"] = start_idx
    out["start_top_log_probs"] = np.take_along_axis(start_log_probs, start_idx, -1)
    end_idx, end_lp = [], []
    for b in range(BATCH):
      for i in range(k):
        feat = np.repeat(seq[b, start_idx[b, i]][None], SEQ, axis=0)
        logits = end_logits(seq[b], feat)
        lp = _log_softmax(logits * (1 - mask[b]) - 1e30 * mask[b])
        top = np.argsort(-lp, kind="stable")[:k_end]
        end_idx.append(top)
        end_lp.append(lp[top])
    out["end_top_index"] = np.array(end_idx).reshape(BATCH, k * k_end)
    out["end_top_log_probs"] = np.array(end_lp).reshape(BATCH, k * k_end)

  start_p = np.exp(_log_softmax(start_masked))
  start_feature = np.einsum("bsh,bs->bh", seq, start_p)
  ans = np.tanh(np.concatenate([start_feature, seq[:, 0]], -1) @ w["answer_class/dense_0/kernel"]
                + w["answer_class/dense_0/bias"])
  out["cls_logits"] = (ans @ w["answer_class/dense_1/kernel"])[:, 0]
  return out


def test_span_head_matches_numpy():
  seq = _inputs()
  head = SquadSpanHead(initializer_range=0.5)
  out = head(tf.constant(seq))
  w = _weights(head)
  logits = seq @ w["output_weights"].T + w["output_bias"]
  assert out["start_logits"].dtype == tf.float32
  np.testing.assert_allclose(out["start_logits"].numpy(), logits[..., 0], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(out["end_logits"].numpy(), logits[..., 1], rtol=1e-5, atol=1e-5)
  assert [v.shape.as_list() for v in head.weights] == [[2, HIDDEN], [2]]


def test_v2_head_training_path_matches_numpy():
  seq = _inputs(1)
  head = SquadV2Head(HIDDEN, start_n_top=3, end_n_top=2, initializer_range=0.5)
  start_positions = np.array([4, 0, 3], np.int32)
  out = head(tf.constant(seq), tf.constant(P_MASK), start_positions=tf.constant(start_positions),
             training=False)
  ref = _v2_reference(head, seq, P_MASK, start_positions)
  assert set(out) == set(ref)
  for name in ref:
    np.testing.assert_allclose(out[name].numpy(), ref[name], rtol=1e-4, atol=1e-4, err_msg=name)
  # Masked positions carry no probability.
  assert np.all(np.exp(out["start_log_probs"].numpy())[P_MASK == 1] < 1e-30)


def test_v2_head_prediction_beam_matches_numpy():
  seq = _inputs(2)
  head = SquadV2Head(HIDDEN, start_n_top=3, end_n_top=2, initializer_range=0.5)
  out = head(tf.constant(seq), tf.constant(P_MASK), training=False)
  ref = _v2_reference(head, seq, P_MASK)
  assert set(out) == set(ref)
  for name in ("start_top_index", "end_top_index"):
    np.testing.assert_array_equal(out[name].numpy(), ref[name], err_msg=name)
  for name in ("start_top_log_probs", "end_top_log_probs", "cls_logits"):
    np.testing.assert_allclose(out[name].numpy(), ref[name], rtol=1e-4, atol=1e-4, err_msg=name)
  # Top starts never fall on masked positions (each row has >= 3 valid positions).
  starts = out["start_top_index"].numpy()
  assert np.all(np.take_along_axis(P_MASK, starts, -1) == 0)


def test_v2_head_dropout_only_in_training():
  seq = tf.constant(_inputs(3))
  head = SquadV2Head(HIDDEN, dropout_rate=0.5, initializer_range=0.5)
  eval_a = head(seq, P_MASK, training=False)["cls_logits"].numpy()
  eval_b = head(seq, P_MASK, training=False)["cls_logits"].numpy()
  train = head(seq, P_MASK, training=True)["cls_logits"].numpy()
  np.testing.assert_array_equal(eval_a, eval_b)
  assert not np.allclose(eval_a, train)


def test_v2_head_mixed_precision_outputs_float32():
  seq = tf.constant(_inputs(4), tf.float16)
  head = SquadV2Head(HIDDEN, start_n_top=2, end_n_top=2, dtype="mixed_float16")
  out = head(seq, P_MASK)
  for name, value in out.items():
    if "index" not in name:
      assert value.dtype == tf.float32, name
      assert np.all(np.isfinite(value.numpy())), name


def test_heads_config_round_trip():
  for head in (SquadSpanHead(initializer_range=0.1, name="span"),
               SquadV2Head(HIDDEN, start_n_top=4, end_n_top=3, dropout_rate=0.2,
                           initializer_range=0.1, name="v2")):
    config = head.get_config()
    clone = type(head).from_config(config)
    assert clone.get_config() == config
    # Also through Keras' registry (what SavedModel / model cloning use).
    clone = tf_keras.layers.deserialize(tf_keras.layers.serialize(head))
    assert clone.get_config() == config
