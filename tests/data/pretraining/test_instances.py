"""SOP pairs, n-gram masking statistics and the record serializer (synthetic ids, no files)."""

import random

import pytest
import tensorflow as tf

from albert_tf.data.pretraining import instances as pi
from albert_tf.data.pretraining import record_format as pretraining_format

SPECIALS = ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]


def _vocab(num_words=195, continuation_every=0):
  """Specials, then word pieces; every `continuation_every`-th piece continues a word."""
  pieces = list(SPECIALS)
  for i in range(num_words):
    cont = continuation_every and i % continuation_every == continuation_every - 1
    pieces.append(f"w{i}" if cont else f"\u2581w{i}")
  return pi.VocabInfo.from_pieces(pieces, 2, 3, 4, special_ids=(0, 1))


def _within(observed, expected, n, sigmas=4.5):
  return abs(observed - expected) <= sigmas * (expected * (1 - expected) / n) ** 0.5 + 1e-9


def _chi_square(counts, probs):
  total = sum(counts.values())
  return sum((counts.get(n, 0) - total * p) ** 2 / (total * p) for n, p in probs.items())


def _random_sequence(rng, vocab, length_a=250, length_b=250):
  words = range(5, vocab.vocab_size)
  ids = [2] + [rng.choice(words) for _ in range(length_a)] + [3]
  ids += [rng.choice(words) for _ in range(length_b)] + [3]
  return ids, (0, length_a + 1, len(ids) - 1)


def test_masking_fraction_and_80_10_10():
  vocab = _vocab()
  options = pi.InstanceOptions(max_seq_length=512, max_predictions_per_seq=80, ngram=3,
                               do_whole_word_mask=False)
  rng = random.Random(0)
  stats = pi.InstanceStats()
  n_mask = n_keep = n_random = 0
  total_masked = total_tokens = 0
  for _ in range(300):
    ids, special = _random_sequence(rng, vocab)
    out, positions, labels, boundary = pi.create_masked_lm_predictions(
        ids, special, options, vocab, rng, stats)
    assert len(positions) == round(len(ids) * 0.15)  # 75 <= max_predictions_per_seq
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    assert not set(positions) & set(special)
    assert labels == [ids[p] for p in positions]
    assert boundary == [1] * len(ids)  # every piece starts a word; specials are boundaries
    unmasked = set(range(len(ids))) - set(positions)
    assert all(out[i] == ids[i] for i in unmasked)
    for p in positions:
      if out[p] == 4:
        n_mask += 1
      elif out[p] == ids[p]:
        n_keep += 1
      else:
        n_random += 1
        assert out[p] in vocab.random_ids and out[p] >= 5  # never a special token
    total_masked += len(positions)
    total_tokens += len(ids)
  n = total_masked
  assert _within(n_mask / n, 0.8, n)
  # "unchanged" also gets the random draws that happen to hit the original id (1/195 of 10%).
  assert _within(n_keep / n, 0.1 + 0.1 / 195, n)
  assert _within(n_random / n, 0.1 - 0.1 / 195, n)
  assert stats.mask_token + stats.kept_token + stats.random_token == n == stats.masked
  assert abs(total_masked / total_tokens - 0.15) < 0.002


@pytest.mark.parametrize("favor_shorter", [True, False])
def test_ngram_length_distribution_is_one_over_n(favor_shorter):
  vocab = _vocab()
  options = pi.InstanceOptions(max_seq_length=512, max_predictions_per_seq=80, ngram=3,
                               do_whole_word_mask=False, favor_shorter_ngram=favor_shorter)
  rng = random.Random(1)
  stats = pi.InstanceStats()
  for _ in range(250):
    ids, special = _random_sequence(rng, vocab)
    pi.create_masked_lm_predictions(ids, special, options, vocab, rng, stats)
  weights = {1: 1.0, 2: 1 / 2, 3: 1 / 3}
  if not favor_shorter:
    weights = {1: 1 / 3, 2: 1 / 2, 3: 1.0}
  z = sum(weights.values())
  probs = {n: w / z for n, w in weights.items()}
  assert sum(stats.ngram_drawn.values()) > 5000
  # Chi-square with 2 degrees of freedom: 13.8 is the 0.1% critical value.
  assert _chi_square(stats.ngram_drawn, probs) < 13.8
  # A wrong distribution (uniform) is clearly rejected at this sample size.
  assert _chi_square(stats.ngram_drawn, {1: 1 / 3, 2: 1 / 3, 3: 1 / 3}) > 100


