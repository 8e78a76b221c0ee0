"""AlbertClassifier: the encoder + the classification head (GLUE; STS-B as 1-unit regression)."""

import tensorflow as tf
import tf_keras

from albert_tf.config import AlbertConfig
from albert_tf.heads.classification import ClassificationHead
from albert_tf.networks.encoder import AlbertEncoder
from albert_tf.pretrained import LoadableFromPretrained


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertClassifier(LoadableFromPretrained, tf_keras.Model):
  """Sentence (pair) classification / regression on the pooled output.

  Inputs: dict of int [batch, seq_len] input_ids, input_mask, segment_ids.
  Outputs: dict of float32
    logits [batch, num_classes],
    probabilities [batch, num_classes]: softmax of the logits; for regression (num_classes=1,
      is_regression=True) the raw score, as the official `probabilities` output.
  """

  def __init__(self, config, num_classes, is_regression=False, dropout_rate=0.1, **kwargs):
    kwargs.setdefault("name", "albert_classifier")
    super().__init__(**kwargs)
    if isinstance(config, dict):
      config = AlbertConfig.from_dict(config)
    if is_regression and num_classes != 1:
      raise ValueError(f"regression needs num_classes=1, got {num_classes}")
    self.config = config
    self.num_classes = num_classes
    self.is_regression = is_regression
    self.dropout_rate = dropout_rate
    self.encoder = AlbertEncoder(config, name="encoder")
    self.classifier_head = ClassificationHead(
        config.hidden_size, num_classes, dropout_rate=dropout_rate,
        initializer_range=config.initializer_range, name="classifier")
    self.classifier_head.build(None)
    self.built = True

  def call(self, inputs, training=None):
    encoder_outputs = self.encoder(
        {k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids") if k in inputs},
        training=training, pooled_only=True)  # the head reads only the pooled output
    logits = self.classifier_head(encoder_outputs["pooled_output"], training=training)
    probabilities = logits if self.is_regression else tf.nn.softmax(logits, axis=-1)
    return {"logits": logits, "probabilities": probabilities}

  def get_config(self):
    return {"config": self.config.to_dict(), "num_classes": self.num_classes,
            "is_regression": self.is_regression, "dropout_rate": self.dropout_rate,
            "name": self.name}

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = dict(config)
    return cls(AlbertConfig.from_dict(config.pop("config")), **config)
