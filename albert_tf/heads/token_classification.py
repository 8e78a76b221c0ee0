"""The token-classification head (NER): dropout + one dense layer on every position."""

import tf_keras

from albert_tf.heads.classification import ClassificationHead


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class TokenClassificationHead(ClassificationHead):
  """logits = dropout(sequence_output) @ output_weights^T + output_bias, at every position.

  The classification head applied per piece instead of to the pooled output (as HF's
  AlbertForTokenClassification): the weights are stored [num_labels, hidden] like the official
  classifier's, under `cls/token_classification/` (checkpoints/official_names.py).

  Call args:
    sequence_output: [batch, seq_len, hidden].
    training: applies dropout when True.
  Returns:
    float32 [batch, seq_len, num_labels].
  """
