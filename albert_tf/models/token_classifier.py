"""AlbertTokenClassifier: the encoder + a label per piece (named-entity recognition)."""

import tensorflow as tf
import tf_keras

from albert_tf.common import kinds
from albert_tf.errors import AlbertError
from albert_tf.heads.token_classification import TokenClassificationHead
from albert_tf.models.base import AlbertModel


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertTokenClassifier(AlbertModel):
  """Token classification: one label per piece from the last layer's sequence output.

  Which piece carries a word's label (its first) is data/token_alignment.py's rule; the model
  scores every position.

  Inputs: dict of int [batch, seq_len] input_ids, input_mask, segment_ids.
  Outputs: dict of float32 logits [batch, seq_len, num_classes] and probabilities (their softmax).
  """

  KINDS = (kinds.TOKEN_CLASSIFIER,)
  is_regression = False  # (the HF head checks shared with the sequence classifier read it)

  def __init__(self, config, num_classes, dropout_rate=0.1, **kwargs):
    kwargs.setdefault("name", "albert_token_classifier")
    super().__init__(config, **kwargs)
    self.num_classes = num_classes
    self.dropout_rate = dropout_rate
    self.token_classifier_head = TokenClassificationHead(
        self.config.hidden_size, num_classes, dropout_rate=dropout_rate,
        initializer_range=self.config.initializer_range, name="token_classifier")
    self.token_classifier_head.build(None)
    self.built = True

  @classmethod
  def kind_args(cls, kind, num_labels=None):
    if (num_labels or 0) < 2:
      raise AlbertError(f"a token classifier needs 2 or more labels (O and an entity tag), got "
                        f"{num_labels}")
    return {"num_classes": num_labels}

  def call(self, inputs, training=None):
    inputs = {k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids") if k in inputs}
    sequence_output = self.encoder(inputs, training=training)["sequence_output"]
    logits = self.token_classifier_head(sequence_output, training=training)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}

  def head_config(self):
    return {"num_classes": self.num_classes, "dropout_rate": self.dropout_rate}
