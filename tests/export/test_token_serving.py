"""The token classifier's SavedModel: raw text in, the same words, tags, scores and entities
(with character offsets) as the in-process path of run_ner.py --do_predict; seqeval's
get_entities is the reference grouping. Also through query_savedmodel's client call."""

import numpy as np
import pytest
import tensorflow as tf
from seqeval.metrics.sequence_labeling import get_entities

from albert_tf import models
from albert_tf.data import token_alignment
from albert_tf.export import export_token_classifier
from albert_tf.export.token_serving import entity_starts, tag_tables
from albert_tf.text.tokenization import FullTokenizer
from albert_tf.tools import savedmodel_query
from tests.helpers.model_inputs import randomize_weights
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_albert_config

TAGS = ["O", "B-LOC", "B-PER", "I-LOC", "I-PER"]
SEQ = 32
TEXTS = ["Tokyo is  the capital of Japan", "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 Albert",
         " Paris\tFrance \u200b sea ", "x"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  root = tmp_path_factory.mktemp("ner_export")
  spm = make_tiny_spm_model(str(root))
  model = models.build("token_classifier", tiny_albert_config(), len(TAGS))
  randomize_weights(model, seed=5)
  head = model.token_classifier_head  # far from uniform: the tags vary from word to word
  head.output_weights.assign(np.random.default_rng(6).normal(0, 2.0, head.output_weights.shape))
  version = export_token_classifier(model, str(root / "export"), TAGS, SEQ, spm)
  return {"model": model, "spm": spm, "version": version, "root": root,
          "loaded": tf.saved_model.load(version)}


def _in_process(model, tokenizer, text):
  """run_ner.py's path for one text: words, their tags and scores (one window), character
  offsets, and entities grouped by seqeval."""
  words, offsets, position = text.split(), [], 0
  for word in words:
    start = text.index(word, position)
    offsets.append((start, start + len(word)))
    position = start + len(word)
  pieces = token_alignment.word_pieces(tokenizer, words)
  (features,) = token_alignment.encode_windows(tokenizer, pieces, None, SEQ, 8)
  batch = {k: features[k][None] for k in ("input_ids", "input_mask", "segment_ids")}
  probabilities = model(batch, training=False)["probabilities"].numpy()[0]
  word_probabilities = token_alignment.words_from_windows(len(words), [features["word_ids"]],
                                                          [probabilities])
  tags = [TAGS[int(np.argmax(p))] for p in word_probabilities]
  scores = [float(np.max(p)) for p in word_probabilities]
  entities = [(kind, offsets[first][0], offsets[last][1],
               text[offsets[first][0]:offsets[last][1]], float(np.mean(scores[first:last + 1])))
              for kind, first, last in get_entities(tags)]
  return words, offsets, tags, scores, entities


def test_served_entities_equal_the_in_process_prediction(exported):
  tokenizer = FullTokenizer(spm_model_file=exported["spm"])
  served = exported["loaded"].signatures["serving_default"](text=tf.constant(TEXTS))
  served = {k: v.numpy() for k, v in served.items()}
  assert served["entity_type"].shape[0] == len(TEXTS)
  kinds_seen = set()
  for row, text in enumerate(TEXTS):
    words, offsets, tags, scores, entities = _in_process(exported["model"], tokenizer, text)
    n = int(served["num_words"][row])
    assert [w.decode() for w in served["word"][row][:n]] == words
    assert list(zip(served["word_start"][row][:n], served["word_end"][row][:n])) == offsets
    assert [t.decode() for t in served["word_tag"][row][:n]] == tags
    np.testing.assert_allclose(served["word_score"][row][:n], scores, atol=1e-5)
    got = savedmodel_query.entities(served, row)
    assert [e[:4] for e in got] == [e[:4] for e in entities], text
    np.testing.assert_allclose([e[4] for e in got], [e[4] for e in entities], atol=1e-5)
    for kind, start, end, span, _ in got:
      assert text[start:end] == span
      kinds_seen.add(kind)
    kinds_seen.update(tags)
  assert len(kinds_seen) > 3  # the weights gave several tags: the grouping was exercised


def test_pre_split_words_give_the_same_answer(exported):
  """The `words` signature: each text's words ("" padding) answer as the text itself would
  with single spaces; entity word spans match the character spans."""
  split = [text.split() for text in TEXTS]
  width = max(len(words) for words in split)
  padded = tf.constant([words + [""] * (width - len(words)) for words in split])
  by_words = {k: v.numpy() for k, v in exported["loaded"].signatures["words"](
      words=padded).items()}
  by_text = exported["loaded"].signatures["serving_default"](
      text=tf.constant([" ".join(words) for words in split]))
  for key in ("word_tag", "entity_type", "entity_start", "entity_end", "entity_text",
              "entity_word_start", "entity_word_end"):
    np.testing.assert_array_equal(by_words[key], by_text[key].numpy(), err_msg=key)
  for row, words in enumerate(split):
    for i in range(int(by_words["num_entities"][row])):
      first, end = (int(by_words[k][row][i]) for k in ("entity_word_start", "entity_word_end"))
      assert by_words["entity_text"][row][i].decode() == " ".join(words[first:end])
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"words\[0, 1\] holds whitespace"):
    exported["loaded"].signatures["words"](words=tf.constant([["Paris", "New York"]]))


