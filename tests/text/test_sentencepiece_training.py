"""Training SentencePiece models with the official settings: conventions, determinism, errors."""

import pytest
import sentencepiece as spm

from albert_tf.errors import AlbertError
from albert_tf.text.sentencepiece_training import train_sentencepiece


def test_trained_model_follows_official_conventions(spm_model):
  sp = spm.SentencePieceProcessor(model_file=spm_model)
  assert [sp.id_to_piece(i) for i in range(5)] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
  assert sp.pad_id() == 0 and sp.unk_id() == 1
  assert sp.bos_id() == -1 and sp.eos_id() == -1
  assert all(sp.is_control(i) for i in (2, 3, 4))
  # The official user-defined symbols are single pieces, '"' included (it is CSV-quoted).
  symbols = ("(", ")", '"', "-", ".", "–", "£", "€")
  assert [sp.id_to_piece(i) for i in range(5, 13)] == list(symbols)
  assert '"' in sp.encode('a"b', out_type=str)
  assert sp.get_piece_size() <= 400


def test_train_sentencepiece_is_deterministic(tmp_path):
  corpus = tmp_path / "c.txt"
  corpus.write_text("the cat sat on the mat\nthe dog ate the bone\n" * 50)
  a = train_sentencepiece([str(corpus)], str(tmp_path / "a"), vocab_size=60)
  b = train_sentencepiece(str(corpus), str(tmp_path / "b"), vocab_size=60)
  sp_a, sp_b = spm.SentencePieceProcessor(model_file=a), spm.SentencePieceProcessor(model_file=b)
  pieces = lambda sp: [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
  assert pieces(sp_a) == pieces(sp_b)


def test_train_sentencepiece_bad_input(tmp_path):
  with pytest.raises(AlbertError, match="does not exist"):
    train_sentencepiece([str(tmp_path / "missing.txt")], str(tmp_path / "m"), vocab_size=50)
  empty = tmp_path / "empty.txt"
  empty.write_text("")
  with pytest.raises(AlbertError, match="is empty"):
    train_sentencepiece([str(empty)], str(tmp_path / "m"), vocab_size=50)
