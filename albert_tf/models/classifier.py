"""AlbertClassifier: the encoder + the classification head (GLUE; STS-B as 1-unit regression)."""

import tensorflow as tf
import tf_keras

from albert_tf.common import kinds
from albert_tf.errors import AlbertError
from albert_tf.heads.classification import ClassificationHead
from albert_tf.heads.early_exit import RULES, EarlyExitClassifiers
from albert_tf.models.base import AlbertModel
from albert_tf.models.early_exit import patience_exit


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertClassifier(AlbertModel):
  """Sentence (pair) classification / regression on the pooled output.

  Inputs: dict of int [batch, seq_len] input_ids, input_mask, segment_ids.
  Outputs: dict of float32
    logits [batch, num_classes],
    probabilities [batch, num_classes]: softmax of the logits; for regression (num_classes=1,
      is_regression=True) the raw score, as the official `probabilities` output.

  Early exit (`early_exit="patience"`, PABEE): L - 1 internal classifiers
  (`early_exit_classifiers`, heads/early_exit.py) read the pooled output of layers 1 .. L-1; the
  ordinary head stays the last layer's (same variables and names, so a checkpoint or export of
  it means what it always meant). Then outputs also hold
    layer_logits float32 [batch, L, num_classes] (training, or inference with patience None):
      every layer's logits, the last = logits;
    exit_layer int32 [batch] (inference): the 1-based layer each example's answer comes from.
  With `patience` set (>= 1), inference stops each example early (models/early_exit.py) and
  logits / probabilities are those of its exit layer; patience None runs every layer (exit_layer
  L). regression_threshold: how little a regression score may change to count as unchanged.
  """

  KINDS = (kinds.CLASSIFIER, kinds.REGRESSION)

  def __init__(self, config, num_classes, is_regression=False, dropout_rate=0.1,
               early_exit=None, patience=None, regression_threshold=0.1, **kwargs):
    kwargs.setdefault("name", "albert_classifier")
    if is_regression and num_classes != 1:
      raise ValueError(f"regression needs num_classes=1, got {num_classes}")
    if early_exit not in (None,) + RULES:
      raise AlbertError(f"early_exit={early_exit!r} is invalid: expected one of "
                        f"{', '.join(RULES)} (or none)")
    super().__init__(config, **kwargs)
    config = self.config
    self.num_classes = num_classes
    self.is_regression = is_regression
    self.dropout_rate = dropout_rate
    self.early_exit = early_exit
    self.patience = patience
    self.regression_threshold = regression_threshold
    self.classifier_head = ClassificationHead(
        config.hidden_size, num_classes, dropout_rate=dropout_rate,
        initializer_range=config.initializer_range, name="classifier")
    self.classifier_head.build(None)
    self.early_exit_classifiers = None
    if early_exit:
      self.early_exit_classifiers = EarlyExitClassifiers(
          config.hidden_size, num_classes, config.num_hidden_layers, dropout_rate=dropout_rate,
          initializer_range=config.initializer_range, name="early_exit")
      self.early_exit_classifiers.build(None)
    self.built = True

  @property
  def patience(self):
    """Early exit's patience at inference (int >= 1), or None: every layer runs (settable)."""
    return self._patience

  @patience.setter
  def patience(self, value):
    if value is not None and (int(value) != value or value < 1):
      raise AlbertError(f"early-exit patience {value!r} is invalid: expected an integer >= 1")
    self._patience = None if value is None else int(value)

  def call(self, inputs, training=None):
    inputs = {k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids") if k in inputs}
    if self.early_exit and not training and self._patience is not None:
      logits, exit_layer = patience_exit(
          self.encoder, self.early_exit_classifiers.heads, self.classifier_head, inputs,
          self._patience, self.is_regression, self.regression_threshold)
      return {**self._outputs(logits), "exit_layer": exit_layer}
    # The heads read only the pooled output(s): the last layer runs for the first token alone.
    encoder_outputs = self.encoder(inputs, training=training, pooled_only=True)
    logits = self.classifier_head(encoder_outputs["pooled_output"], training=training)
    outputs = self._outputs(logits)
    if self.early_exit:
      if "encoder_outputs" in encoder_outputs:  # (not under shared_layers_in_one_loop)
        k = self.config.inner_group_num
        layer_outputs = encoder_outputs["encoder_outputs"][k - 1::k][:-1]
        internal = self.early_exit_classifiers(
            [self.encoder.pooler(h[:, 0, :]) for h in layer_outputs], training=training)
        outputs["layer_logits"] = tf.stack(internal + [logits], axis=1)
      if not training:
        outputs["exit_layer"] = tf.fill(tf.shape(logits)[:1], self.config.num_hidden_layers)
    return outputs

  def _outputs(self, logits):
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
    config = {"num_classes": self.num_classes, "is_regression": self.is_regression,
              "dropout_rate": self.dropout_rate}
    if self.early_exit:  # (a classifier without early exit keeps the config it always had)
      config.update(early_exit=self.early_exit, patience=self.patience,
                    regression_threshold=self.regression_threshold)
    return config
