"""The official pretraining TFRecord format (written by create_pretraining_data.py, read by
run_pretraining.py). Files from the official tool and from ours are interchangeable."""

import tensorflow as tf

from albert_tf.data.record_checks import FeatureRule

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


def feature_rules(max_seq_length, max_predictions_per_seq, vocab_size=None,
                  type_vocab_size=None, config_source=None):
  """What every record must hold (`albert_tf.data.record_checks.FeatureRule` per feature).

  Ids beyond the model's vocabulary would fail in an embedding lookup on CPU and be looked up
  as zeros on GPU; positions beyond the sequence would gather the wrong vectors. vocab_size /
  type_vocab_size None: those ids are not bounded. config_source: the config file the sizes
  come from, named in the errors (e.g. records made with another vocabulary).
  """
  seq, preds = (max_seq_length,), (max_predictions_per_seq,)
  config = config_source or "the model config"
  vocab = dict(low=0, high=vocab_size,
               bound=f"vocab_size {vocab_size} of {config}" if vocab_size else "")
  seq_flag, preds_flag = "--max_seq_length", "--max_predictions_per_seq"
  return [
      FeatureRule("input_ids", seq, length_from=seq_flag, **vocab),
      FeatureRule("input_mask", seq, low=0, high=2, length_from=seq_flag),
      FeatureRule("segment_ids", seq, low=0, high=type_vocab_size, length_from=seq_flag,
                  bound=(f"type_vocab_size {type_vocab_size} of {config}"
                         if type_vocab_size else "")),
      FeatureRule("token_boundary", seq, low=0, high=2, length_from=seq_flag),
      FeatureRule("masked_lm_positions", preds, low=0, high=max_seq_length,
                  bound=f"{seq_flag}={max_seq_length}", length_from=preds_flag),
      FeatureRule("masked_lm_ids", preds, length_from=preds_flag, **vocab),
      FeatureRule("masked_lm_weights", preds, tf.float32, finite=True, length_from=preds_flag),
      FeatureRule(LABEL_FEATURE, (1,), low=0, high=2, bound="sentence order: 0 or 1"),
  ]
