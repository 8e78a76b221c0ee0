"""Online masking (run_pretraining --masked_lm_budget): new n-gram masks at every read.

The official flag: "If >0, the ratio of masked ngrams to unmasked ngrams" — the records'
`token_boundary` (1 where a word starts) lets the masks be drawn anew each time an instance is
read instead of once by create_pretraining_data. The records hold the offline-masked input_ids;
the original ids come back by writing masked_lm_ids at masked_lm_positions, then words are
masked with the same n-gram rule as create_pretraining_data (whole words, n <= 3, p(n) ∝ 1/n,
80 % [MASK] / 10 % random / 10 % unchanged), masking budget / (1 + budget) of the tokens, at most
max_predictions_per_seq.
(The official release parses token_boundary for this flag but its model_fn then still reads the
offline masked_lm_* features, so it never ran; this is the behaviour its help text describes.)
"""

import random

import numpy as np
import tensorflow as tf

from albert_tf.data.pretraining import instances

# The SentencePiece conventions of the released models (pad 0, unk 1, [CLS] 2, [SEP] 3, [MASK] 4).
CLS_ID, SEP_ID, MASK_ID, FIRST_ORDINARY_ID = 2, 3, 4, 5


def remask_batch(features, budget, max_predictions_per_seq, vocab_size, seed):
  """Numpy: re-masks one batch of decoded records. Returns the new masked-LM features.

  features: dict of numpy arrays [batch, ...] (input_ids, input_mask, token_boundary,
    masked_lm_positions, masked_lm_ids, masked_lm_weights).
  seed: int seeding this batch's draws.
  Returns:
    (input_ids, masked_lm_positions, masked_lm_ids) int32, masked_lm_weights float32.
  """
  rng = random.Random(int(seed))
  options = instances.InstanceOptions(
      max_predictions_per_seq=max_predictions_per_seq, masked_lm_prob=budget / (1.0 + budget))
  vocab = instances.VocabInfo(
      vocab_size=vocab_size, cls_id=CLS_ID, sep_id=SEP_ID, mask_id=MASK_ID, is_start=(),
      random_ids=tuple(range(FIRST_ORDINARY_ID, vocab_size)))
  batch, seq_len = features["input_ids"].shape
  out_ids = np.zeros([batch, seq_len], np.int32)
  positions = np.zeros([batch, max_predictions_per_seq], np.int32)
  labels = np.zeros([batch, max_predictions_per_seq], np.int32)
  weights = np.zeros([batch, max_predictions_per_seq], np.float32)
  for row in range(batch):
    ids = features["input_ids"][row].astype(np.int64).copy()
    real = features["masked_lm_weights"][row] > 0
    ids[features["masked_lm_positions"][row][real]] = features["masked_lm_ids"][row][real]
    length = int(features["input_mask"][row].sum())
    ids = ids[:length].tolist()
    special = [i for i, t in enumerate(ids) if t in (CLS_ID, SEP_ID)]
    masked_ids, pos, lab, _ = instances.mask_words(
        ids, features["token_boundary"][row][:length].tolist(), special, options, vocab, rng)
    out_ids[row, :length] = masked_ids
    positions[row, :len(pos)] = pos
    labels[row, :len(lab)] = lab
    weights[row, :len(pos)] = 1.0
  return out_ids, positions, labels, weights


def apply_online_masking(dataset, budget, max_predictions_per_seq, vocab_size, seed=None):
  """Maps a dataset of decoded record batches to freshly masked ones.

  Each batch's draws are seeded by (seed, batch index), so with a seed the masks are the same on
  every rerun and after a resume (the batch index is part of the saved input position).
  """
  base = random.Random().getrandbits(31) if seed is None else int(seed)

  def remask(index, features):
    outputs = tf.numpy_function(
        lambda *args: remask_batch(
            dict(zip(_KEYS, args[:-1])), budget, max_predictions_per_seq, vocab_size,
            base * 1_000_003 + int(args[-1])),
        [features[k] for k in _KEYS] + [index],
        [tf.int32, tf.int32, tf.int32, tf.float32], stateful=False)
    features = dict(features)
    for key, value in zip(("input_ids", "masked_lm_positions", "masked_lm_ids",
                           "masked_lm_weights"), outputs):
      value.set_shape(features[key].shape)
      features[key] = value
    return features

  return dataset.enumerate().map(remask, num_parallel_calls=tf.data.AUTOTUNE,
                                 deterministic=True)


_KEYS = ("input_ids", "input_mask", "token_boundary", "masked_lm_positions", "masked_lm_ids",
         "masked_lm_weights")
