"""Test helpers of the SQuAD area: fixture paths, a SentencePiece model for them, the tiny
config's SQuAD overrides."""

import json
import os

from tests.helpers.paths import FIXTURES_DIR

SQUAD_DATA_DIR = FIXTURES_DIR / "squad"
TINY_V1 = SQUAD_DATA_DIR / "tiny-v1.1.json"
TINY_V2 = SQUAD_DATA_DIR / "tiny-v2.0.json"

# Extra text so the tiny SentencePiece model has ordinary English pieces besides the fixtures'.
_EXTRA_TEXT = """\
The quick brown fox jumps over the lazy dog.
A sentence piece model splits words into frequent pieces.
What, where, when, who, how and which are question words.
Numbers like 1,234,567 and 3.0, 2.5, or 10, appear in text.
"""


def fixture_texts(*paths):
  """All contexts and questions of the given SQuAD JSON files."""
  texts = []
  for path in paths or (TINY_V1, TINY_V2):
    with open(path, encoding="utf-8") as f:
      data = json.load(f)["data"]
    for article in data:
      for paragraph in article["paragraphs"]:
        texts.append(paragraph["context"])
        texts.extend(qa["question"] for qa in paragraph["qas"])
  return texts


def make_squad_spm_model(tmp_dir, vocab_size=200):
  """Trains (about a second) a tiny ALBERT-convention SentencePiece model on the fixtures.

  Returns the .model path. Deterministic: fixed seed, one thread.
  """
  from albert_tf.text.sentencepiece_training import train_sentencepiece  # pylint: disable=g-import-not-at-top
  tmp_dir = os.fspath(tmp_dir)
  corpus = os.path.join(tmp_dir, "squad_spm_corpus.txt")
  with open(corpus, "w", encoding="utf-8") as f:
    for _ in range(5):
      f.write("\n".join(fixture_texts()) + "\n" + _EXTRA_TEXT)
  return train_sentencepiece([corpus], os.path.join(tmp_dir, "squad_spm"), vocab_size=vocab_size)


# The SQuAD tests' tiny config (tests/helpers/tiny_config.py) besides its vocabulary, which is
# sized for their SentencePiece model: dropout spelled as float 0.0 (albert_tiny.json has 0), as
# these tests have always written it into albert_config.json.
TINY_CONFIG_OVERRIDES = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def write_json(path, obj):
  os.makedirs(os.path.dirname(os.fspath(path)), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(obj, f, ensure_ascii=False)
  return os.fspath(path)
