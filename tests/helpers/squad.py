"""Test helpers of the SQuAD area: fixture paths, a SentencePiece model for them, a tiny config."""

import json
import os
import pathlib

SQUAD_DATA_DIR = pathlib.Path(__file__).resolve().parent.parent / "data" / "squad"
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
  from albert_tf.text import train_sentencepiece  # pylint: disable=g-import-not-at-top
  tmp_dir = os.fspath(tmp_dir)
  corpus = os.path.join(tmp_dir, "squad_spm_corpus.txt")
  with open(corpus, "w", encoding="utf-8") as f:
    for _ in range(5):
      f.write("\n".join(fixture_texts()) + "\n" + _EXTRA_TEXT)
  return train_sentencepiece([corpus], os.path.join(tmp_dir, "squad_spm"), vocab_size=vocab_size)


def tiny_albert_config_dict(vocab_size, **overrides):
  """A tiny ALBERT config (H=32, L=2) sized for the SentencePiece model's vocabulary."""
  config = {
      "attention_probs_dropout_prob": 0.0,
      "hidden_dropout_prob": 0.0,
      "embedding_size": 16,
      "hidden_act": "gelu",
      "hidden_size": 32,
      "initializer_range": 0.02,
      "inner_group_num": 1,
      "intermediate_size": 64,
      "max_position_embeddings": 128,
      "num_attention_heads": 4,
      "num_hidden_groups": 1,
      "num_hidden_layers": 2,
      "type_vocab_size": 2,
      "vocab_size": vocab_size,
  }
  config.update(overrides)
  return config


def write_json(path, obj):
  os.makedirs(os.path.dirname(os.fspath(path)), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(obj, f, ensure_ascii=False)
  return os.fspath(path)
