"""AlbertSquadModel: the encoder + the SQuAD v1.1 span head or the official ALBERT v2.0 head."""

import tf_keras

from albert_tf.common import kinds
from albert_tf.heads.squad import SquadSpanHead, SquadV2Head
from albert_tf.models.base import AlbertModel

_ENCODER_INPUTS = ("input_ids", "input_mask", "segment_ids")


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertSquadModel(AlbertModel):
  """Extractive question answering on the encoder's sequence output.

  Inputs: dict of int32 [batch, seq_len] input_ids, input_mask, segment_ids; for v2.0 also p_mask
  [batch, seq_len] and, to train, start_positions [batch] (the gold start the end head is
  conditioned on). Other keys (unique_ids, ...) are ignored.

  Outputs (float32; indices int32):
    v1.1: start_logits, end_logits [batch, seq_len].
    v2.0 with start_positions: start_log_probs, end_log_probs [batch, seq_len], cls_logits [batch].
    v2.0 without: start_top_log_probs, start_top_index [batch, start_n_top],
      end_top_log_probs, end_top_index [batch, start_n_top * end_n_top], cls_logits [batch].
  """

  KINDS = (kinds.SQUAD_V1, kinds.SQUAD_V2)

  def __init__(self, config, version_2_with_negative=False, start_n_top=5, end_n_top=5,
               dropout_rate=0.1, **kwargs):
    kwargs.setdefault("name", "albert_squad")
    super().__init__(config, **kwargs)
    config = self.config
    self.version_2_with_negative = bool(version_2_with_negative)
    self.start_n_top = start_n_top
    self.end_n_top = end_n_top
    self.dropout_rate = dropout_rate
    if self.version_2_with_negative:
      self.squad_head = SquadV2Head(
          config.hidden_size, start_n_top=start_n_top, end_n_top=end_n_top,
          dropout_rate=dropout_rate, initializer_range=config.initializer_range,
          name="squad_v2_head")
    else:
      self.squad_head = SquadSpanHead(initializer_range=config.initializer_range,
                                      name="squad_head")
    self.squad_head.build([None, None, config.hidden_size])

  def call(self, inputs, training=None):
    encoder_outputs = self.encoder({k: inputs[k] for k in _ENCODER_INPUTS}, training=training)
    sequence_output = encoder_outputs["sequence_output"]
    if not self.version_2_with_negative:
      return self.squad_head(sequence_output)
    return self.squad_head(sequence_output, inputs["p_mask"],
                           start_positions=inputs.get("start_positions"), training=training)

  @property
  def kind(self):
    return kinds.SQUAD_V2 if self.version_2_with_negative else kinds.SQUAD_V1

  @classmethod
  def kind_args(cls, kind, num_labels=None):
    return {"version_2_with_negative": kind == kinds.SQUAD_V2}

  def head_config(self):
    return {"version_2_with_negative": self.version_2_with_negative,
            "start_n_top": self.start_n_top, "end_n_top": self.end_n_top,
            "dropout_rate": self.dropout_rate}