def test_query_savedmodel_gives_the_same_answer(exported):
  served = exported["loaded"].signatures["serving_default"](text=tf.constant(TEXTS))
  queried = savedmodel_query.query(str(exported["root"] / "export"), TEXTS, None)
  for key in ("entity_type", "entity_start", "entity_end", "word_tag"):
    np.testing.assert_array_equal(queried[key], served[key].numpy())


def test_token_ids_signature_and_piece_tags(exported):
  tokenizer = FullTokenizer(spm_model_file=exported["spm"])
  pieces = token_alignment.word_pieces(tokenizer, TEXTS[0].split())
  (features,) = token_alignment.encode_windows(tokenizer, pieces, None, SEQ, 8)
  batch = {k: tf.constant(features[k][None]) for k in ("input_ids", "input_mask", "segment_ids")}
  served = exported["loaded"].signatures["token_ids"](**batch)
  want = exported["model"](batch, training=False)["logits"].numpy()
  length = served["logits"].shape[1]  # padding trimmed
  np.testing.assert_allclose(served["logits"].numpy(), want[:, :length], atol=1e-5)
  real = int(features["input_mask"].sum())
  tags = [t.decode() for t in served["piece_tag"].numpy()[0]]
  assert tags[:real] == [TAGS[i] for i in np.argmax(want[0, :real], -1)]
  assert set(tags[real:]) <= {""}


def test_a_text_longer_than_one_window_is_refused(exported):
  long_text = " ".join(["capital"] * SEQ)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"text 1 has \d+ pieces, more than 30 \(max_seq_length - 2\)"):
    exported["loaded"].signatures["serving_default"](text=tf.constant(["Paris", long_text]))


@pytest.mark.parametrize("scheme_tags,entities", [
    (["B-PER", "I-PER", "O", "I-LOC", "I-LOC", "B-LOC", "I-PER"],
     [("PER", 0, 1), ("LOC", 3, 4), ("LOC", 5, 5), ("PER", 6, 6)]),
    (["S-PER", "B-LOC", "E-LOC", "S-LOC", "B-PER", "I-PER", "E-PER"],
     [("PER", 0, 0), ("LOC", 1, 2), ("LOC", 3, 3), ("PER", 4, 6)]),
])
def test_grouping_matches_seqeval(scheme_tags, entities):
  """The graph's entity starts give seqeval's entities (BIO with IOB1 starts; BIOES)."""
  label_list = sorted(set(scheme_tags))
  prefixes, type_ids, _ = tag_tables(label_list)
  ids = [label_list.index(t) for t in scheme_tags]
  starts = entity_starts(tf.gather(prefixes, ids), tf.gather(type_ids, ids),
                         tf.constant([True] + [False] * (len(ids) - 1))).numpy()
  assert list(np.nonzero(starts)[0]) == [first for _, first, _ in entities]
  assert get_entities(scheme_tags) == entities
