"""Tokenization: preprocess_text, SentencePiece/WordPiece FullTokenizer, offsets."""

import unicodedata

import pytest
import sentencepiece as spm

from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.text import tokenization
from tests.helpers import text as text_helpers
from tests.helpers.tiny_config import tiny_config_dict


def test_preprocess_text_official_rules():
  pp = tokenization.preprocess_text
  assert pp("  a \t b\n\nc  ") == "a b c"
  assert pp("Café Ångström") == "Cafe Angstrom"
  assert pp("Café Ångström", lower=True) == "cafe angstrom"
  assert pp("e\u0301te\u0301") == "ete"  # decomposed accents dropped too
  assert pp("``quoted''") == "``quoted''"  # left as they are (official ALBERT)
  assert pp("\ufb01ne") == "fine"  # NFKD compatibility decomposition
  assert pp("a\u00a0b\u3000c") == "a b c"  # Unicode whitespace collapses
  assert pp("  x  ", remove_space=False) == "  x  "
  assert pp(b"caf\xc3\xa9") == "cafe"
  with pytest.raises(AlbertError, match="UTF-8"):
    pp(b"\xff\xfe")


@pytest.mark.parametrize("text", text_helpers.VARIED_TEXTS)
def test_preprocess_alignment_matches_preprocess_text(text):
  for lower in (False, True):
    processed, spans = tokenization._preprocess_with_alignment(text, lower=lower)
    assert processed == tokenization.preprocess_text(text, lower=lower)
    assert len(spans) == len(processed)
    for ch, (start, end) in zip(processed, spans):
      assert 0 <= start < end <= len(text)
      if ch != " ":
        # The character comes from the original span by NFKD (+ lower-casing).
        source = unicodedata.normalize("NFKD", text[start:end])
        lowered = source.lower()
        assert ch in source or ch in lowered or (ch == "\u03c2" and "\u03c3" in lowered)


def test_full_tokenizer_sentencepiece(spm_model):
  tok = tokenization.FullTokenizer(vocab_file=None, do_lower_case=True, spm_model_file=spm_model)
  sp = tok.sp_model
  assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
  assert tok.vocab["[MASK]"] == 4 and tok.inv_vocab[2] == "[CLS]"
  assert len(tok.vocab) == sp.get_piece_size()
  text = "  The QUICK brown   fox, Café! "
  pieces = tok.tokenize(text)
  assert pieces == tokenization.encode_pieces(sp, "the quick brown fox, cafe!")
  assert "".join(pieces).replace("\u2581", " ").strip() == "the quick brown fox, cafe!"
  ids = tok.convert_tokens_to_ids(pieces)
  assert ids == [sp.piece_to_id(p) for p in pieces]
  assert tok.convert_ids_to_tokens(ids) == pieces
  assert tok.encode(text) == ids
  # Case kept when do_lower_case=False.
  cased = tokenization.FullTokenizer(spm_model_file=spm_model, do_lower_case=False)
  assert "".join(cased.tokenize("The Fox")).replace("\u2581", " ").strip() == "The Fox"


def test_text_spelling_special_tokens_is_not_special(spm_model, digit_comma_model):
  tok = tokenization.FullTokenizer(spm_model_file=spm_model)
  ids = tok.encode("[CLS] a [SEP] b [MASK]")
  assert not {0, 2, 3, 4} & set(ids)
  assert "[CLS]" not in tok.tokenize("[CLS]")
  # In a model lacking "[", "C", ... SentencePiece returns the unknown surface "[CLS]" as the
  # piece; it must not become the control id through PieceToId.
  cased = tokenization.FullTokenizer(spm_model_file=digit_comma_model, do_lower_case=False)
  raw = cased.sp_model.encode("[CLS] x <pad>", out_type=str)
  assert "[CLS]" in raw
  pieces = cased.tokenize("[CLS] x <pad>")
  assert "[CLS]" not in pieces and "<pad>" not in pieces and "<unk>" in pieces
  ids = cased.convert_tokens_to_ids(pieces)
  assert ids == cased.sp_model.encode("[CLS] x <pad>") and not {0, 2, 3, 4} & set(ids)
  assert cased.tokenize_with_offsets("[CLS] x <pad>")[0] == pieces
  # Explicit special tokens still convert (classifier code builds ["[CLS]"] + tokens + ["[SEP]"]).
  assert cased.convert_tokens_to_ids(["[CLS]", "[SEP]", "[MASK]"]) == [2, 3, 4]


