"""SQuAD answer heads: the v1.1 span head and the official ALBERT v2.0 head.

Both read the encoder's sequence output [batch, seq_len, hidden] and return float32 tensors
(logits are cast to float32 before any -1e30 masking, so mixed precision cannot overflow).
"""

import tensorflow as tf
import tf_keras

from albert_tf.layers import initializers

# What the official code subtracts from logits at positions that cannot start/end an answer.
_MASK_VALUE = 1e30


def mask_logits(logits, p_mask):
  """The official masking: logits * (1 - p_mask) - 1e30 * p_mask (float32).

  Args:
    logits: float32 [..., seq_len].
    p_mask: [..., seq_len] (broadcastable); 1 where the position cannot be part of an answer.
  """
  p_mask = tf.cast(p_mask, tf.float32)
  return logits * (1.0 - p_mask) - _MASK_VALUE * p_mask


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class SquadSpanHead(tf_keras.layers.Layer):
  """SQuAD v1.1 head: one linear map from each token to a start and an end logit.

  Variables mirror the official `cls/squad/output_weights` [2, hidden] (used transposed) and
  `cls/squad/output_bias` [2]. As in the official v1 model, nothing is masked here; invalid spans
  are dropped in post-processing.

  Call args:
    sequence_output: [batch, seq_len, hidden].
  Returns:
    dict with start_logits and end_logits, float32 [batch, seq_len].
  """

  def __init__(self, initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.initializer_range = initializer_range

  def build(self, input_shape):
    hidden_size = int(input_shape[-1])
    self.output_weights = self.add_weight(
        "output_weights", shape=[2, hidden_size],
        initializer=initializers.truncated_normal(self.initializer_range))
    self.output_bias = self.add_weight("output_bias", shape=[2], initializer="zeros")
    super().build(input_shape)

  def call(self, sequence_output):
    weights = tf.cast(self.output_weights, sequence_output.dtype)
    bias = tf.cast(self.output_bias, sequence_output.dtype)
    logits = tf.einsum("bsh,nh->bsn", sequence_output, weights) + bias
    logits = tf.cast(logits, tf.float32)
    return {"start_logits": logits[:, :, 0], "end_logits": logits[:, :, 1]}

  def get_config(self):
    config = super().get_config()
    config.update({"initializer_range": self.initializer_range})
    return config


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class SquadV2Head(tf_keras.layers.Layer):
  """The official ALBERT SQuAD v2.0 head (start, start-conditioned end, answerability).

  * start logits: dense(1) on the sequence output, masked by p_mask.
  * end logits: concat(sequence output, start feature) -> dense(H, tanh) -> LayerNorm -> dense(1),
    masked by p_mask. With `start_positions` (training) the start feature is the gold start's
    hidden state; without, the top `start_n_top` starts are each expanded to their top
    `end_n_top` ends (the official beam).
  * cls logit (answerability, > 0 means "no answer"): concat(start-probability-weighted sequence
    feature, first-token feature) -> dense(H, tanh) -> dropout -> dense(1, no bias).

  Sublayer names follow the official variable scopes (start_logits/dense,
  end_logits/{dense_0,LayerNorm,dense_1}, answer_class/{dense_0,dense_1}).

  Call args:
    sequence_output: [batch, seq_len, hidden].
    p_mask: int or float [batch, seq_len], 1 at positions that cannot be in an answer.
    start_positions: optional int32 [batch] gold starts; selects the training path.
    training: enables the answerability dropout.
  Returns (all float32 except the int32 indices):
    with start_positions: start_log_probs, end_log_probs [batch, seq_len], cls_logits [batch].
    without: start_top_log_probs, start_top_index [batch, start_n_top];
      end_top_log_probs, end_top_index [batch, start_n_top * end_n_top] (row-major: start i,
      end j at i * end_n_top + j); cls_logits [batch].
  """

  def __init__(self, hidden_size, start_n_top=5, end_n_top=5, dropout_rate=0.1,
               initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.start_n_top = start_n_top
    self.end_n_top = end_n_top
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range

    def dense(units, name, activation=None, use_bias=True):
      return tf_keras.layers.Dense(
          units, activation=activation, use_bias=use_bias, name=name,
          kernel_initializer=initializers.truncated_normal(initializer_range))

    self.start_dense = dense(1, "start_logits/dense")
    self.end_dense_0 = dense(hidden_size, "end_logits/dense_0", activation="tanh")
    self.end_layer_norm = initializers.layer_norm("end_logits/LayerNorm")
    self.end_dense_1 = dense(1, "end_logits/dense_1")
    self.answer_dense_0 = dense(hidden_size, "answer_class/dense_0", activation="tanh")
    self.answer_dropout = tf_keras.layers.Dropout(dropout_rate)
    self.answer_dense_1 = dense(1, "answer_class/dense_1", use_bias=False)

  def build(self, input_shape):
    hidden = int(input_shape[-1])
    for layer, width in ((self.start_dense, hidden), (self.end_dense_0, 2 * hidden),
                         (self.end_layer_norm, self.hidden_size),
                         (self.end_dense_1, self.hidden_size),
                         (self.answer_dense_0, 2 * hidden),
                         (self.answer_dense_1, self.hidden_size)):
      with tf.name_scope(layer.name):
        layer.build([None, width])
    super().build(input_shape)

  def _end_logits(self, sequence_output, start_features):
    """[batch, seq_len(, k), hidden] and same-shaped start features -> [batch, seq_len(, k)]."""
    hidden = self.end_dense_0(tf.concat([sequence_output, start_features], axis=-1))
    # LayerNorm over the last axis, applied to rows so that one built layer serves both ranks.
    leading_shape = tf.shape(hidden)[:-1]
    hidden = self.end_layer_norm(tf.reshape(hidden, [-1, self.hidden_size]))
    logits = tf.reshape(self.end_dense_1(hidden), leading_shape)
    return tf.cast(logits, tf.float32)

  def call(self, sequence_output, p_mask, start_positions=None, training=None):
    p_mask = tf.cast(p_mask, tf.float32)
    start_logits = tf.cast(tf.squeeze(self.start_dense(sequence_output), -1), tf.float32)
    start_logits_masked = mask_logits(start_logits, p_mask)
    start_log_probs = tf.nn.log_softmax(start_logits_masked, axis=-1)
    outputs = {}

    if start_positions is not None:
      # Training: condition the end on the gold start's hidden state, tiled over the sequence.
      start_positions = tf.reshape(tf.cast(start_positions, tf.int32), [-1])
      start_feature = tf.gather(sequence_output, start_positions, batch_dims=1)  # [B, H]
      start_features = tf.broadcast_to(start_feature[:, None, :], tf.shape(sequence_output))
      end_logits = self._end_logits(sequence_output, start_features)
      outputs["start_log_probs"] = start_log_probs
      outputs["end_log_probs"] = tf.nn.log_softmax(mask_logits(end_logits, p_mask), axis=-1)
    else:
      # Prediction: expand each of the top start_n_top starts to its top end_n_top ends.
      start_top_log_probs, start_top_index = tf.nn.top_k(start_log_probs, k=self.start_n_top)
      start_features = tf.gather(sequence_output, start_top_index, batch_dims=1)  # [B, k, H]
      shape = tf.shape(sequence_output)
      expanded_shape = [shape[0], shape[1], self.start_n_top, shape[2]]
      end_input = tf.broadcast_to(sequence_output[:, :, None, :], expanded_shape)
      start_features = tf.broadcast_to(start_features[:, None, :, :], expanded_shape)
      end_logits = self._end_logits(end_input, start_features)  # [B, S, k]
      end_logits = tf.transpose(end_logits, [0, 2, 1])  # [B, k, S]
      end_log_probs = tf.nn.log_softmax(mask_logits(end_logits, p_mask[:, None, :]), axis=-1)
      end_top_log_probs, end_top_index = tf.nn.top_k(end_log_probs, k=self.end_n_top)
      num_candidates = self.start_n_top * self.end_n_top
      outputs["start_top_log_probs"] = start_top_log_probs
      outputs["start_top_index"] = start_top_index
      outputs["end_top_log_probs"] = tf.reshape(end_top_log_probs, [-1, num_candidates])
      outputs["end_top_index"] = tf.reshape(end_top_index, [-1, num_candidates])

    # Answerability from the expected start feature and the first ([CLS]) token; it does not
    # depend on the end, so every feature gets one cls logit.
    start_probs = tf.nn.softmax(start_logits_masked, axis=-1)
    start_feature = tf.einsum("bsh,bs->bh", sequence_output,
                              tf.cast(start_probs, sequence_output.dtype))
    cls_feature = sequence_output[:, 0, :]
    answer = self.answer_dense_0(tf.concat([start_feature, cls_feature], axis=-1))
    answer = self.answer_dropout(answer, training=training)
    outputs["cls_logits"] = tf.cast(tf.squeeze(self.answer_dense_1(answer), -1), tf.float32)
    return outputs

  def get_config(self):
    config = super().get_config()
    config.update({
        "hidden_size": self.hidden_size,
        "start_n_top": self.start_n_top,
        "end_n_top": self.end_n_top,
        "dropout_rate": self.dropout_rate,
        "initializer_range": self.initializer_range,
    })
    return config
