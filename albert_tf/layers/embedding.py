"""Factorized ALBERT embeddings: word, position and token-type tables at width E."""

import tensorflow as tf
import tf_keras

from albert_tf.layers import initializers


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertEmbeddings(tf_keras.layers.Layer):
  """Sums word, position and token-type embeddings at size E, then LayerNorm and dropout.

  The projection to the hidden size (`embedding_hidden_mapping_in`) lives in the encoder, as in
  the official variable layout (`bert/encoder/embedding_hidden_mapping_in`).

  Call args:
    input_ids: int [batch, seq_len].
    segment_ids: int [batch, seq_len] token types.
  Returns:
    [batch, seq_len, embedding_size] in the compute dtype.
  """

  def __init__(self, vocab_size, embedding_size, max_position_embeddings, type_vocab_size,
               dropout_rate=0.0, initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.embedding_size = embedding_size
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    self.layer_norm = initializers.layer_norm("LayerNorm")
    self.dropout = tf_keras.layers.Dropout(dropout_rate)

  def build(self, input_shape=None):
    # A fresh initializer per table: tf_keras repeats an unseeded instance's values.
    init = lambda: initializers.truncated_normal(self.initializer_range)
    self.word_embeddings = self.add_weight(
        "word_embeddings", shape=[self.vocab_size, self.embedding_size], initializer=init())
    self.position_embeddings = self.add_weight(
        "position_embeddings", shape=[self.max_position_embeddings, self.embedding_size],
        initializer=init())
    self.token_type_embeddings = self.add_weight(
        "token_type_embeddings", shape=[self.type_vocab_size, self.embedding_size],
        initializer=init())
    self.layer_norm.build([None, None, self.embedding_size])
    super().build(input_shape)

  def call(self, input_ids, segment_ids, training=None):
    seq_len = tf.shape(input_ids)[1]
    words = tf.gather(self.word_embeddings, input_ids)
    # One-hot matmul over 2 token types is what the official code does on TPU; a gather gives
    # identical values and is cheaper on CPU/GPU.
    types = tf.gather(self.token_type_embeddings, segment_ids)
    positions = self.position_embeddings[:seq_len][tf.newaxis]
    embeddings = words + types + positions
    embeddings = self.layer_norm(embeddings)
    return self.dropout(embeddings, training=training)

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                  max_position_embeddings=self.max_position_embeddings,
                  type_vocab_size=self.type_vocab_size, dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range)
    return config
