"""The word -> pieces alignment and the windows: the label on a word's first piece only, every
word labelled in exactly one window (the one with the most context), a too-long word refused."""

import numpy as np
import pytest

from albert_tf.data import token_alignment
from albert_tf.data.token_alignment import IGNORE
from albert_tf.errors import AlbertError
from albert_tf.text.tokenization import FullTokenizer
from tests.helpers.text import make_tiny_spm_model


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
  return FullTokenizer(spm_model_file=make_tiny_spm_model(tmp_path_factory.mktemp("spm")))


def test_label_on_the_first_piece_only(tokenizer):
  words = ["Albert", "shares", "parameters", "jalapeño"]
  pieces = token_alignment.word_pieces(tokenizer, words)
  assert all(p[0].startswith("\u2581") for p in pieces)
  assert any(len(p) > 1 for p in pieces)  # the test needs a word of several pieces
  (feature,) = token_alignment.encode_windows(tokenizer, pieces, [1, 0, 2, 3], 64, 16)
  expected_labels, expected_words = [IGNORE], [-1]
  for i, word_pieces in enumerate(pieces):
    expected_labels += [[1, 0, 2, 3][i]] + [IGNORE] * (len(word_pieces) - 1)
    expected_words += [i] + [-1] * (len(word_pieces) - 1)
  n = len(expected_labels) + 1  # [SEP]
  assert feature["label_ids"].tolist() == expected_labels + [IGNORE] * (64 - n + 1)
  assert feature["word_ids"].tolist() == expected_words + [-1] * (64 - n + 1)
  ids = feature["input_ids"].tolist()
  assert ids[0] == tokenizer.cls_id and ids[n - 1] == tokenizer.sep_id
  assert ids[1:n - 1] == tokenizer.convert_tokens_to_ids([p for w in pieces for p in w])
  assert feature["input_mask"].tolist() == [1] * n + [0] * (64 - n)


def test_a_word_without_pieces_becomes_unk(tokenizer):
  assert tokenizer.tokenize("\u200b") == []  # a zero-width space alone gives no piece
  assert token_alignment.word_pieces(tokenizer, ["\u200b"]) == [["<unk>"]]


def test_windows_cover_every_word_once_with_most_context():
  counts = [1, 2, 1, 1, 3, 1, 1, 2, 1, 1, 1, 2]  # 17 pieces
  windows = token_alignment.plan_windows(counts, max_seq_length=10, doc_stride=3)
  starts = np.concatenate([[0], np.cumsum(counts)])
  assert len(windows) > 1
  for window in windows:
    assert starts[window.end] - starts[window.start] <= 8
  owned = sorted(i for window in windows for i in window.owned)
  assert owned == list(range(len(counts)))
  for window in windows:
    for i in window.owned:
      assert window.start <= i < window.end
      mine = min(starts[i] - starts[window.start], starts[window.end] - starts[i + 1])
      for other in windows:
        if other.start <= i < other.end:
          assert mine >= min(starts[i] - starts[other.start], starts[other.end] - starts[i + 1])


def test_windows_move_at_least_one_word_and_a_short_sentence_is_one_window():
  assert [(w.start, w.end) for w in token_alignment.plan_windows([6, 6, 6], 8, 1)] == [
      (0, 1), (1, 2), (2, 3)]
  (window,) = token_alignment.plan_windows([1, 1, 1], 8, 1)
  assert (window.start, window.end, window.owned) == (0, 3, [0, 1, 2])


def test_a_word_longer_than_any_window(tokenizer):
  with pytest.raises(AlbertError, match=r"train.txt: line 7: a word of 9 pieces is longer than a "
                                        r"window \(--max_seq_length=8 holds 6\)"):
    token_alignment.plan_windows([1, 9], 8, 2, where=lambda i: f"train.txt: line {6 + i}")


def test_predictions_back_to_words_from_overlapping_windows(tokenizer):
  words = "The quick brown fox jumps over the lazy dog again and again".split()
  pieces = token_alignment.word_pieces(tokenizer, words)
  tags = list(range(len(words)))
  features = token_alignment.encode_windows(tokenizer, pieces, tags, 10, 3)
  assert len(features) > 2
  # Predicting the gold label at every position gives every word its own tag back.
  back = token_alignment.words_from_windows(
      len(words), [f["word_ids"] for f in features], [f["label_ids"] for f in features])
  assert back == tags
  # Each word is labelled once over all windows.
  labelled = sum(int((f["label_ids"] != IGNORE).sum()) for f in features)
  assert labelled == len(words)
