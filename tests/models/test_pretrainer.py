"""AlbertPretrainer: MLM logits without positions; encoder and pretrainer config round trips."""

import tf_keras

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from tests.helpers.model_inputs import random_pretraining_arrays
from tests.helpers.tiny_config import tiny_config_dict


def test_mlm_logits_for_every_position_without_positions():
  cfg = tiny_config_dict()
  model = AlbertPretrainer(AlbertConfig.from_dict(cfg))
  ids, mask, seg, _ = random_pretraining_arrays(cfg)
  out = model(dict(input_ids=ids, input_mask=mask, segment_ids=seg))
  assert out["mlm_logits"].shape == (3, 12, cfg["vocab_size"])


def test_model_configs_round_trip():
  cfg = tiny_config_dict(num_hidden_layers=3, num_hidden_groups=2, sharing="ffn")
  for cls in (AlbertEncoder, AlbertPretrainer):
    model = cls(AlbertConfig.from_dict(cfg))
    clone = cls.from_config(model.get_config())
    assert clone.config == model.config
    assert clone.count_params() == model.count_params()
    serialized = tf_keras.saving.serialize_keras_object(model)
    assert tf_keras.saving.deserialize_keras_object(serialized).config == model.config