@pytest.mark.parametrize("text,expected", [
    # "▁3.0," -> "▁" "3" "." "0" "," (re-encoding "3.0" gives "▁" "3" "." "0"; the "▁" stays).
    ("was 3.0, x", ["\u2581", "w", "a", "s", "\u2581", "3", ".", "0", ",", "\u2581x"]),
    # "0," (no "▁") -> "0" "," : the dummy-prefix "▁" of the re-encoding is dropped.
    ("a3.0,", ["\u2581", "a", "3", ".", "0", ","]),
    ("in 1990, 10,", ["\u2581", "i", "n", "\u2581199", "0", ",", "\u25811", "0", ","]),
])
def test_digit_comma_resplit(digit_comma_model, text, expected):
  tok = tokenization.FullTokenizer(spm_model_file=digit_comma_model)
  raw = tok.sp_model.encode(text, out_type=str)
  assert any(p.endswith(",") and len(p) > 1 for p in raw)  # the model does make such pieces
  pieces = tok.tokenize(text)
  assert pieces == expected
  # No stray "▁" is added where the original piece had none ("0," -> "0" ",").
  assert "".join(pieces) == "".join(raw)


def test_tokenize_with_offsets_maps_to_original_characters(spm_model, digit_comma_model):
  tok = tokenization.FullTokenizer(spm_model_file=spm_model)
  text = "  The   Café  e\u0301te\u0301 costs 3,000! \ufb01ne "
  pieces, offsets = tok.tokenize_with_offsets(text)
  assert pieces == tok.tokenize(text)
  starts = [s for s, _ in offsets]
  assert starts == sorted(starts)
  for piece, (s, e) in zip(pieces, offsets):
    body = piece.replace("\u2581", "")
    if not body:
      assert s == e  # a bare "▁" has an empty span
      continue
    original = text[s:e]
    assert " " not in original
    assert body in tokenization.preprocess_text(original, lower=True) or original == "\ufb01"
  spans = {piece: text[s:e] for piece, (s, e) in zip(pieces, offsets)}
  assert spans.get("\u2581the") == "The"
  # Accented letters map back to the whole accented original ("é" or "e" + U+0301).
  accented = [text[s:e] for p, (s, e) in zip(pieces, offsets) if text[s:e] in ("é", "e\u0301")]
  assert "é" in accented and "e\u0301" in accented

  dc = tokenization.FullTokenizer(spm_model_file=digit_comma_model)
  text = "Was  3.0, then a3.0,"
  pieces, offsets = dc.tokenize_with_offsets(text)
  assert pieces == dc.tokenize(text)
  assert [text[s:e] for s, e in offsets] == ["", "W", "a", "s", "", "3", ".", "0", ",", "the",
                                             "n", "", "a", "3", ".", "0", ","]


@pytest.mark.parametrize("text", text_helpers.VARIED_TEXTS)
def test_tokenize_with_offsets_on_varied_text(spm_model, text):
  tok = tokenization.FullTokenizer(spm_model_file=spm_model)
  pieces, offsets = tok.tokenize_with_offsets(text)
  assert pieces == tok.tokenize(text)
  assert len(offsets) == len(pieces)
  for s, e in offsets:
    assert 0 <= s <= e <= len(text)
    assert not text[s:e][:1].isspace()


def test_tokenizer_errors(tmp_path):
  with pytest.raises(AlbertError, match="spm_model_file or --vocab_file"):
    tokenization.FullTokenizer()
  with pytest.raises(AlbertError, match="cannot read"):
    tokenization.FullTokenizer(spm_model_file=str(tmp_path / "nope.model"))
  bad = tmp_path / "bad.model"
  bad.write_bytes(b"not a model")
  with pytest.raises(AlbertError, match="not a SentencePiece model"):
    tokenization.FullTokenizer(spm_model_file=str(bad))


def test_model_without_control_symbols_is_reported(tmp_path):
  corpus = tmp_path / "c.txt"
  corpus.write_text("the cat sat on the mat\n" * 50)
  spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "plain"),
                                 vocab_size=30, hard_vocab_limit=False, minloglevel=2)
  tok = tokenization.FullTokenizer(spm_model_file=str(tmp_path / "plain.model"))
  with pytest.raises(AlbertError, match=r"no \[CLS\] token"):
    tok.check_special_tokens()


@pytest.fixture
def wordpiece_vocab(tmp_path):
  tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "the", "cafe",
            ",", "!", "runn", "##ing", "東", "京"]
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(tokens) + "\n")
  return str(path)