def test_ngrams_are_contiguous_whole_words():
  vocab = _vocab(continuation_every=3)  # words of 1-3 pieces
  options = pi.InstanceOptions(max_seq_length=512, max_predictions_per_seq=40, ngram=3,
                               do_whole_word_mask=True)
  rng = random.Random(2)
  stats = pi.InstanceStats()
  for _ in range(100):
    ids, special = _random_sequence(rng, vocab, 120, 120)
    out, positions, _, boundary = pi.create_masked_lm_predictions(ids, special, options, vocab,
                                                                  rng, stats)
    assert len(positions) <= round(len(ids) * 0.15)
    masked = set(positions)
    for i in range(len(ids)):
      if i in special:
        assert boundary[i] == 1
        continue
      assert boundary[i] == int(vocab.is_start[ids[i]])
      # A masked continuation piece means its word start (previous non-special piece) is masked,
      # and a masked piece's continuation is masked too: whole words only.
      previous = [j for j in range(i) if j not in special]
      if i in masked and not boundary[i] and previous:  # (position 1 may continue nothing)
        assert previous[-1] in masked
      if i in masked and i + 1 < len(ids) and i + 1 not in special and not boundary[i + 1]:
        assert i + 1 in masked
  assert set(stats.ngram_masked) == {1, 2, 3}


def test_max_predictions_cap_and_zero_prob():
  vocab = _vocab()
  rng = random.Random(3)
  ids, special = _random_sequence(rng, vocab, 200, 200)
  capped = pi.InstanceOptions(max_predictions_per_seq=7)
  _, positions, _, _ = pi.create_masked_lm_predictions(ids, special, capped, vocab, rng)
  assert len(positions) == 7
  none = pi.InstanceOptions(masked_lm_prob=0.0)
  out, positions, labels, _ = pi.create_masked_lm_predictions(ids, special, none, vocab, rng)
  assert out == ids and positions == [] and labels == []


def test_permutation_permutes_extra_positions():
  vocab = _vocab(num_words=600)
  rng = random.Random(4)
  options = pi.InstanceOptions(max_predictions_per_seq=40, do_permutation=True,
                               do_whole_word_mask=False)
  stats = pi.InstanceStats()
  ids = [2] + list(range(5, 105)) + [3] + list(range(200, 300)) + [3]  # all ids distinct
  special = (0, 101, 202)
  out, positions, labels, _ = pi.create_masked_lm_predictions(ids, special, options, vocab, rng,
                                                              stats)
  assert stats.permuted > 0 and len(positions) == stats.masked + stats.permuted <= 40
  assert len(set(positions)) == len(positions) and labels == [ids[p] for p in positions]
  assert all(out[i] == ids[i] for i in range(len(ids)) if i not in set(positions))
  # Permuted positions hold another predicted position's original id.
  predicted_ids = {ids[p] for p in positions}
  moved = [p for p in positions if out[p] != ids[p] and out[p] in predicted_ids]
  assert len(moved) >= stats.permuted // 2


def _ascending_documents(rng, num_docs=60):
  """Documents whose ids increase through the text, so order is visible in the ids."""
  documents, owner = [], {}
  next_id = 5
  for d in range(num_docs):
    doc = []
    for _ in range(rng.randint(2, 7)):
      length = rng.randint(2, 25)
      doc.append(list(range(next_id, next_id + length)))
      for i in range(next_id, next_id + length):
        owner[i] = d
      next_id += length
    documents.append(doc)
  return documents, owner, next_id


def _segments(instance):
  ids = instance.input_ids
  first_sep = ids.index(3)
  return ids[1:first_sep], ids[first_sep + 1:-1]


def test_sop_pairs_are_swapped_with_label_one():
  rng = random.Random(5)
  documents, owner, vocab_size = _ascending_documents(rng)
  vocab = pi.VocabInfo.from_pieces(SPECIALS + [f"\u2581{i}" for i in range(5, vocab_size)],
                                   2, 3, 4, special_ids=(0, 1))
  options = pi.InstanceOptions(max_seq_length=48, masked_lm_prob=0.0, short_seq_prob=0.1)
  stats = pi.InstanceStats()
  instances = []
  for _ in range(10):
    instances += pi.create_sop_instances(documents, options, vocab, rng, stats)
  assert len(instances) == stats.instances > 300
  swapped = 0
  for inst in instances:
    a, b = _segments(inst)
    assert a and b and len(inst.input_ids) <= 48
    assert inst.input_ids[0] == 2 and inst.input_ids[-1] == 3
    assert inst.segment_ids == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    assert len({owner[i] for i in a + b}) == 1  # both segments from one document
    if inst.next_sentence_label == 1:
      assert min(a) > max(b)  # swapped: the first segment is the later text (B A)
      swapped += 1
    else:
      assert max(a) < min(b)  # in order: A then B
  assert stats.swapped == swapped
  assert _within(swapped / len(instances), 0.5, len(instances))


