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


ACCENTED = "Café Crème at the CAFÉ\nthe Éclair and the crème brûlée\n" * 40


def _pieces(model_file):
  sp = spm.SentencePieceProcessor(model_file=model_file)
  return [sp.id_to_piece(i) for i in range(sp.get_piece_size())]


def test_records_normalisation_before_training(tmp_path):
  """preprocess=records_normalisation(True): the pieces are those of the text the records
  tokenize (tokenization.preprocess_text, lower-cased): no capitals, no accents; without it,
  SentencePiece spends pieces on both."""
  from albert_tf.text import tokenization  # pylint: disable=g-import-not-at-top
  from albert_tf.text.sentencepiece_training import records_normalisation  # pylint: disable=g-import-not-at-top
  corpus = tmp_path / "c.txt"
  corpus.write_text(ACCENTED, encoding="utf-8")
  plain = "".join(_pieces(train_sentencepiece(str(corpus), str(tmp_path / "plain"),
                                              vocab_size=60))[13:])
  normal = "".join(_pieces(train_sentencepiece(str(corpus), str(tmp_path / "normal"),
                                               vocab_size=60,
                                               preprocess=records_normalisation(True)))[13:])
  assert "C" in plain and "é" in plain
  assert normal == tokenization.preprocess_text(normal, remove_space=False, lower=True)
  assert "▁cafe" in normal and "▁brulee" in normal  # café and brûlée as the records read them
  cased = "".join(_pieces(train_sentencepiece(str(corpus), str(tmp_path / "cased"),
                                              vocab_size=60,
                                              preprocess=records_normalisation(False)))[13:])
  assert "C" in cased and "é" not in cased


def test_command_globs_normalises_and_warns_of_fewer_pieces(tmp_path):
  """python -m albert_tf.cli.train_spm: a glob, --preprocess_text, and a --vocab_size the corpus
  cannot fill (a warning naming the piece count to put in the config)."""
  import os  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  from tests.helpers.paths import REPO  # pylint: disable=g-import-not-at-top
  (tmp_path / "corpus").mkdir()
  for name in ("a.txt", "b.txt"):
    (tmp_path / "corpus" / name).write_text(ACCENTED, encoding="utf-8")
  env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3")
  done = subprocess.run(
      [sys.executable, "-m", "albert_tf.cli.train_spm", "--input_file=corpus/*.txt",
       "--model_prefix=vocab/spm", "--vocab_size=5000", "--preprocess_text"],
      cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
  assert done.returncode == 0, done.stderr
  pieces = _pieces(str(tmp_path / "vocab" / "spm.model"))
  assert len(pieces) < 5000
  assert "C" not in "".join(pieces[13:]) and "é" not in "".join(pieces[13:])
  assert (f"warning: the corpus gave {len(pieces)} pieces, fewer than --vocab_size=5000: set "
          f"vocab_size={len(pieces)} in the model config (or give more text)") in done.stderr
  assert done.stdout.strip() == (f"wrote SentencePiece model vocab/spm.model "
                                 f"({len(pieces)} pieces)")
  model = spm.SentencePieceProcessor(model_file=str(tmp_path / "vocab" / "spm.model"))
  assert model.get_piece_size() == len(pieces)


def test_preprocessed_input_that_is_not_utf8_is_one_line(tmp_path):
  from albert_tf.text.sentencepiece_training import records_normalisation  # pylint: disable=g-import-not-at-top
  corpus = tmp_path / "c.txt"
  corpus.write_bytes(b"good line\nbad \xff line\n")
  with pytest.raises(AlbertError, match=rf"^{corpus}: line 2 is not UTF-8 \(invalid start byte "
                     r"at byte 4\): expected UTF-8 text$"):
    train_sentencepiece(str(corpus), str(tmp_path / "m"), vocab_size=50,
                        preprocess=records_normalisation(True))
