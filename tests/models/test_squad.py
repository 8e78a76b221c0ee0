"""AlbertSquadModel (v1.1 and v2.0): outputs, config round trip, encoder and head initialisation
from pretraining and official TF1 SQuAD checkpoints."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.models.squad import AlbertSquadModel
from albert_tf.tasks.squad import SquadConfig, SquadTask
from tests.helpers import squad as squad_helpers
from tests.helpers.tiny_config import tiny_albert_config


BATCH, SEQ = 2, 12


# The tiny config with a 100-piece vocabulary.
CONFIG_OVERRIDES = dict(vocab_size=100, **squad_helpers.TINY_CONFIG_OVERRIDES)


def _inputs(with_start=False):
  rng = np.random.RandomState(0)
  p_mask = np.ones([BATCH, SEQ], np.int32)
  p_mask[:, 0] = 0
  p_mask[:, 4:10] = 0
  inputs = {"input_ids": tf.constant(rng.randint(5, 100, [BATCH, SEQ]), tf.int32),
            "input_mask": tf.ones([BATCH, SEQ], tf.int32),
            "segment_ids": tf.constant([[0] * 4 + [1] * 8] * BATCH, tf.int32),
            "p_mask": tf.constant(p_mask),
            "unique_ids": tf.constant([1000000000, 1000000001])}
  if with_start:
    inputs["start_positions"] = tf.constant([5, 0], tf.int32)
  return inputs


def test_v1_model_outputs_and_config_round_trip():
  model = AlbertSquadModel(tiny_albert_config(**CONFIG_OVERRIDES))
  out = model(_inputs(), training=False)
  assert set(out) == {"start_logits", "end_logits"}
  assert out["start_logits"].shape == (BATCH, SEQ) and out["start_logits"].dtype == tf.float32
  assert model.encoder.name == "encoder"
  clone = AlbertSquadModel.from_config(model.get_config())
  assert clone.get_config() == model.get_config()
  clone(_inputs())
  clone.set_weights(model.get_weights())
  np.testing.assert_allclose(clone(_inputs())["end_logits"], out["end_logits"], atol=1e-6)


def test_v2_model_paths_and_config_round_trip(tmp_path):
  model = AlbertSquadModel(tiny_albert_config(**CONFIG_OVERRIDES), version_2_with_negative=True,
                           start_n_top=3, end_n_top=2)
  train_out = model(_inputs(with_start=True), training=False)
  assert set(train_out) == {"start_log_probs", "end_log_probs", "cls_logits"}
  predict_out = model(_inputs(), training=False)
  assert predict_out["start_top_index"].shape == (BATCH, 3)
  assert predict_out["end_top_index"].shape == (BATCH, 6)
  np.testing.assert_allclose(train_out["cls_logits"], predict_out["cls_logits"], atol=1e-6)
  config = model.get_config()
  assert config["version_2_with_negative"] and config["start_n_top"] == 3
  clone = AlbertSquadModel.from_config(config)
  assert clone.get_config() == config
  # A checkpoint of one SQuAD model restores into another (the trainer's checkpoint layout).
  clone(_inputs())
  ckpt = tf.train.Checkpoint(model=model).write(str(tmp_path / "ckpt"))
  tf.train.Checkpoint(model=clone).read(ckpt).assert_existing_objects_matched()
  np.testing.assert_allclose(clone(_inputs())["cls_logits"], predict_out["cls_logits"], atol=1e-6)


def test_init_checkpoint_from_pretraining_loads_the_encoder(tmp_path):
  from albert_tf.models.pretrainer import AlbertPretrainer  # pylint: disable=g-import-not-at-top
  config = tiny_albert_config(**CONFIG_OVERRIDES)
  pretrainer = AlbertPretrainer(config)
  inputs = _inputs()
  pretrainer(dict(inputs, masked_lm_positions=tf.zeros([BATCH, 2], tf.int32)), training=False)
  path = tf.train.Checkpoint(model=pretrainer).write(str(tmp_path / "pretrained"))
  task = SquadTask(SquadConfig(config, version_2_with_negative=True, max_seq_length=SEQ,
                               max_query_length=4, init_checkpoint=path))
  model = task.build_model()
  model(inputs)
  task.initialize(model)
  for ours, theirs in zip(model.encoder.weights, pretrainer.encoder.weights):
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=ours.name)
  np.testing.assert_allclose(model.encoder(inputs)["sequence_output"],
                             pretrainer.encoder(inputs)["sequence_output"], atol=1e-6)


OFFICIAL_V2_HEAD = {  # run_squad_v2.py's variables, H = hidden size
    "start_logits/dense/kernel": ["H", 1], "start_logits/dense/bias": [1],
    "end_logits/dense_0/kernel": ["2H", "H"], "end_logits/dense_0/bias": ["H"],
    "end_logits/LayerNorm/gamma": ["H"], "end_logits/LayerNorm/beta": ["H"],
    "end_logits/dense_1/kernel": ["H", 1], "end_logits/dense_1/bias": [1],
    "answer_class/dense_0/kernel": ["2H", "H"], "answer_class/dense_0/bias": ["H"],
    "answer_class/dense_1/kernel": ["H", 1],
}


@pytest.mark.parametrize("v2", [False, True])
def test_official_tf1_squad_checkpoint_loads_encoder_and_head(tmp_path, v2):
  from albert_tf.checkpoints import official_names  # pylint: disable=g-import-not-at-top
  config = tiny_albert_config(**CONFIG_OVERRIDES)
  hidden = config.hidden_size
  source = AlbertSquadModel(config, version_2_with_negative=v2)
  source(_inputs())
  head_map = official_names.head_variable_map(source)
  expected = ({k: [{"H": hidden, "2H": 2 * hidden}.get(d, d) for d in v]
               for k, v in OFFICIAL_V2_HEAD.items()} if v2 else
              {"cls/squad/output_weights": [2, hidden], "cls/squad/output_bias": [2]})
  assert {k: v.shape.as_list() for k, v in head_map.items()} == expected
  # An official fine-tuned checkpoint: TF1 names for the encoder and the head.
  names = dict(official_names.model_variable_map(source), **head_map)
  prefix = str(tmp_path / "model.ckpt-best")
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=sorted(names), shape_and_slices=[""] * len(names),
                    tensors=[names[n].numpy() for n in sorted(names)])
  task = SquadTask(SquadConfig(config, version_2_with_negative=v2, max_seq_length=SEQ,
                               max_query_length=4, init_checkpoint=prefix))
  model = task.build_model()
  model(_inputs())
  task.initialize(model)
  expected_out, got = source(_inputs()), model(_inputs())
  for name in expected_out:
    np.testing.assert_allclose(got[name], expected_out[name], atol=1e-6, err_msg=name)
