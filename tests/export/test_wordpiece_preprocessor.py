"""The TF Hub text preprocessor and encoder of a WordPiece (Chinese) model: the Python WordPiece
ids, and the vocabulary in the assets."""

import tensorflow as tf
import tensorflow_text  # pylint: disable=unused-import  (the export's FastWordpiece op)

from albert_tf.common import fileio
from albert_tf.export import export_encoder, hub_preprocessor
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.text import tokenization
from tests.helpers import text as text_helpers
from tests.helpers.tiny_config import tiny_albert_config


def test_wordpiece_preprocessor_matches_python_tokenizer(tmp_path):
  vocab = text_helpers.make_wordpiece_vocab(tmp_path / "vocab_chinese.txt")
  path = hub_preprocessor.export_preprocessor(str(tmp_path / "pre"), None, seq_length=16,
                                              vocab_file=vocab)
  assert fileio.read_bytes(f"{path}/assets/vocab.txt") == fileio.read_bytes(vocab)
  py = tokenization.FullTokenizer(vocab_file=vocab)
  pre = tf.saved_model.load(path)
  texts = text_helpers.WORDPIECE_TEXTS
  words = pre.tokenize(tf.constant(texts))
  assert words.ragged_rank == 2  # [batch, (words), (pieces)], as TF Hub's BERT preprocessors
  for text, row in zip(texts, words.to_list()):
    assert [i for word in row for i in word] == py.encode(text), repr(text)
    assert len(row) == len(py.basic_tokenizer.tokenize(text)), repr(text)
  packed = pre(tf.constant(["我们的电影很好！"]))
  ids = [py.cls_id] + py.encode("我们的电影很好！") + [py.sep_id]
  assert packed["input_word_ids"].numpy().tolist() == [ids + [0] * (16 - len(ids))]
  pair = pre.bert_pack_inputs([words[:1], words[1:2]], seq_length=tf.constant(8))
  assert pair["input_type_ids"].numpy().shape == (1, 8)
  special = {k: int(v) for k, v in pre.tokenize.get_special_tokens_dict().items()}
  assert special == {"vocab_size": len(py.vocab), "start_of_sequence_id": py.cls_id,
                     "end_of_segment_id": py.sep_id, "padding_id": 0, "mask_id": py.mask_id}


def test_wordpiece_encoder_names_its_vocabulary_in_tokenization_info(tmp_path):
  vocab = text_helpers.make_wordpiece_vocab(tmp_path / "vocab_chinese.txt")
  size = len(tokenization.load_vocab(vocab))
  pretrainer = AlbertPretrainer(tiny_albert_config(vocab_size=size))
  path = export_encoder(pretrainer, str(tmp_path / "encoder"), None, vocab_file=vocab,
                        heads=())
  info = tf.saved_model.load(path).signatures["tokenization_info"]()
  assert info["vocab_file"].numpy().decode().endswith("assets/vocab.txt")
  assert fileio.read_bytes(f"{path}/assets/vocab.txt") == fileio.read_bytes(vocab)
