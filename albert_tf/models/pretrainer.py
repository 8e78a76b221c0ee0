"""AlbertPretrainer: encoder + masked-LM head + sentence-order head."""

import tf_keras

from albert_tf.common import kinds
from albert_tf.config import AlbertConfig
from albert_tf.heads.masked_lm import MaskedLMHead
from albert_tf.heads.sentence_order import SentenceOrderHead
from albert_tf.models.base import AlbertModel


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertPretrainer(AlbertModel):
  """The official pretraining model: `bert/` + `cls/predictions` + `cls/seq_relationship`.

  Inputs: dict of int [batch, seq_len] input_ids, input_mask, segment_ids, and optionally
    masked_lm_positions int [batch, num_predictions] (without it, MLM logits for every position).
  Outputs: the encoder's dict plus
    mlm_logits float32 [batch, num_predictions, vocab],
    sop_logits float32 [batch, 2].
  """

  KINDS = (kinds.PRETRAINER,)

  def __init__(self, config, **kwargs):
    kwargs.setdefault("name", "albert_pretrainer")
    super().__init__(config, **kwargs)
    config = self.config
    self.masked_lm_head = MaskedLMHead(
        vocab_size=config.vocab_size, embedding_size=config.embedding_size,
        hidden_size=config.hidden_size, hidden_act=config.hidden_act,
        initializer_range=config.initializer_range, name="predictions")
    self.sentence_order_head = SentenceOrderHead(
        hidden_size=config.hidden_size, initializer_range=config.initializer_range,
        name="seq_relationship")
    self.masked_lm_head.build(None)
    self.sentence_order_head.build(None)
    self.built = True

  def call(self, inputs, training=None):
    outputs = dict(self.encoder(inputs, training=training))
    outputs["mlm_logits"] = self.masked_lm_head(
        outputs["sequence_output"], self.encoder.embeddings.word_embeddings,
        positions=inputs.get("masked_lm_positions"))
    outputs["sop_logits"] = self.sentence_order_head(outputs["pooled_output"])
    return outputs

  @classmethod
  def from_config(cls, config, custom_objects=None):
    # Reads only config and name (an older config may carry other keys).
    return cls(AlbertConfig.from_dict(config["config"]), name=config.get("name"))
