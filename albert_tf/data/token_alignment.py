"""Words -> SentencePiece pieces -> windows of encoder inputs, and predictions back to words.

The one alignment training, evaluation, prediction and export share:
  * each word is tokenized on its own (`tokenizer.tokenize(word)`, so it starts with the "▁"
    word marker as in running text); a word that gives no piece (only characters the
    normalisation drops) becomes one <unk> piece, so every word has a first piece;
  * a word's label sits on its FIRST piece; the other pieces, [CLS], [SEP] and padding get
    IGNORE (-100, as Hugging Face's label_all_tokens=False), which the loss and the metric skip;
  * a sentence longer than max_seq_length - 2 pieces is cut into windows of whole words; a window
    starts about doc_stride pieces after the previous one (never past its end, so every word is
    in a window); every word is labelled (trained on and predicted) in ONE window only, the one
    where it has the most context: the largest min(pieces before it, pieces after it) in the
    window (SQuAD's max-context rule), the earlier window on ties.
"""

import dataclasses
from typing import List

import numpy as np

from albert_tf.errors import AlbertError

IGNORE = -100  # label id of a piece that is not a word's first piece (skipped by loss, metric)
FEATURE_KEYS = ("input_ids", "input_mask", "segment_ids", "label_ids", "word_ids")


def word_pieces(tokenizer, words):
  """Each word's pieces: a list (one per word) of non-empty lists of piece strings."""
  result = []
  for word in words:
    pieces = tokenizer.tokenize(word)
    result.append(pieces if pieces else [tokenizer.inv_vocab[tokenizer.unk_id]])
  return result


@dataclasses.dataclass
class Window:
  """One encoder input of a sentence: words [start, end), and the words it labels."""
  start: int
  end: int
  owned: List[int]  # the word indices this window labels (each word is owned by one window)


def plan_windows(piece_counts, max_seq_length, doc_stride, where=None):
  """The windows of a sentence whose words have `piece_counts` pieces.

  Args:
    piece_counts: pieces per word (each >= 1).
    max_seq_length: the encoder's length; a window holds max_seq_length - 2 pieces.
    doc_stride: how many pieces a window starts after the previous one (at least one word).
    where: callable(word index) -> "file: line N" for the error (None: "word N").
  Returns:
    A list of Window covering every word, each word owned by exactly one.
  Raises:
    AlbertError: a word with more pieces than a window holds.
  """
  room = max_seq_length - 2
  for i, count in enumerate(piece_counts):
    if count > room:
      place = where(i) if where else f"word {i + 1}"
      raise AlbertError(f"{place}: a word of {count} pieces is longer than a window "
                        f"(--max_seq_length={max_seq_length} holds {room}); raise "
                        "--max_seq_length or split the word")
  starts = np.concatenate([[0], np.cumsum(piece_counts)]).astype(int)
  n = len(piece_counts)
  windows, start = [], 0
  while True:
    end = start
    while end < n and starts[end + 1] - starts[start] <= room:
      end += 1
    windows.append(Window(start, end, []))
    if end == n:
      break
    target = starts[start] + doc_stride
    next_start = start + 1
    while next_start < end and starts[next_start] < target:
      next_start += 1
    start = next_start
  # Each word goes to the window where it has the most context (earlier window on ties).
  for i in range(n):
    best, best_score = None, None
    for w, window in enumerate(windows):
      if window.start <= i < window.end:
        score = min(starts[i] - starts[window.start], starts[window.end] - starts[i + 1])
        if best_score is None or score > best_score:
          best, best_score = w, score
    windows[best].owned.append(i)
  return windows


def encode_windows(tokenizer, pieces, tag_ids, max_seq_length, doc_stride, where=None):
  """The encoder inputs of one sentence.

  Args:
    tokenizer: the FullTokenizer.
    pieces: `word_pieces(tokenizer, words)`.
    tag_ids: one label id per word, or None (prediction: every owned word gets label 0).
    max_seq_length, doc_stride, where: as plan_windows.
  Returns:
    A list (one per window) of dicts of int32 arrays [max_seq_length] under FEATURE_KEYS:
    label_ids is the word's label on the first piece of each word the window owns, IGNORE
    elsewhere; word_ids the word's index there, -1 elsewhere.
  """
  windows = plan_windows([len(p) for p in pieces], max_seq_length, doc_stride, where)
  cls_id, sep_id, pad_id = tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id
  features = []
  for window in windows:
    owned = set(window.owned)
    ids, labels, word_ids = [cls_id], [IGNORE], [-1]
    for i in range(window.start, window.end):
      word_piece_ids = tokenizer.convert_tokens_to_ids(pieces[i])
      ids.extend(word_piece_ids)
      first_label = (tag_ids[i] if tag_ids is not None else 0) if i in owned else IGNORE
      labels.extend([first_label] + [IGNORE] * (len(word_piece_ids) - 1))
      word_ids.extend([i if i in owned else -1] + [-1] * (len(word_piece_ids) - 1))
    ids.append(sep_id)
    labels.append(IGNORE)
    word_ids.append(-1)
    length = len(ids)
    padding = max_seq_length - length
    features.append({
        "input_ids": np.array(ids + [pad_id] * padding, np.int32),
        "input_mask": np.array([1] * length + [0] * padding, np.int32),
        "segment_ids": np.zeros(max_seq_length, np.int32),
        "label_ids": np.array(labels + [IGNORE] * padding, np.int32),
        "word_ids": np.array(word_ids + [-1] * padding, np.int32),
    })
  return features


def words_from_windows(num_words, windows_word_ids, windows_values):
  """Per-piece values of a sentence's windows -> one value per word.

  Args:
    num_words: the sentence's word count.
    windows_word_ids: each window's word_ids [max_seq_length] (-1: not a word it owns).
    windows_values: each window's per-piece values [max_seq_length, ...] (label ids, scores).
  Returns:
    A list of num_words values (each word owned by exactly one window).
  """
  result = [None] * num_words
  for word_ids, values in zip(windows_word_ids, windows_values):
    for position in np.nonzero(np.asarray(word_ids) >= 0)[0]:
      result[int(word_ids[position])] = values[position]
  if any(value is None for value in result):
    raise ValueError("a word is owned by no window")  # a bug, never bad input
  return result
