"""AlbertMultipleChoice: each choice goes through the encoder."""

import numpy as np
import pytest

from albert_tf.models.multiple_choice import AlbertMultipleChoice
from tests.helpers.model_inputs import random_features
from tests.helpers.tiny_config import tiny_albert_config


def test_multiple_choice_model_runs_each_choice_through_the_encoder():
  model = AlbertMultipleChoice(tiny_albert_config(), num_choices=4)
  inputs = random_features(2, 12, seed=3, extra_dims=(4,))
  outputs = model(inputs, training=False)
  assert outputs["logits"].shape == (2, 4)
  np.testing.assert_allclose(outputs["probabilities"].numpy().sum(-1), [1, 1], rtol=1e-6)
  # Choice (1, 2) scored alone equals its entry in the batched result.
  single = {k: v[1:2, 2] for k, v in inputs.items()}
  pooled = model.encoder(single, training=False)["pooled_output"]
  score = model.choice_head.scorer(pooled, training=False).numpy()[0, 0]
  assert outputs["logits"].numpy()[1, 2] == pytest.approx(score, abs=1e-5)
  clone = AlbertMultipleChoice.from_config(model.get_config())
  assert clone.get_config() == model.get_config()
