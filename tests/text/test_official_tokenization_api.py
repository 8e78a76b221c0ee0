"""The official tokenization module's API, whole, at its import path `albert_tf.tokenization`.

Every module-level name of the official tokenization.py is there (the `_is_*` helpers users call
included), and the official tokenization_test.py's nine cases pass against it: written here
ourselves, with the same inputs and expectations. `FullTokenizer.from_scratch` and
`FullTokenizer.from_hub_module` (a local TF-Hub module directory in the official TF1 hub
format: its SentencePiece asset and do_lower_case) are the official class methods.
"""

import pytest

from albert_tf import tokenization
from albert_tf.errors import AlbertError

# What the official tokenization_test.py uses as its WordPiece vocabulary.
_VOCAB_TOKENS = ["[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn",
                 "##ing"]


def test_every_official_name_is_importable():
  for name in tokenization.OFFICIAL_NAMES:
    assert hasattr(tokenization, name), name
  for method in ("from_scratch", "from_hub_module", "tokenize", "convert_tokens_to_ids",
                 "convert_ids_to_tokens"):
    assert callable(getattr(tokenization.FullTokenizer, method)), method
  for method in ("_run_strip_accents", "_run_split_on_punc", "_tokenize_chinese_chars",
                 "_is_chinese_char", "_clean_text"):
    assert callable(getattr(tokenization.BasicTokenizer, method)), method


def test_full_tokenizer(tmp_path):
  vocab_file = tmp_path / "vocab.txt"
  vocab_file.write_text("".join(t + "\n" for t in _VOCAB_TOKENS + [","]), encoding="utf-8")
  tokenizer = tokenization.FullTokenizer(str(vocab_file))
  tokens = tokenizer.tokenize("UNwant\u00E9d,running")
  assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
  assert tokenizer.convert_tokens_to_ids(tokens) == [7, 4, 5, 10, 8, 9]
  assert tokenizer.convert_ids_to_tokens([7, 4, 5, 10, 8, 9]) == tokens
  again = tokenization.FullTokenizer.from_scratch(str(vocab_file), True, None)
  assert again.tokenize("UNwant\u00E9d,running") == tokens


def test_chinese():
  assert tokenization.BasicTokenizer().tokenize("ah\u535A\u63A8zz") == [
      "ah", "\u535A", "\u63A8", "zz"]


def test_basic_tokenizer_lower():
  tokenizer = tokenization.BasicTokenizer(do_lower_case=True)
  assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == [
      "hello", "!", "how", "are", "you", "?"]
  assert tokenizer.tokenize("H\u00E9llo") == ["hello"]


def test_basic_tokenizer_no_lower():
  tokenizer = tokenization.BasicTokenizer(do_lower_case=False)
  assert tokenizer.tokenize(" \tHeLLo!how  \n Are yoU?  ") == [
      "HeLLo", "!", "how", "Are", "yoU", "?"]


def test_wordpiece_tokenizer():
  vocab = {token: i for i, token in enumerate(_VOCAB_TOKENS)}
  tokenizer = tokenization.WordpieceTokenizer(vocab=vocab)
  assert tokenizer.tokenize("") == []
  assert tokenizer.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
  assert tokenizer.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]


def test_convert_tokens_to_ids():
  vocab = {token: i for i, token in enumerate(_VOCAB_TOKENS)}
  tokens = ["un", "##want", "##ed", "runn", "##ing"]
  assert tokenization.convert_tokens_to_ids(vocab, tokens) == [7, 4, 5, 8, 9]
  inv_vocab = {i: token for token, i in vocab.items()}
  assert tokenization.convert_ids_to_tokens(inv_vocab, [7, 4, 5, 8, 9]) == tokens


def test_is_whitespace():
  for char in (" ", "\t", "\r", "\n", "\u00A0"):
    assert tokenization._is_whitespace(char), repr(char)  # pylint: disable=protected-access
  for char in ("A", "-"):
    assert not tokenization._is_whitespace(char), repr(char)  # pylint: disable=protected-access


def test_is_control():
  assert tokenization._is_control("\u0005")  # pylint: disable=protected-access
  for char in ("A", " ", "\t", "\r", "\U0001F4A9"):
    assert not tokenization._is_control(char), repr(char)  # pylint: disable=protected-access


def test_is_punctuation():
  for char in ("-", "$", "`", "."):
    assert tokenization._is_punctuation(char), repr(char)  # pylint: disable=protected-access
  for char in ("A", " "):
    assert not tokenization._is_punctuation(char), repr(char)  # pylint: disable=protected-access


def test_from_hub_module_reads_the_modules_tokenization_info(tmp_path):
  from tests.helpers.hub_module import write_official_tf1_hub_module  # pylint: disable=g-import-not-at-top
  from tests.helpers.text import make_tiny_spm_model  # pylint: disable=g-import-not-at-top
  from tests.helpers.tiny_config import tiny_config_dict  # pylint: disable=g-import-not-at-top
  spm = make_tiny_spm_model(str(tmp_path), name="30k-clean")
  module = write_official_tf1_hub_module(str(tmp_path / "module"), tiny_config_dict(), spm,
                                         do_lower_case=False)
  tokenizer = tokenization.FullTokenizer.from_hub_module(module)
  direct = tokenization.FullTokenizer(None, do_lower_case=False, spm_model_file=spm)
  assert tokenizer.do_lower_case is False
  assert tokenizer.tokenize("Hello World") == direct.tokenize("Hello World")
  with pytest.raises(AlbertError, match="URLs are not fetched"):
    tokenization.FullTokenizer.from_hub_module("https://tfhub.dev/google/albert_base/3")
