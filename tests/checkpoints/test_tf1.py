"""Official TF1 checkpoints into Keras and back, bit-exact; reports and refusals."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf import AlbertConfig, AlbertEncoder, AlbertError, AlbertPretrainer
import albert_tf
from albert_tf.checkpoints.init import init_from_checkpoint
from tests.helpers import albert_numpy
from tests.helpers.tiny_config import tiny_config_dict


def read_all(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def model_values(model):
  return [v.numpy() for v in model.variables]


@pytest.fixture
def official(tmp_path):
  """A tiny official-layout checkpoint (G=2, K=2, heads, optimizer slots, global_step)."""
  cfg = tiny_config_dict(num_hidden_layers=3, num_hidden_groups=2, inner_group_num=2)
  weights = albert_numpy.make_official_weights(cfg, seed=11)
  prefix = albert_numpy.write_official_checkpoint(weights, str(tmp_path / "official/model.ckpt"))
  return cfg, weights, prefix


def test_tf1_round_trip_is_bit_exact(official, tmp_path):
  cfg, weights, prefix = official
  model = AlbertPretrainer(AlbertConfig.from_dict(cfg))
  report = albert_tf.load_tf1_checkpoint(model, prefix)
  assert sorted(report.loaded) == sorted(weights)
  out = albert_tf.save_tf1_checkpoint(model, tmp_path / "ours" / "model.ckpt", global_step=7)
  written = read_all(out)
  assert written.pop("global_step") == 7
  assert sorted(written) == sorted(weights)  # exactly the official names, nothing else
  for name, value in weights.items():
    assert written[name].dtype == np.float32
    np.testing.assert_array_equal(written[name], value, err_msg=name)
  # The directory is usable as a checkpoint directory by TF1 tools.
  assert tf.train.latest_checkpoint(str(tmp_path / "ours")) == str(tmp_path / "ours/model.ckpt")


def test_keras_to_tf1_to_keras(tmp_path):
  """The other direction: a Keras model's own weights survive TF1 layout and give equal outputs."""
  cfg = tiny_config_dict(num_hidden_layers=3, sharing="attention")
  first = AlbertPretrainer(AlbertConfig.from_dict(cfg))
  prefix = albert_tf.save_tf1_checkpoint(first, tmp_path / "model.ckpt")
  second = AlbertPretrainer(AlbertConfig.from_dict(cfg))
  report = albert_tf.load_tf1_checkpoint(second, prefix)
  assert not report.missing and not report.unexpected
  for a, b in zip(model_values(first), model_values(second)):
    np.testing.assert_array_equal(a, b)
  ids = np.arange(20, dtype=np.int32).reshape(2, 10)
  inputs = dict(input_ids=ids, input_mask=np.ones_like(ids), segment_ids=np.zeros_like(ids))
  np.testing.assert_array_equal(first(inputs)["sop_logits"].numpy(),
                                second(inputs)["sop_logits"].numpy())


def test_optimizer_state_ignored_and_heads_optional(official):
  cfg, weights, prefix = official
  encoder = AlbertEncoder(AlbertConfig.from_dict(cfg))
  report = albert_tf.load_tf1_checkpoint(encoder, prefix)
  assert all(not n.endswith(("adam_m", "adam_v")) and n != "global_step"
             for n in report.loaded + report.unexpected)
  # Heads in the checkpoint but not in the model are reported as unused, not errors.
  assert report.unexpected and all(n.startswith("cls/") for n in report.unexpected)
  assert not report.missing
  assert "unused from checkpoint" in str(report)


def test_missing_variables_reported(tmp_path):
  cfg = tiny_config_dict()
  weights = albert_numpy.make_official_weights(cfg, heads=False)
  prefix = albert_numpy.write_official_checkpoint(weights, str(tmp_path / "model.ckpt"))
  model = AlbertPretrainer(AlbertConfig.from_dict(cfg))
  report = albert_tf.load_tf1_checkpoint(model, prefix)
  assert "cls/predictions/output_bias" in report.missing
  assert "cls/seq_relationship/output_weights" in report.missing
  assert not any(n.startswith("bert/") for n in report.missing)
  assert "missing from checkpoint" in str(report)


def test_shape_mismatch_names_both_shapes(official):
  cfg, _, prefix = official
  wrong = dict(cfg, intermediate_size=48)
  model = AlbertPretrainer(AlbertConfig.from_dict(wrong))
  before = model_values(model)
  with pytest.raises(AlbertError, match=r"has shape \[32, 64\] .* expects \[32, 48\]"):
    albert_tf.load_tf1_checkpoint(model, prefix)
  for a, b in zip(before, model_values(model)):  # nothing half-loaded
    np.testing.assert_array_equal(a, b)


def test_wrong_layout_refused_by_init(official):
  cfg, _, prefix = official
  wrong = dict(cfg, num_hidden_groups=3)  # group_2 does not exist in the checkpoint
  with pytest.raises(AlbertError, match="lacks .* encoder variables"):
    init_from_checkpoint(AlbertEncoder(AlbertConfig.from_dict(wrong)), prefix)


def test_no_checkpoint_at_path(tmp_path):
  model = AlbertEncoder(AlbertConfig.from_dict(tiny_config_dict()))
  with pytest.raises(AlbertError, match="no checkpoint there"):
    albert_tf.load_tf1_checkpoint(model, tmp_path / "nothing")
  with pytest.raises(AlbertError, match="holds no checkpoint"):
    albert_tf.load_tf1_checkpoint(model, tmp_path)


