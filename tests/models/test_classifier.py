"""AlbertClassifier: outputs and config round trip."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.models.classifier import AlbertClassifier
from tests.helpers.model_inputs import random_features
from tests.helpers.tiny_config import tiny_albert_config


def test_classifier_outputs_and_config_roundtrip():
  model = AlbertClassifier(tiny_albert_config(), num_classes=3)
  inputs = random_features(2, 16)
  outputs = model(inputs, training=False)
  assert outputs["logits"].shape == (2, 3) and outputs["logits"].dtype == tf.float32
  np.testing.assert_allclose(outputs["probabilities"].numpy(),
                             tf.nn.softmax(outputs["logits"]).numpy(), rtol=1e-6)
  pooled = model.encoder(inputs, training=False)["pooled_output"].numpy()
  head = model.classifier_head
  np.testing.assert_allclose(outputs["logits"].numpy(),
                             pooled @ head.output_weights.numpy().T + head.output_bias.numpy(),
                             rtol=1e-5, atol=1e-6)
  clone = AlbertClassifier.from_config(model.get_config())
  assert clone.get_config() == model.get_config()
  clone.set_weights(model.get_weights())
  np.testing.assert_allclose(clone(inputs, training=False)["logits"].numpy(),
                             outputs["logits"].numpy(), rtol=1e-5, atol=1e-6)
  regression = AlbertClassifier(tiny_albert_config(), num_classes=1, is_regression=True)
  out = regression(inputs, training=False)
  np.testing.assert_array_equal(out["probabilities"].numpy(), out["logits"].numpy())
  with pytest.raises(ValueError):
    AlbertClassifier(tiny_albert_config(), num_classes=2, is_regression=True)
