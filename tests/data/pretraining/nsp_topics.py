"""A tiny corpus ordered by topic, and what NSP records made from it say about their B segments.

Shared by tests/fixtures/official_nsp/make_official_nsp.py (which runs the official tool on the
corpus once and commits the numbers) and test_nsp_official.py (which runs ours on it).

Every word names its document: `t<topic>d<doc>w<k>` (8 topics of 8 documents, one after the
other), and the vocabulary is exactly those words (WordPiece, one id each), so the document of
any token of a record is known. A record's A and B segments each come from one document.
"""

import json
import random

import numpy as np

TOPICS = 8
DOCS_PER_TOPIC = 8
WORDS_PER_DOC = 6
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CLS_ID, SEP_ID = 2, 3


def words():
  return [f"t{t}d{d}w{k}" for t in range(TOPICS) for d in range(DOCS_PER_TOPIC)
          for k in range(WORDS_PER_DOC)]


def write_vocab(path):
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(SPECIALS + words()) + "\n")


def write_corpus(path, seed=0):
  """Documents in topic order: 3-7 sentences of 4-10 of the document's own words each."""
  rng = random.Random(seed)
  documents = []
  for t in range(TOPICS):
    for d in range(DOCS_PER_TOPIC):
      own = [f"t{t}d{d}w{k}" for k in range(WORDS_PER_DOC)]
      documents.append("\n".join(" ".join(rng.choice(own) for _ in range(rng.randint(4, 10)))
                                 for _ in range(rng.randint(3, 7))))
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n\n".join(documents) + "\n")


def _document_of_id():
  """id -> global document number (topic * DOCS_PER_TOPIC + doc)."""
  return {len(SPECIALS) + i: i // WORDS_PER_DOC for i in range(len(words()))}


def segment_documents(paths):
  """[(label, A's document, B's document)] of every record in the TFRecord files `paths`.

  The masked positions are given their original ids back (masked_lm_ids) first. Raises if a
  segment mixes documents (neither tool makes such a segment).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  owner = _document_of_id()
  pairs = []
  for path in paths:
    for raw in tf.data.TFRecordDataset(path):
      feature = tf.train.Example.FromString(raw.numpy()).features.feature
      ids = np.array(feature["input_ids"].int64_list.value)
      n = int(np.sum(feature["input_mask"].int64_list.value))
      weights = feature["masked_lm_weights"].float_list.value
      for position, original, weight in zip(feature["masked_lm_positions"].int64_list.value,
                                            feature["masked_lm_ids"].int64_list.value, weights):
        if weight > 0:
          ids[position] = original
      ids = ids[:n]
      assert ids[0] == CLS_ID and ids[-1] == SEP_ID, ids
      first_sep = int(np.argmax(ids == SEP_ID))
      segments = []
      for segment in (ids[1:first_sep], ids[first_sep + 1:-1]):
        documents = {owner[int(i)] for i in segment}
        if len(documents) != 1:
          raise AssertionError(f"a segment of {path} spans documents {sorted(documents)}")
        segments.append(documents.pop())
      pairs.append((int(feature["next_sentence_labels"].int64_list.value[0]), *segments))
  return pairs


def summarize(pairs):
  """The numbers compared with the official tool's (see test_nsp_official.py)."""
  negatives = [(a, b) for label, a, b in pairs if label == 1]
  positives = [(a, b) for label, a, b in pairs if label == 0]
  topic = lambda doc: doc // DOCS_PER_TOPIC  # pylint: disable=unnecessary-lambda-assignment
  distance = [abs(topic(a) - topic(b)) for a, b in negatives]
  return {
      "instances": len(pairs),
      "negatives": len(negatives),
      "negative_share": len(negatives) / len(pairs),
      # Among the negatives (B from a random document):
      "other_topic_share": float(np.mean([topic(a) != topic(b) for a, b in negatives])),
      "same_document_share": float(np.mean([a == b for a, b in negatives])),
      "mean_topic_distance": float(np.mean(distance)),
      "mean_document_distance": float(np.mean([abs(a - b) for a, b in negatives])),
      "topic_distance_histogram": [distance.count(k) for k in range(TOPICS)],
      # Positives: B is A's own continuation.
      "positives_same_document_share": float(np.mean([a == b for a, b in positives])),
  }


def dumps(summary):
  return json.dumps(summary, indent=2, sort_keys=True) + "\n"
