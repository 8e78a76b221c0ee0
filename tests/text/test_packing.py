"""Packing rules: the official pair truncation loop and its closed form."""

import numpy as np
import tensorflow as tf

from albert_tf.text import packing


def _official_truncate(a, b, max_length):
  a, b = list(a), list(b)
  while len(a) + len(b) > max_length:
    (a if len(a) > len(b) else b).pop()
  return a, b


def test_truncate_seq_pair_matches_official_loop():
  rng = np.random.default_rng(1)
  for _ in range(200):
    la, lb, budget = rng.integers(0, 12), rng.integers(0, 12), rng.integers(1, 15)
    a, b = list(range(la)), list(range(100, 100 + lb))
    expected = _official_truncate(a, b, budget)
    packing.truncate_seq_pair(a, b, budget)
    assert (a, b) == expected


def test_truncation_closed_form_matches_loop():
  for la in range(0, 25):
    for lb in range(0, 25):
      for m in (1, 5, 10, 17):
        a, b = la, lb
        while a + b > m:
          if a > b:
            a -= 1
          else:
            b -= 1
        new_a, new_b = packing.classifier_truncation_lengths(
            tf.constant(la), tf.constant(lb), tf.constant(m))
        assert (int(new_a), int(new_b)) == (a, b), (la, lb, m)
