"""The in-graph (serving) tokenizer gives the same ids and packing as the Python tokenizer."""

import pytest
import tensorflow as tf

from albert_tf import tokenization
from albert_tf.text.in_graph_tokenizer import InGraphTokenizer
from tests.helpers import text as text_helpers


EXTRA_TEXTS = [
    "in 1990, the price was 3.0, and then x3, done",
    "a3.0, 10, 1,000,",
    "\u039f\u0394\u039f\u03a3 \u03a3\u0391\u03a3, \u0391\u03a3'\u03a3",  # Greek final sigma
    "\u00c5ngstr\u00f6m \u0130I \u1e9e \u01c5",
    "x" * 300,
]


TEXTS = text_helpers.VARIED_TEXTS + EXTRA_TEXTS


@pytest.fixture(scope="module")
def models(tmp_path_factory):
  d = tmp_path_factory.mktemp("ingraph")
  return {"tiny": text_helpers.make_tiny_spm_model(d),
          "digit_comma": text_helpers.make_digit_comma_spm_model(d)}


@pytest.mark.parametrize("name", ["tiny", "digit_comma"])
@pytest.mark.parametrize("lower", [True, False])
def test_same_ids_as_python_tokenizer(models, name, lower):
  py = tokenization.FullTokenizer(spm_model_file=models[name], do_lower_case=lower)
  layer = InGraphTokenizer(models[name], max_seq_length=32, do_lower_case=lower)
  got = layer.tokenize(tf.constant(TEXTS)).to_list()
  for text, ids in zip(TEXTS, got):
    assert ids == py.encode(text), text
  processed = layer.preprocess(tf.constant(TEXTS)).numpy()
  assert [p.decode("utf-8") for p in processed] == [py.preprocess(t) for t in TEXTS]


def _reference_pack(ids_a, ids_b, max_seq_length):
  """The official classifier packing, written plainly: pop from the longer (B on ties)."""
  a, b = list(ids_a), list(ids_b) if ids_b is not None else None
  if not b:  # official: a B without tokens is no segment (`if tokens_b:`)
    a = a[:max_seq_length - 2]
    ids = [2] + a + [3]
    segments = [0] * len(ids)
  else:
    while len(a) + len(b) > max_seq_length - 3:
      if len(a) > len(b):
        a.pop()
      else:
        b.pop()
    ids = [2] + a + [3] + b + [3]
    segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
  pad = max_seq_length - len(ids)
  return ids + [0] * pad, [1] * len(ids) + [0] * pad, segments + [0] * pad


@pytest.mark.parametrize("max_seq_length", [8, 13, 64])
def test_packing_pairs_and_singles(models, max_seq_length):
  py = tokenization.FullTokenizer(spm_model_file=models["tiny"])
  layer = InGraphTokenizer(models["tiny"], max_seq_length=max_seq_length)
  texts_a = TEXTS
  texts_b = TEXTS[::-1]
  pair = layer((tf.constant(texts_a), tf.constant(texts_b)))
  single = layer(tf.constant(texts_a))
  for k, (a, b) in enumerate(zip(texts_a, texts_b)):
    ids, mask, segments = _reference_pack(py.encode(a), py.encode(b), max_seq_length)
    assert pair["input_ids"][k].numpy().tolist() == ids
    assert pair["input_mask"][k].numpy().tolist() == mask
    assert pair["segment_ids"][k].numpy().tolist() == segments
    ids, mask, segments = _reference_pack(py.encode(a), None, max_seq_length)
    assert single["input_ids"][k].numpy().tolist() == ids
    assert single["input_mask"][k].numpy().tolist() == mask
    assert single["segment_ids"][k].numpy().tolist() == segments
  for out in (pair, single):
    assert all(v.dtype == tf.int32 and v.shape == (len(texts_a), max_seq_length)
               for v in out.values())


def test_config_round_trip_and_saved_model(models, tmp_path):
  layer = InGraphTokenizer(models["tiny"], max_seq_length=16, do_lower_case=True, name="tok")
  config = layer.get_config()
  clone = InGraphTokenizer.from_config(config)
  assert clone.get_config() == config
  texts = tf.constant(["Hello there, 3,000 caf\u00e9s!", ""])
  expected = layer(texts)

  module = tf.Module()
  module.tokenizer = layer
  module.serve = tf.function(lambda t: layer(t),
                             input_signature=[tf.TensorSpec([None], tf.string)])
  path = str(tmp_path / "saved")
  tf.saved_model.save(module, path)
  loaded = tf.saved_model.load(path)
  got = loaded.serve(texts)
  for key in ("input_ids", "input_mask", "segment_ids"):
    assert got[key].numpy().tolist() == expected[key].numpy().tolist()
