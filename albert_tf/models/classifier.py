"""AlbertClassifier: the encoder + the classification head (GLUE; STS-B as 1-unit regression)."""

import tensorflow as tf
import tf_keras

from albert_tf.common import kinds
from albert_tf.errors import AlbertError
from albert_tf.heads.classification import ClassificationHead
from albert_tf.models.base import AlbertModel


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertClassifier(AlbertModel):
  """Sentence (pair) classification / regression on the pooled output.

  Inputs: dict of int [batch, seq_len] input_ids, input_mask, segment_ids.
  Outputs: dict of float32
    logits [batch, num_classes],
    probabilities [batch, num_classes]: softmax of the logits; for regression (num_classes=1,
      is_regression=True) the raw score, as the official `probabilities` output.
  """

  KINDS = (kinds.CLASSIFIER, kinds.REGRESSION)

  def __init__(self, config, num_classes, is_regression=False, dropout_rate=0.1, **kwargs):
    kwargs.setdefault("name", "albert_classifier")
    if is_regression and num_classes != 1:
      raise ValueError(f"regression needs num_classes=1, got {num_classes}")
    super().__init__(config, **kwargs)
    config = self.config
    self.num_classes = num_classes
    self.is_regression = is_regression
    self.dropout_rate = dropout_rate
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

  @property
  def kind(self):
    return kinds.REGRESSION if self.is_regression else kinds.CLASSIFIER

  @classmethod
  def kind_args(cls, kind, num_labels=None):
    if kind == kinds.REGRESSION:
      return {"num_classes": 1, "is_regression": True}
    if (num_labels or 0) < 2:
      raise AlbertError(f"a classifier needs 2 or more classes, got {num_labels} (a one-class "
                        "head is a regression: --model_type=regression)")
    return {"num_classes": num_labels, "is_regression": False}

  def head_config(self):
    return {"num_classes": self.num_classes, "is_regression": self.is_regression,
            "dropout_rate": self.dropout_rate}
