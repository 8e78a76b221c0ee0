"""Keras layers that make up ALBERT."""

from albert_tf.layers.activations import gelu, get_activation
from albert_tf.layers.attention import AlbertAttentionBlock, attention_mask_adder
from albert_tf.layers.embedding import AlbertEmbeddings
from albert_tf.layers.feedforward import AlbertFeedForwardBlock
