"""Which variables get weight decay and the LAMB trust ratio, listed for the released layouts.

The official optimizer searches "LayerNorm", "layer_norm" and "bias" in the TF1 variable names
(`bert/embeddings/LayerNorm/gamma`, ...). Keras names a LayerNorm's parameters bare `gamma:0` /
`beta:0`, so deciding on Keras names decayed every LayerNorm; these tests list every trainable
variable of each model with the decision the official code makes for it, written out by hand.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.training import optimizer as opt_lib
from tests.helpers.paths import CONFIG_DIR

_T = "bert/encoder/transformer/group_0/inner_group_0/"
# (official name, gets weight decay and trust ratio) of every trainable variable of the released
# pretraining model (one group, one inner layer, E != H), in the official names.
_PRETRAINER = {
    "bert/embeddings/word_embeddings": True,
    "bert/embeddings/position_embeddings": True,
    "bert/embeddings/token_type_embeddings": True,
    "bert/embeddings/LayerNorm/gamma": False,
    "bert/embeddings/LayerNorm/beta": False,
    "bert/encoder/embedding_hidden_mapping_in/kernel": True,
    "bert/encoder/embedding_hidden_mapping_in/bias": False,
    _T + "attention_1/self/query/kernel": True,
    _T + "attention_1/self/query/bias": False,
    _T + "attention_1/self/key/kernel": True,
    _T + "attention_1/self/key/bias": False,
    _T + "attention_1/self/value/kernel": True,
    _T + "attention_1/self/value/bias": False,
    _T + "attention_1/output/dense/kernel": True,
    _T + "attention_1/output/dense/bias": False,
    _T + "LayerNorm/gamma": False,
    _T + "LayerNorm/beta": False,
    _T + "ffn_1/intermediate/dense/kernel": True,
    _T + "ffn_1/intermediate/dense/bias": False,
    _T + "ffn_1/intermediate/output/dense/kernel": True,
    _T + "ffn_1/intermediate/output/dense/bias": False,
    _T + "LayerNorm_1/gamma": False,
    _T + "LayerNorm_1/beta": False,
    "bert/pooler/dense/kernel": True,
    "bert/pooler/dense/bias": False,
    "cls/predictions/transform/dense/kernel": True,
    "cls/predictions/transform/dense/bias": False,
    "cls/predictions/transform/LayerNorm/gamma": False,
    "cls/predictions/transform/LayerNorm/beta": False,
    "cls/predictions/output_bias": False,
    "cls/seq_relationship/output_weights": True,
    "cls/seq_relationship/output_bias": False,
}
_ENCODER = {n: d for n, d in _PRETRAINER.items() if n.startswith("bert/")}
_HEADS = {
    "classifier": {"output_weights": True, "output_bias": False},
    "multiple_choice": {"output_weights": True, "output_bias": False},
    "squad_v1": {"cls/squad/output_weights": True, "cls/squad/output_bias": False},
    "squad_v2": {
        "start_logits/dense/kernel": True, "start_logits/dense/bias": False,
        "end_logits/dense_0/kernel": True, "end_logits/dense_0/bias": False,
        "end_logits/LayerNorm/gamma": False, "end_logits/LayerNorm/beta": False,
        "end_logits/dense_1/kernel": True, "end_logits/dense_1/bias": False,
        "answer_class/dense_0/kernel": True, "answer_class/dense_0/bias": False,
        "answer_class/dense_1/kernel": True},
}


def _released_layout(name):
  """The released config `name` with its layout (L, G, K, E != H, activation) kept and its
  widths shrunk: the variable list depends on the layout only, and xxlarge at full width is
  222M parameters to initialise."""
  cfg = json.loads((CONFIG_DIR / f"{name}.json").read_text())
  cfg.update(hidden_size=8, embedding_size=4, intermediate_size=16, num_attention_heads=2,
             vocab_size=40, max_position_embeddings=16)
  return AlbertConfig.from_dict(cfg)


def _built(kind, config):
  from albert_tf import models  # pylint: disable=g-import-not-at-top
  seq = 6
  ids = tf.constant(np.arange(2 * seq).reshape(2, seq) % 30 + 5, tf.int32)
  features = {"input_ids": ids, "input_mask": tf.ones_like(ids), "segment_ids": tf.zeros_like(ids)}
  if kind == "pretrainer":
    model = models.AlbertPretrainer(config)
    features["masked_lm_positions"] = tf.constant([[1, 2], [3, 4]], tf.int32)
  elif kind == "classifier":
    model = models.AlbertClassifier(config, num_classes=3)
  elif kind == "multiple_choice":
    model = models.AlbertMultipleChoice(config, num_choices=2)
    features = {k: tf.stack([v, v], axis=1) for k, v in features.items()}
  else:
    model = models.AlbertSquadModel(config, version_2_with_negative=(kind == "squad_v2"),
                                    start_n_top=2, end_n_top=2)
    features["p_mask"] = tf.zeros_like(ids)
  model(features, training=False)
  return model


@pytest.mark.parametrize("layout", ["albert_base_v2", "albert_large_v2", "albert_xxlarge_v2"])
def test_every_pretraining_variable_of_the_released_layouts(layout):
  model = _built("pretrainer", _released_layout(layout))
  lamb = opt_lib.create_optimizer("lamb", 1e-3, 10)
  rules = opt_lib.decay_rules(model, lamb)
  assert rules == {name: (decay, decay) for name, decay in _PRETRAINER.items()}
  assert len(rules) == len(model.trainable_variables)
  adamw = opt_lib.create_optimizer("adamw", 1e-3, 10)
  assert opt_lib.decay_rules(model, adamw) == {
      name: (decay, False) for name, decay in _PRETRAINER.items()}


@pytest.mark.parametrize("kind", sorted(_HEADS))
def test_every_fine_tuning_variable(kind):
  model = _built(kind, _released_layout("albert_base_v2"))
  rules = opt_lib.decay_rules(model, opt_lib.create_optimizer("adamw", 1e-3, 10))
  assert rules == {name: (decay, False) for name, decay in {**_ENCODER, **_HEADS[kind]}.items()}


def test_layer_norms_keep_their_values_through_a_lamb_step():
  """Zero gradients: only weight decay moves a variable. The model's LayerNorm parameters and
  biases stay exactly where they are; its kernels and embeddings shrink."""
  model = _built("pretrainer", _released_layout("albert_base_v2"))
  optimizer = opt_lib.create_optimizer("lamb", 0.1, 10)
  optimizer.bind_model(model)
  before = {name: v.numpy().copy() for v, name in opt_lib.official_variable_names(model)}
  optimizer.apply_gradients((tf.zeros_like(v), v) for v in model.trainable_variables)
  for variable, name in opt_lib.official_variable_names(model):
    moved = not np.array_equal(variable.numpy(), before[name])
    assert moved == _PRETRAINER[name], name


def test_a_variable_without_official_name_is_an_error():
  model = _built("classifier", _released_layout("albert_base_v2"))
  model.stray = tf.Variable([1.0], name="stray")  # tracked, trainable, in no name table
  with pytest.raises(AlbertError, match="no official name.*stray"):
    opt_lib.create_optimizer("adamw", 1e-3, 10).bind_model(model)