def test_init_from_group0(tmp_path):
  one_group = tiny_config_dict(num_hidden_layers=4)
  weights = albert_numpy.make_official_weights(one_group, seed=2)
  prefix = albert_numpy.write_official_checkpoint(weights, str(tmp_path / "model.ckpt"))
  two_groups = AlbertEncoder(AlbertConfig.from_dict(dict(one_group, num_hidden_groups=2)))
  init_from_checkpoint(two_groups, prefix, init_from_group0=True)
  g0, g1 = two_groups.attention_blocks
  np.testing.assert_array_equal(g0.query.kernel.numpy(), g1.query.kernel.numpy())
  np.testing.assert_array_equal(
      g1.query.kernel.numpy(),
      weights["bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel"])


def test_tf2_pretraining_checkpoint_initialises_other_models(tmp_path, official):
  cfg, _, prefix = official
  pretrainer = AlbertPretrainer(AlbertConfig.from_dict(cfg))
  albert_tf.load_tf1_checkpoint(pretrainer, prefix)
  path = tf.train.Checkpoint(model=pretrainer).write(str(tmp_path / "tf2" / "ckpt"))
  encoder = AlbertEncoder(AlbertConfig.from_dict(cfg))

  class TaskModel(tf_keras.Model):
    def __init__(self):
      super().__init__()
      self.encoder = AlbertEncoder(AlbertConfig.from_dict(cfg))

  task_model = TaskModel()
  assert init_from_checkpoint(task_model, path) is None
  for a, b in zip(model_values(pretrainer.encoder), model_values(task_model.encoder)):
    np.testing.assert_array_equal(a, b)
  wrong = AlbertEncoder(AlbertConfig.from_dict(dict(cfg, num_hidden_groups=3)))
  with pytest.raises(AlbertError, match="encoder does not match"):
    init_from_checkpoint(wrong, path)
  del encoder


@pytest.mark.parametrize("v2", [False, True])
def test_task_heads_with_official_names_round_trip(tmp_path, v2):
  """Heads that know their official names (SQuAD's cls/squad, start_logits, ...) go both ways."""
  from albert_tf.models import AlbertSquadModel  # pylint: disable=g-import-not-at-top
  config = AlbertConfig.from_dict(tiny_config_dict())
  first = AlbertSquadModel(config, version_2_with_negative=v2)
  prefix = albert_tf.save_tf1_checkpoint(first, tmp_path / "squad/model.ckpt")
  names = set(read_all(prefix))
  expected = {"cls/squad/output_weights"} if not v2 else {"start_logits/dense/kernel",
                                                          "answer_class/dense_1/kernel"}
  assert expected <= names
  second = AlbertSquadModel(config, version_2_with_negative=v2)
  report = albert_tf.load_tf1_checkpoint(second, prefix)
  assert not report.missing and not report.unexpected
  for a, b in zip(model_values(first), model_values(second)):
    np.testing.assert_array_equal(a, b)


def _brightmart_weights(cfg):
  """Every variable of brightmart/albert_zh's own layout (its modeling.py, post-LN), tiny."""
  v, e, h, i = cfg["vocab_size"], cfg["embedding_size"], cfg["hidden_size"], cfg[
      "intermediate_size"]
  layer = "bert/encoder/layer_shared/"
  shapes = {"bert/embeddings/word_embeddings": [v, e], "bert/embeddings/word_embeddings_2": [e, h],
            "bert/embeddings/position_embeddings": [cfg["max_position_embeddings"], h],
            "bert/embeddings/token_type_embeddings": [cfg["type_vocab_size"], h],
            "bert/embeddings/LayerNorm/gamma": [h], "bert/embeddings/LayerNorm/beta": [h],
            "bert/pooler/dense/kernel": [h, h], "bert/pooler/dense/bias": [h]}
  for name in ("query", "key", "value"):
    shapes[f"{layer}attention/self/{name}/kernel"] = [h, h]
    shapes[f"{layer}attention/self/{name}/bias"] = [h]
  for scope, (n_in, n_out) in (("attention/output/dense", (h, h)),
                               ("intermediate/dense", (h, i)), ("output/dense", (i, h))):
    shapes[f"{layer}{scope}/kernel"] = [n_in, n_out]
    shapes[f"{layer}{scope}/bias"] = [n_out]
  for scope in ("attention/output/LayerNorm", "output/LayerNorm"):
    shapes[f"{layer}{scope}/gamma"] = [h]
    shapes[f"{layer}{scope}/beta"] = [h]
  return {name: np.zeros(shape, np.float32) for name, shape in shapes.items()}


def test_brightmart_own_layout_is_refused_with_one_line(tmp_path):
  """brightmart's word_embeddings_2 projects before the H-wide position embeddings: no official
  ALBERT computes that, so loading stops with one line naming the variable and the way out."""
  cfg = tiny_config_dict()
  prefix = albert_numpy.write_official_checkpoint(
      _brightmart_weights(cfg), str(tmp_path / "albert_model.ckpt"), optimizer_slots=False)
  model = AlbertPretrainer(AlbertConfig.from_dict(cfg))
  with pytest.raises(AlbertError) as info:
    albert_tf.load_tf1_checkpoint(model, prefix)
  message = str(info.value)
  assert "\n" not in message
  assert message.startswith(f"{prefix}: a brightmart/albert_zh checkpoint in its own layout "
                            "(bert/embeddings/word_embeddings_2 [16, 32]")
  assert "albert_*_zh_google" in message