def test_full_tokenizer_wordpiece(wordpiece_vocab):
  tok = tokenization.FullTokenizer(vocab_file=wordpiece_vocab, do_lower_case=True)
  assert tok.sp_model is None
  assert tok.tokenize("UNAFFABLE the Café, running!") == [
      "un", "##aff", "##able", "the", "cafe", ",", "runn", "##ing", "!"]
  assert tok.tokenize("東京 xyz") == ["東", "京", "[UNK]"]
  ids = tok.convert_tokens_to_ids(["the", "[MASK]", "nothere"])
  assert ids == [8, 4, 1]
  assert tok.convert_ids_to_tokens([2, 3]) == ["[CLS]", "[SEP]"]
  assert (tok.cls_id, tok.sep_id, tok.mask_id) == (2, 3, 4)
  cased = tokenization.FullTokenizer(vocab_file=wordpiece_vocab, do_lower_case=False)
  assert cased.tokenize("The") == ["[UNK]"]


def test_wordpiece_vocab_errors(tmp_path):
  with pytest.raises(AlbertError, match="cannot read vocabulary"):
    tokenization.FullTokenizer(vocab_file=str(tmp_path / "missing.txt"))
  path = tmp_path / "v.txt"
  path.write_text("[CLS]\n[SEP]\nthe\n")
  tok = tokenization.FullTokenizer(vocab_file=str(path))
  with pytest.raises(AlbertError, match=r"no \[MASK\] token"):
    tok.check_special_tokens()


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_wordpiece_offsets_spell_each_piece(tmp_path, do_lower_case):
  vocab = text_helpers.make_wordpiece_vocab(tmp_path / "vocab.txt", cased=not do_lower_case)
  tok = tokenization.FullTokenizer(vocab_file=vocab, do_lower_case=do_lower_case)
  for text in text_helpers.WORDPIECE_TEXTS:
    pieces, offsets = tok.tokenize_with_offsets(text)
    assert pieces == tok.tokenize(text), repr(text)
    starts = [start for start, _ in offsets]
    assert starts == sorted(starts), repr(text)
    for piece, (start, end) in zip(pieces, offsets):
      surface = text[start:end]
      assert start < end, repr(text)
      if piece != "[UNK]":  # the piece's characters, normalised as BasicTokenizer does
        normalised = "".join(tokenization.BasicTokenizer(do_lower_case).tokenize(surface))
        assert normalised == piece[2:] if piece.startswith("##") else normalised == piece, (
            text, piece, surface)
  pieces, offsets = tok.tokenize_with_offsets("我们的Café，PLAYING\u200bgood")
  surfaces = ["我", "们", "的", "C", "a", "f", "é", "，", "PLAY", "ING\u200b", "g", "o", "o", "d"]
  if do_lower_case:
    assert ["我们的Café，PLAYING\u200bgood"[s:e] for s, e in offsets] == surfaces


def test_vocabulary_flags_mixed_up_or_disagreeing_are_one_line(tmp_path, spm_model):
  vocab = text_helpers.make_wordpiece_vocab(tmp_path / "vocab.txt")
  with pytest.raises(AlbertError) as info:
    tokenization.make_tokenizer(spm_model_file=vocab)
  assert str(info.value) == (f"--spm_model_file {vocab} is not a SentencePiece model: it is a "
                             "text vocabulary (WordPiece); pass it as --vocab_file")
  with pytest.raises(AlbertError) as info:
    tokenization.make_tokenizer(vocab_file=spm_model)
  assert str(info.value) == (f"--vocab_file {spm_model} is a SentencePiece model, not a "
                             "vocabulary file: pass it as --spm_model_file")
  with pytest.raises(AlbertError) as info:
    tokenization.make_tokenizer(spm_model_file=spm_model, vocab_file=vocab)
  assert str(info.value).startswith(f"--vocab_file {vocab} and --spm_model_file {spm_model} "
                                    "disagree: token 0 is '[PAD]' in the vocabulary, '<pad>' in "
                                    "the model (")
  # The official pair (run_glue.sh: 30k-clean.vocab beside 30k-clean.model) agrees.
  tokenization.make_tokenizer(spm_model_file=spm_model,
                              vocab_file=spm_model[:-len(".model")] + ".vocab")


def test_config_smaller_than_the_wordpiece_vocabulary_is_one_line(tmp_path):
  vocab = text_helpers.make_wordpiece_vocab(tmp_path / "vocab_chinese.txt")
  size = len(tokenization.load_vocab(vocab))
  config = AlbertConfig.from_dict(tiny_config_dict(vocab_size=size - 1),
                                  source="albert_config.json")
  with pytest.raises(AlbertError) as info:
    tokenization.make_tokenizer(vocab_file=vocab, albert_config=config)
  assert str(info.value) == (f"{vocab}: vocabulary has {size} pieces but albert_config.json has "
                             f"vocab_size={size - 1} (is this the model's own vocabulary?)")
