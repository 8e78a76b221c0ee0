"""Every model keeps the Keras conventions (tests/helpers/keras_conventions.py): config round trip
with equal outputs, float32 variables and logits under mixed precision, SavedModel round trip."""

import pytest
import tensorflow as tf

from albert_tf import AlbertEncoder, AlbertPretrainer
from albert_tf.models import (AlbertClassifier, AlbertMultipleChoice, AlbertSquadModel,
                              AlbertTokenClassifier)
from tests.helpers import keras_conventions
from tests.helpers.model_inputs import random_features, randomize_weights
from tests.helpers.tiny_config import tiny_albert_config

SEQ = 16


def _squad_inputs():
  features = random_features(2, SEQ)
  features["p_mask"] = tf.zeros([2, SEQ], tf.int32)
  return features


# name: (model factory (random weights, so outputs differ from input to input), inputs,
#        outputs promised in float32)
MODELS = {
    "encoder": (lambda: AlbertEncoder(tiny_albert_config()), lambda: random_features(2, SEQ),
                ()),
    "pretrainer": (lambda: AlbertPretrainer(tiny_albert_config(num_hidden_groups=2)),
                   lambda: dict(random_features(2, SEQ),
                                masked_lm_positions=tf.constant([[1, 2], [3, 4]])),
                   ("mlm_logits", "sop_logits")),
    "classifier": (lambda: AlbertClassifier(tiny_albert_config(), num_classes=3),
                   lambda: random_features(2, SEQ), ("logits", "probabilities")),
    "classifier_early_exit": (
        lambda: AlbertClassifier(tiny_albert_config(num_hidden_layers=3), num_classes=3,
                                 early_exit="patience", patience=1),
        lambda: random_features(2, SEQ), ("logits", "probabilities")),
    "multiple_choice": (lambda: AlbertMultipleChoice(tiny_albert_config(), num_choices=4),
                        lambda: random_features(2, SEQ, extra_dims=(4,)), ("logits",)),
    "squad_v1": (lambda: AlbertSquadModel(tiny_albert_config()), _squad_inputs,
                 ("start_logits", "end_logits")),
    "squad_v2": (lambda: AlbertSquadModel(tiny_albert_config(), version_2_with_negative=True),
                 _squad_inputs, ("start_top_log_probs", "cls_logits")),
    "token_classifier": (lambda: AlbertTokenClassifier(tiny_albert_config(), num_classes=5),
                         lambda: random_features(2, SEQ), ("logits", "probabilities")),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_config_round_trip_and_mixed_precision(name):
  make, inputs, float32_outputs = MODELS[name]
  inputs = inputs()
  keras_conventions.check_config_round_trip(lambda: randomize_weights(_built(make, inputs)),
                                            inputs)
  keras_conventions.check_mixed_precision(make, inputs, float32_outputs)


@pytest.mark.parametrize("name", ["encoder", "classifier"])
def test_saved_model_round_trip(name, tmp_path):
  make, inputs, _ = MODELS[name]
  inputs = inputs()
  keras_conventions.check_saved_model(lambda: randomize_weights(_built(make, inputs)), inputs,
                                      tmp_path / name)


def _built(make, inputs):
  model = make()
  model(inputs, training=False)
  return model
