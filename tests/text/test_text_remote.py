"""Vocabularies and SentencePiece models on a tf.io.gfile URL (ram://, TensorFlow's in-memory
filesystem, standing in for gs://): the tokenizers read them as the local copies, train_spm
trains from and into a URL, and a missing or wrong file is the same one-line error as locally."""

import os

import pytest
from sentencepiece import sentencepiece_model_pb2

from albert_tf.common import fileio
from albert_tf.errors import AlbertError
from albert_tf.text.sentencepiece_training import train_sentencepiece
from albert_tf.text.tokenization import FullTokenizer
from tests.helpers.paths import FIXTURES_DIR
from tests.helpers.remote import copied_to_ram, ram_bucket
from tests.helpers.text import VARIED_TEXTS

WORDPIECE_VOCAB = os.path.join(FIXTURES_DIR, "official_nsp", "vocab.txt")


def _ids(tokenizer):
  return [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)) for text in VARIED_TEXTS]


def test_sentencepiece_model_on_ram_gives_the_local_ids(spm_model):
  local = FullTokenizer(spm_model_file=spm_model)
  remote = FullTokenizer(spm_model_file=copied_to_ram(spm_model))
  assert remote.vocab == local.vocab and len(local.vocab) > 100
  assert _ids(remote) == _ids(local) and any(_ids(local))


def test_wordpiece_vocab_on_ram_gives_the_local_ids():
  local = FullTokenizer(vocab_file=WORDPIECE_VOCAB)
  remote = FullTokenizer(vocab_file=copied_to_ram(WORDPIECE_VOCAB))
  assert remote.vocab == local.vocab and len(local.vocab) > 10
  assert _ids(remote) == _ids(local) and any(_ids(local))


def _message(**kwargs):
  with pytest.raises(AlbertError) as info:
    FullTokenizer(**kwargs)
  return str(info.value)


def test_missing_or_wrong_vocabulary_on_ram_is_the_local_one_line(tmp_path, spm_model):
  bucket = ram_bucket()
  fileio.makedirs(bucket)
  line_numbers = []
  for root in (bucket, str(tmp_path)):
    assert _message(spm_model_file=f"{root}/30k-clean.model") == (
        f"cannot read --spm_model_file {root}/30k-clean.model: No such file or directory")
    assert _message(vocab_file=f"{root}/vocab.txt") == (
        f"cannot read vocabulary file {root}/vocab.txt: No such file or directory")
    wrong = f"{root}/albert_config.json"  # a config given as the model
    fileio.write_text(wrong, '{"hidden_size": 768}\n')
    assert _message(spm_model_file=wrong) == (
        f"--spm_model_file {wrong} is not a SentencePiece model")
    fileio.write_bytes(f"{root}/spm.vocab", fileio.read_bytes(spm_model))  # a model as vocab
    assert _message(vocab_file=f"{root}/spm.vocab") == (
        f"--vocab_file {root}/spm.vocab is a SentencePiece model, not a vocabulary file: pass "
        "it as --spm_model_file")
    fileio.write_bytes(f"{root}/latin1.txt", b"[UNK]\n[CLS]\ncaf\xe9\n")
    message = _message(vocab_file=f"{root}/latin1.txt")
    line_numbers.append(message.split(":")[-2])
    assert message == f"{root}/latin1.txt:3: vocabulary line is not valid UTF-8"
  assert line_numbers[0] == line_numbers[1]


def test_train_spm_from_and_into_ram_writes_the_local_model(tmp_path):
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("the cat sat on the mat\nthe dog ate the bone\n\nrain fell all day\n" * 40)
  remote_corpus = copied_to_ram(str(corpus))
  local_prefix = str(tmp_path / "spm" / "30k-clean")
  remote_prefix = f"{ram_bucket()}/spm/30k-clean"
  local_model = train_sentencepiece([str(corpus)], local_prefix, vocab_size=60)
  remote_model = train_sentencepiece([remote_corpus], remote_prefix, vocab_size=60)
  assert remote_model == remote_prefix + ".model"
  assert fileio.listdir(f"{remote_prefix[:-len('/30k-clean')]}") == [
      "30k-clean.model", "30k-clean.vocab"]  # and no temporary left
  assert fileio.read_bytes(remote_prefix + ".vocab") == fileio.read_bytes(local_prefix + ".vocab")
  # The model records the user's input and prefix; with the local ones it is the local model.
  proto = sentencepiece_model_pb2.ModelProto()
  proto.ParseFromString(fileio.read_bytes(remote_model))
  assert list(proto.trainer_spec.input) == [remote_corpus]
  assert proto.trainer_spec.model_prefix == remote_prefix
  proto.trainer_spec.model_prefix = local_prefix
  proto.trainer_spec.input[:] = [str(corpus)]
  assert proto.SerializeToString() == fileio.read_bytes(local_model)
  assert len(proto.pieces) > 20
  remote = FullTokenizer(spm_model_file=remote_model)
  assert remote.tokenize("the cat ate") == FullTokenizer(spm_model_file=local_model).tokenize(
      "the cat ate")


def test_train_spm_missing_input_on_ram_is_the_local_one_line(tmp_path):
  for root in (ram_bucket(), str(tmp_path)):
    with pytest.raises(AlbertError) as info:
      train_sentencepiece([f"{root}/corpus.txt"], f"{root}/m", vocab_size=50)
    assert str(info.value) == (
        f"train_sentencepiece: input file {root}/corpus.txt does not exist")
