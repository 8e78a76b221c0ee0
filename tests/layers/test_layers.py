"""get_config round trips of the encoder's layers and the pretraining heads' layers."""

from albert_tf.heads import MaskedLMHead, SentenceOrderHead
from albert_tf.layers import AlbertAttentionBlock, AlbertEmbeddings, AlbertFeedForwardBlock


def _roundtrip(layer):
  return type(layer).from_config(layer.get_config())


def test_layer_configs_round_trip():
  layers = [
      AlbertEmbeddings(vocab_size=50, embedding_size=8, max_position_embeddings=16,
                       type_vocab_size=2, dropout_rate=0.1, initializer_range=0.03),
      AlbertAttentionBlock(hidden_size=16, num_attention_heads=4,
                           attention_probs_dropout_prob=0.1, hidden_dropout_prob=0.2),
      AlbertFeedForwardBlock(hidden_size=16, intermediate_size=32, hidden_act="relu"),
      MaskedLMHead(vocab_size=50, embedding_size=8, hidden_size=16),
      SentenceOrderHead(hidden_size=16),
  ]
  for layer in layers:
    clone = _roundtrip(layer)
    assert type(clone) is type(layer)
    assert clone.get_config() == layer.get_config()
