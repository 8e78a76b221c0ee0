"""The in-graph WordPiece tokenizer gives the Python FullTokenizer's WordPiece ids exactly."""

import random

import pytest
import tensorflow as tf

from albert_tf.errors import AlbertError
from albert_tf.text import tokenization
from albert_tf.text.in_graph_tokenizer import InGraphTokenizer
from albert_tf.text.in_graph_wordpiece import (InGraphWordpieceTokenizer,
                                               make_in_graph_tokenizer)
from tests.helpers import text as text_helpers

TEXTS = text_helpers.WORDPIECE_TEXTS


@pytest.fixture(scope="module")
def vocabs(tmp_path_factory):
  d = tmp_path_factory.mktemp("wordpiece")
  return {"uncased": text_helpers.make_wordpiece_vocab(d / "uncased.txt"),
          "cased": text_helpers.make_wordpiece_vocab(d / "cased.txt", cased=True)}


def _random_texts(vocab_file, count, seed):
  """Vocabulary words glued to random code points of every plane, spaces of many kinds,
  zero-width and control characters, combining marks and full-width punctuation."""
  rng = random.Random(seed)
  with open(vocab_file, encoding="utf-8") as f:
    words = [line.strip().replace("##", "") for line in f]
  texts = []
  for _ in range(count):
    parts = []
    for _ in range(rng.randint(0, 12)):
      r = rng.random()
      if r < 0.4:
        parts.append(rng.choice(words))
      elif r < 0.7:
        cp = rng.choice([rng.randint(0, 0x2FFF), rng.randint(0x3000, 0xFFFF),
                         rng.randint(0x10000, 0x2FFFF)])
        parts.append(chr(cp) if not 0xD800 <= cp <= 0xDFFF else "")
      elif r < 0.85:
        parts.append(rng.choice(" \t\n\u3000\u200b\u00ad\x0b\u2028,，。"))
      else:
        parts.append(chr(rng.randint(0x300, 0x36F)))
    texts.append("".join(parts))
  return texts


@pytest.mark.parametrize("vocab", ["uncased", "cased"])
@pytest.mark.parametrize("lower", [True, False])
def test_same_ids_and_words_as_python_tokenizer(vocabs, vocab, lower):
  py = tokenization.FullTokenizer(vocab_file=vocabs[vocab], do_lower_case=lower)
  layer = InGraphWordpieceTokenizer(vocabs[vocab], max_seq_length=32, do_lower_case=lower)
  texts = TEXTS + _random_texts(vocabs[vocab], 400, seed=len(vocab) + lower)
  got = layer.tokenize(tf.constant(texts)).to_list()
  for text, ids in zip(texts, got):
    assert ids == py.encode(text), repr(text)
  words = layer.words(tf.constant(TEXTS)).to_list()
  for text, row in zip(TEXTS, words):
    assert [w.decode("utf-8") for w in row] == py.basic_tokenizer.tokenize(text), repr(text)


def test_the_official_rules_on_chinese_and_edge_cases(vocabs):
  layer = InGraphWordpieceTokenizer(vocabs["uncased"], max_seq_length=32)
  py = tokenization.FullTokenizer(vocab_file=vocabs["uncased"])
  cases = {
      "我们很好，电影": ["我", "们", "很", "好", "，", "电", "影"],  # one character per token
      "Caf\u00e9 PLAYING": ["c", "##a", "##f", "##e", "play", "##ing"],  # accents stripped
      "zero\u200bwidth": ["z", "##er", "##o", "##w", "##i", "##d", "##t", "##h"],  # joined
      "x" * 201 + " " + "y" * 200: ["[UNK]", "y"] + ["##y"] * 199,  # over 200 characters
      "": [],
  }
  got = layer.tokenize(tf.constant(list(cases))).to_list()
  for (text, pieces), ids in zip(cases.items(), got):
    assert py.convert_ids_to_tokens(ids) == pieces, text


def test_packing_pairs(vocabs):
  layer = InGraphWordpieceTokenizer(vocabs["uncased"], max_seq_length=12)
  py = tokenization.FullTokenizer(vocab_file=vocabs["uncased"])
  out = layer((tf.constant(["我们的电影很好"]), tf.constant(["不错。"])))
  a, b = py.encode("我们的电影很好"), py.encode("不错。")
  expected = [py.cls_id] + a[:6] + [py.sep_id] + b + [py.sep_id]  # A cut to fit 12 - 3
  assert out["input_ids"].numpy().tolist() == [expected]
  assert out["segment_ids"].numpy().tolist() == [[0] * 8 + [1] * 4]
  assert out["input_mask"].numpy().tolist() == [[1] * 12]


def test_config_round_trip_and_saved_model(vocabs, tmp_path):
  layer = InGraphWordpieceTokenizer(vocabs["cased"], max_seq_length=16, do_lower_case=False)
  clone = InGraphWordpieceTokenizer.from_config(layer.get_config())
  assert clone.get_config() == layer.get_config()
  texts = tf.constant(["The movie 很好！", ""])
  expected = layer(texts)
  module = tf.Module()
  module.serve = tf.function(lambda t: layer(t), input_signature=[tf.TensorSpec([None], tf.string)])
  tf.saved_model.save(module, str(tmp_path / "saved"))
  got = tf.saved_model.load(str(tmp_path / "saved")).serve(texts)
  for key in ("input_ids", "input_mask", "segment_ids"):
    assert got[key].numpy().tolist() == expected[key].numpy().tolist()


def test_factory_and_refusals(vocabs, tmp_path):
  assert isinstance(make_in_graph_tokenizer(vocab_file=vocabs["uncased"]),
                    InGraphWordpieceTokenizer)
  assert isinstance(make_in_graph_tokenizer(spm_model_file=text_helpers.make_tiny_spm_model(
      tmp_path), vocab_file=vocabs["uncased"]), InGraphTokenizer)
  with pytest.raises(AlbertError, match="needs a SentencePiece model or a WordPiece"):
    make_in_graph_tokenizer()
  no_unk = tmp_path / "no_unk.txt"
  no_unk.write_text("[PAD]\n[CLS]\n[SEP]\n[MASK]\na\n", encoding="utf-8")
  with pytest.raises(AlbertError, match=r"no_unk.txt has no \[UNK\] token"):
    InGraphWordpieceTokenizer(str(no_unk))
