"""AlbertEncoder against the NumPy reference for every sharing layout; parameter counts;
precision, dropout and pooled_only."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
import albert_tf
from tests.helpers import albert_numpy
from tests.helpers.model_inputs import random_pretraining_arrays
from tests.helpers.paths import CONFIG_DIR
from tests.helpers.tiny_config import tiny_config_dict


LAYOUTS = {
    "G1_K1": dict(),
    "G2": dict(num_hidden_layers=4, num_hidden_groups=2),
    "K2": dict(num_hidden_layers=2, inner_group_num=2),
    "G2_K2": dict(num_hidden_layers=3, num_hidden_groups=2, inner_group_num=2),
    "E_eq_H": dict(embedding_size=32),
    "float_groups_L5_G5": dict(num_hidden_layers=5, num_hidden_groups=5),
    "share_attention": dict(num_hidden_layers=3, sharing="attention"),
    "share_ffn": dict(num_hidden_layers=3, sharing="ffn"),
    "share_none": dict(num_hidden_layers=3, sharing="none"),
    "relu": dict(hidden_act="relu"),
}


def load_weights(model, weights, tmp_path):
  prefix = albert_numpy.write_official_checkpoint(weights, str(tmp_path / "official" / "model.ckpt"))
  return albert_tf.load_tf1_checkpoint(model, prefix)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_matches_numpy_reference(layout, tmp_path):
  cfg = tiny_config_dict(**LAYOUTS[layout])
  model = AlbertPretrainer(AlbertConfig.from_dict(cfg))
  weights = albert_numpy.make_official_weights(cfg, seed=3)
  report = load_weights(model, weights, tmp_path)
  assert not report.missing and not report.unexpected
  assert len(report.loaded) == len(weights)
  ids, mask, seg, pos = random_pretraining_arrays(cfg)
  out = model(dict(input_ids=ids, input_mask=mask, segment_ids=seg, masked_lm_positions=pos),
              training=False)
  ref = albert_numpy.forward(weights, cfg, ids, mask, seg, pos)
  for key in ("sequence_output", "pooled_output", "embedding_output", "mlm_logits", "sop_logits"):
    np.testing.assert_allclose(out[key].numpy(), ref[key], atol=1e-5, rtol=0, err_msg=key)
  expected_layers = cfg["num_hidden_layers"] * cfg["inner_group_num"]
  assert len(out["encoder_outputs"]) == len(ref["encoder_outputs"]) == expected_layers
  for got, want in zip(out["encoder_outputs"], ref["encoder_outputs"]):
    np.testing.assert_allclose(got.numpy(), want, atol=1e-5, rtol=0)


def test_padding_does_not_change_real_tokens():
  cfg = tiny_config_dict()
  encoder = AlbertEncoder(AlbertConfig.from_dict(cfg))
  ids, mask, seg, _ = random_pretraining_arrays(cfg, seq=10)
  ids, mask, seg = ids[:1], mask[:1], seg[:1]
  short = encoder(dict(input_ids=ids[:, :6], input_mask=mask[:, :6], segment_ids=seg[:, :6]))
  padded_ids = ids.copy()
  padded_ids[:, 6:] = 0
  padded_mask = mask.copy()
  padded_mask[:, 6:] = 0
  full = encoder(dict(input_ids=padded_ids, input_mask=padded_mask, segment_ids=seg))
  np.testing.assert_allclose(full["sequence_output"].numpy()[:, :6],
                             short["sequence_output"].numpy(), atol=1e-5)


# --------------------------------------------------------------- parameter counts
@pytest.fixture(autouse=False)
def zeros_init(monkeypatch):
  """Counts depend only on shapes: skip sampling hundreds of millions of random values."""
  from albert_tf.layers import initializers  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(initializers, "truncated_normal", lambda stddev: tf_keras.initializers.Zeros())


def _count(path, **overrides):
  config = AlbertConfig.from_json_file(CONFIG_DIR / path)
  for key, value in overrides.items():
    setattr(config, key, value)
  config.validate()
  encoder = AlbertEncoder(config)
  return encoder.count_params(), encoder.pooler.count_params()


@pytest.mark.parametrize("size,expected", [
    ("base", 11_683_584), ("large", 17_683_968), ("xlarge", 58_724_864),
    ("xxlarge", 222_595_584)])
def test_albert_parameter_counts(size, expected, zeros_init):
  total, _ = _count(f"albert_{size}_v2.json")
  assert total == expected


def test_bert_shaped_parameter_counts(zeros_init):
  # E = H and nothing shared: BERT-base without pooler, BERT-large with pooler.
  total, pooler = _count("albert_base_v2.json", embedding_size=768, sharing="none")
  assert total - pooler == 108_490_752
  total, _ = _count("albert_large_v2.json", embedding_size=1024, sharing="none")
  assert total == 334_607_360


def test_per_layer_formula_for_ablations(zeros_init):
  base = AlbertConfig.from_json_file(CONFIG_DIR / "albert_base_v2.json")
  H, I, L = base.hidden_size, base.intermediate_size, base.num_hidden_layers
  attention, ffn = 4 * H * H + 6 * H, 2 * H * I + I + 3 * H  # 4H^2+2HI+9H+I split in two
  shared_all, _ = _count("albert_base_v2.json")
  shared_attention, _ = _count("albert_base_v2.json", sharing="attention")
  shared_ffn, _ = _count("albert_base_v2.json", sharing="ffn")
  assert shared_attention - shared_all == (L - 1) * ffn
  assert shared_ffn - shared_all == (L - 1) * attention


# --------------------------------------------------------------- precision and dropout
@pytest.mark.parametrize("policy,tolerance", [("mixed_float16", 0.05), ("mixed_bfloat16", 0.3)])
def test_mixed_precision(policy, tolerance, tmp_path, restore_precision_policy):
  cfg = tiny_config_dict()
  weights = albert_numpy.make_official_weights(cfg, seed=5, scale=0.1)
  ids, mask, seg, pos = random_pretraining_arrays(cfg)
  inputs = dict(input_ids=ids, input_mask=mask, segment_ids=seg, masked_lm_positions=pos)
  ref = albert_numpy.forward(weights, cfg, ids, mask, seg, pos)
  tf_keras.mixed_precision.set_global_policy(policy)
  model = AlbertPretrainer(AlbertConfig.from_dict(cfg))
  load_weights(model, weights, tmp_path)
  out = model(inputs, training=False)
  assert model.encoder.embeddings.word_embeddings.dtype == tf.float32  # variables stay fp32
  assert out["sequence_output"].dtype == tf.as_dtype(policy.split("_")[1])
  assert out["mlm_logits"].dtype == tf.float32 and out["sop_logits"].dtype == tf.float32
  np.testing.assert_allclose(out["sop_logits"].numpy(), ref["sop_logits"], atol=tolerance)
  np.testing.assert_allclose(out["mlm_logits"].numpy(), ref["mlm_logits"], atol=tolerance * 4)
  assert np.isfinite(out["mlm_logits"].numpy()).all()


def test_dropout_only_in_training():
  cfg = tiny_config_dict(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3)
  encoder = AlbertEncoder(AlbertConfig.from_dict(cfg))
  ids, mask, seg, _ = random_pretraining_arrays(cfg)
  inputs = dict(input_ids=ids, input_mask=mask, segment_ids=seg)
  a = encoder(inputs, training=False)["sequence_output"].numpy()
  b = encoder(inputs, training=False)["sequence_output"].numpy()
  c = encoder(inputs, training=True)["sequence_output"].numpy()
  np.testing.assert_array_equal(a, b)
  assert np.abs(a - c).max() > 1e-3


def test_fresh_model_weights_are_not_repeated():
  # An unseeded initializer instance reused by tf_keras returns the same values every call.
  encoder = AlbertEncoder(AlbertConfig.from_dict(tiny_config_dict()))
  block = encoder.attention_blocks[0]
  q, k = block.query.kernel.numpy(), block.key.kernel.numpy()
  assert not np.allclose(q, k)
  assert 0.005 < q.std() < 0.03  # truncated normal with stddev initializer_range=0.02


@pytest.mark.parametrize("layout", ["G1_K1", "K2", "G2_K2"])
def test_pooled_only_gives_the_same_pooled_output(layout):
  cfg = tiny_config_dict(**LAYOUTS[layout], hidden_dropout_prob=0.0)
  encoder = AlbertEncoder(AlbertConfig.from_dict(cfg))
  ids, mask, seg, _ = random_pretraining_arrays(cfg)
  inputs = dict(input_ids=ids, input_mask=mask, segment_ids=seg)
  full = encoder(inputs)
  short = encoder(inputs, pooled_only=True)
  np.testing.assert_allclose(short["pooled_output"].numpy(), full["pooled_output"].numpy(),
                             atol=1e-6)
  assert short["sequence_output"].shape == (3, 1, cfg["hidden_size"])
  np.testing.assert_allclose(short["sequence_output"].numpy()[:, 0],
                             full["sequence_output"].numpy()[:, 0], atol=1e-6)
  # Every layer before the last is untouched.
  for a, b in zip(short["encoder_outputs"][:-1], full["encoder_outputs"][:-1]):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