def test_nsp_mode_takes_random_documents():
  rng = random.Random(6)
  documents, owner, vocab_size = _ascending_documents(rng)
  vocab = pi.VocabInfo.from_pieces(SPECIALS + [f"\u2581{i}" for i in range(5, vocab_size)],
                                   2, 3, 4, special_ids=(0, 1))
  options = pi.InstanceOptions(max_seq_length=48, masked_lm_prob=0.0, random_next_sentence=True)
  instances = []
  for _ in range(10):
    instances += pi.create_sop_instances(documents, options, vocab, rng)
  labels = [inst.next_sentence_label for inst in instances]
  for inst in instances:
    a, b = _segments(inst)
    if inst.next_sentence_label == 1:
      assert owner[a[0]] != owner[b[0]]  # B from another document
    else:
      assert owner[a[0]] == owner[b[0]] and max(a) < min(b)
  assert 0.3 < sum(labels) / len(labels) < 0.7


def test_single_sentence_chunks_are_split_and_short_documents_skipped():
  vocab = _vocab()
  options = pi.InstanceOptions(max_seq_length=16, masked_lm_prob=0.0, short_seq_prob=0.0)
  rng = random.Random(7)
  long_sentence = list(range(5, 45))  # longer than the 13-token budget: a chunk on its own
  documents = [[long_sentence, list(range(50, 60))], [[61, 62, 63]], [[64]]]
  stats = pi.InstanceStats()
  instances = pi.create_sop_instances(documents, options, vocab, rng, stats)
  assert stats.short_documents == 2 and stats.split_segments >= 1
  for inst in instances:
    a, b = _segments(inst)
    assert len(inst.input_ids) <= 16
    assert (min(a) > max(b)) == bool(inst.next_sentence_label)


def test_truncate_seq_pair():
  rng = random.Random(8)
  for _ in range(50):
    a = list(range(rng.randint(1, 30)))
    b = list(range(100, 100 + rng.randint(1, 30)))
    ta, tb = list(a), list(b)
    pi.truncate_seq_pair(ta, tb, 20, rng)
    assert len(ta) + len(tb) <= 20 or (ta == a and tb == b)
    assert ta and tb
    # Truncation removes from the ends only: what is left is a contiguous slice.
    assert ta == a[a.index(ta[0]):a.index(ta[0]) + len(ta)]


def test_serializer_matches_official_feature_spec():
  inst = pi.TrainingInstance(input_ids=[2, 17, 4, 300, 3, 9, 3], segment_ids=[0, 0, 0, 0, 0, 1, 1],
                             token_boundary=[1, 1, 0, 1, 1, 1, 1], masked_lm_positions=[2, 5],
                             masked_lm_ids=[21, 9], next_sentence_label=1)
  serializer = pi.ExampleSerializer(max_seq_length=10, max_predictions_per_seq=4, vocab_size=400)
  record = serializer.serialize(inst)
  parsed = tf.io.parse_single_example(record, pretraining_format.name_to_features(10, 4))
  values = {k: v.numpy().tolist() for k, v in parsed.items()}
  assert values == {
      "input_ids": [2, 17, 4, 300, 3, 9, 3, 0, 0, 0],
      "input_mask": [1] * 7 + [0] * 3,
      "segment_ids": [0, 0, 0, 0, 0, 1, 1, 0, 0, 0],
      "token_boundary": [1, 1, 0, 1, 1, 1, 1, 0, 0, 0],
      "masked_lm_positions": [2, 5, 0, 0],
      "masked_lm_ids": [21, 9, 0, 0],
      "masked_lm_weights": [1.0, 1.0, 0.0, 0.0],
      "next_sentence_labels": [1],
  }
  # Byte-level agreement with TensorFlow's own Example proto (map order independent).
  def int_feature(v):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=v))
  expected = tf.train.Example(features=tf.train.Features(feature={
      k: (tf.train.Feature(float_list=tf.train.FloatList(value=v)) if k == "masked_lm_weights"
          else int_feature(v)) for k, v in values.items()}))
  assert tf.train.Example.FromString(record) == expected
  with pytest.raises(ValueError, match="max_seq_length"):
    pi.ExampleSerializer(4, 4, 400).serialize(inst)
