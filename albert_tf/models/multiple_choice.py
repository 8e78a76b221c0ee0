"""AlbertMultipleChoice: the encoder run on every choice + a one-unit scorer (RACE)."""

import tensorflow as tf
import tf_keras

from albert_tf.common import kinds
from albert_tf.heads.multiple_choice import MultipleChoiceHead
from albert_tf.models.base import AlbertModel


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertMultipleChoice(AlbertModel):
  """Multiple choice as in the official run_race: one encoder pass per choice, softmax over them.

  Inputs: dict of int [batch, num_choices, seq_len] input_ids, input_mask, segment_ids.
  Outputs: dict of float32 logits [batch, num_choices] and probabilities (softmax of logits).
  """

  KINDS = (kinds.MULTIPLE_CHOICE,)

  def __init__(self, config, num_choices=4, dropout_rate=0.1, **kwargs):
    kwargs.setdefault("name", "albert_multiple_choice")
    super().__init__(config, **kwargs)
    config = self.config
    self.num_choices = num_choices
    self.dropout_rate = dropout_rate
    self.choice_head = MultipleChoiceHead(
        config.hidden_size, num_choices=num_choices, dropout_rate=dropout_rate,
        initializer_range=config.initializer_range, name="multiple_choice")
    self.choice_head.build(None)
    self.built = True

  def call(self, inputs, training=None):
    # [batch, choices, seq] -> [batch * choices, seq]: choices of a question stay contiguous.
    flat = {}
    for key in ("input_ids", "input_mask", "segment_ids"):
      if key in inputs:
        value = inputs[key]
        flat[key] = tf.reshape(value, [-1, tf.shape(value)[-1]])
    # The head reads only the pooled output: skip the rest of the last layer.
    encoder_outputs = self.encoder(flat, training=training, pooled_only=True)
    logits = self.choice_head(encoder_outputs["pooled_output"], training=training)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}

  def head_config(self):
    return {"num_choices": self.num_choices, "dropout_rate": self.dropout_rate}
