"""AlbertEncoder: factorized embeddings, shared transformer layers and the pooler."""

import tensorflow as tf
import tf_keras

from albert_tf.config import AlbertConfig
from albert_tf.layers import initializers
from albert_tf.layers.attention import AlbertAttentionBlock, attention_mask_adder
from albert_tf.layers.embedding import AlbertEmbeddings
from albert_tf.layers.feedforward import AlbertFeedForwardBlock
from albert_tf.networks.sharing import make_sharing_plan, owner_scope


def _block_name(kind, owner):
  # Keras layer names cannot hold "/", so the TF1 scope is flattened.
  return owner_scope(owner).replace("/", "_") + "_" + kind


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertEncoder(tf_keras.Model):
  """The ALBERT encoder (`bert/` in official checkpoints), pooler included.

  Inputs: a dict with int tensors [batch, seq_len]:
    input_ids, input_mask (1 = real token), segment_ids (token type).
  Outputs: a dict with
    sequence_output [batch, seq_len, hidden]: the last layer.
    pooled_output [batch, hidden]: tanh(dense(first token of sequence_output)).
    encoder_outputs: list of L * K tensors [batch, seq_len, hidden], one per applied inner layer.
    embedding_output [batch, seq_len, embedding_size]: after embedding LayerNorm/dropout.
  Tensors are in the compute dtype of the mixed-precision policy.

  `call(..., pooled_only=True)` is for heads that read only the pooled output (classification,
  multiple choice): the last inner layer then runs for the first token alone (its keys and values
  still see every token), which gives the same pooled output for about 1/L less work;
  sequence_output and the last encoder output are then [batch, 1, hidden].
  """

  def __init__(self, config, **kwargs):
    kwargs.setdefault("name", "encoder")
    super().__init__(**kwargs)
    if isinstance(config, dict):
      config = AlbertConfig.from_dict(config)
    self.config = config
    self.sharing_plan = make_sharing_plan(config)
    init = lambda: initializers.truncated_normal(config.initializer_range)
    self.embeddings = AlbertEmbeddings(
        vocab_size=config.vocab_size, embedding_size=config.embedding_size,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, dropout_rate=config.hidden_dropout_prob,
        initializer_range=config.initializer_range, name="embeddings")
    # The official code projects only when the widths differ, with no activation.
    self.embedding_projection = None
    if config.embedding_size != config.hidden_size:
      self.embedding_projection = tf_keras.layers.Dense(
          config.hidden_size, kernel_initializer=init(), name="embedding_hidden_mapping_in")
    self.attention_blocks = [
        AlbertAttentionBlock(
            hidden_size=config.hidden_size, num_attention_heads=config.num_attention_heads,
            attention_probs_dropout_prob=config.attention_probs_dropout_prob,
            hidden_dropout_prob=config.hidden_dropout_prob,
            initializer_range=config.initializer_range, name=_block_name("attention", owner))
        for owner in self.sharing_plan.attention_owners]
    self.ffn_blocks = [
        AlbertFeedForwardBlock(
            hidden_size=config.hidden_size, intermediate_size=config.intermediate_size,
            hidden_act=config.hidden_act, hidden_dropout_prob=config.hidden_dropout_prob,
            initializer_range=config.initializer_range, name=_block_name("ffn", owner))
        for owner in self.sharing_plan.ffn_owners]
    self.pooler = tf_keras.layers.Dense(config.hidden_size, activation="tanh",
                                        kernel_initializer=init(), name="pooler")
    self._build_all()

  def _build_all(self):
    """Creates every variable now, so checkpoints load before the first call."""
    self.embeddings.build(None)
    if self.embedding_projection is not None:
      self.embedding_projection.build([None, self.config.embedding_size])
    for block in self.attention_blocks + self.ffn_blocks:
      block.build(None)
    self.pooler.build([None, self.config.hidden_size])
    self.built = True

  def call(self, inputs, training=None, pooled_only=False):
    input_ids = inputs["input_ids"]
    input_mask = inputs.get("input_mask")
    segment_ids = inputs.get("segment_ids")
    if input_mask is None:
      input_mask = tf.ones_like(input_ids)
    if segment_ids is None:
      segment_ids = tf.zeros_like(input_ids)
    embedding_output = self.embeddings(input_ids, segment_ids, training=training)
    hidden = embedding_output
    if self.embedding_projection is not None:
      hidden = self.embedding_projection(hidden)
    mask_adder = attention_mask_adder(input_mask, hidden.dtype)
    encoder_outputs = []
    last = len(self.sharing_plan.schedule) - 1
    for i, (attention_index, ffn_index) in enumerate(self.sharing_plan.schedule):
      hidden = self.attention_blocks[attention_index](
          hidden, mask_adder, training=training, first_token_only=pooled_only and i == last)
      hidden = self.ffn_blocks[ffn_index](hidden, training=training)
      encoder_outputs.append(hidden)
    pooled_output = self.pooler(hidden[:, 0, :])
    return dict(sequence_output=hidden, pooled_output=pooled_output,
                encoder_outputs=encoder_outputs, embedding_output=embedding_output)

  def get_config(self):
    return {"config": self.config.to_dict(), "name": self.name}

  @classmethod
  def from_config(cls, config, custom_objects=None):
    return cls(AlbertConfig.from_dict(config["config"]), name=config.get("name", "encoder"))
