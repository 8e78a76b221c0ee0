"""The official pretraining TFRecord format (written by create_pretraining_data.py, read by
run_pretraining.py). Files from the official tool and from ours are interchangeable."""

import tensorflow as tf

INT_FEATURES_SEQ = ("input_ids", "input_mask", "segment_ids", "token_boundary")
INT_FEATURES_PRED = ("masked_lm_positions", "masked_lm_ids")
FLOAT_FEATURES_PRED = ("masked_lm_weights",)
LABEL_FEATURE = "next_sentence_labels"  # [1]; for SOP 1 = the two segments are swapped


def name_to_features(max_seq_length, max_predictions_per_seq):
  """The official parsing spec: {feature name: tf.io.FixedLenFeature}."""
  spec = {}
  for name in INT_FEATURES_SEQ:
    spec[name] = tf.io.FixedLenFeature([max_seq_length], tf.int64)
  for name in INT_FEATURES_PRED:
    spec[name] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
  for name in FLOAT_FEATURES_PRED:
    spec[name] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32)
  spec[LABEL_FEATURE] = tf.io.FixedLenFeature([1], tf.int64)
  return spec
