"""The vocabulary record beside pretraining records (vocab_record): where it is, what it holds,
and the one-line errors of records that disagree."""

import json

import pytest

from albert_tf.data.pretraining import vocab_record
from albert_tf.errors import AlbertError
from albert_tf.text import tokenization
from tests.helpers import text as text_helpers


def test_record_path_of_files_and_shards():
  assert vocab_record.record_path("out/train.tfrecord") == "out/train.tfrecord.vocab.json"
  assert vocab_record.record_path("out/train-00003-of-00004") == "out/train.vocab.json"


def test_written_record_names_the_model_and_is_checked(tmp_path):
  spm_model = text_helpers.make_tiny_spm_model(tmp_path / "spm")
  records = [str(tmp_path / f"train-0000{i}-of-00002") for i in range(2)]
  assert vocab_record.write(records, spm_model_file=spm_model) == [
      str(tmp_path / "train.vocab.json")]
  path, record = vocab_record.read(records)
  tokenizer = tokenization.FullTokenizer(spm_model_file=spm_model)
  assert path == str(tmp_path / "train.vocab.json")
  assert record["pieces"] == len(tokenizer.vocab) and record["path"] == spm_model
  vocab_record.check_tokenizer((path, record), tokenizer, "x")  # its own model: no error
  # Records without a record (the official tool's): None.
  assert vocab_record.read([str(tmp_path / "official.tfrecord")]) is None
  # Records of two vocabularies in one --input_file: one line naming both.
  other = dict(record, pieces_sha1="0" * 40, path="/elsewhere/other.model")
  (tmp_path / "more.tfrecord.vocab.json").write_text(json.dumps(other))
  with pytest.raises(AlbertError, match=r"^--input_file: the records mix vocabularies: .*"
                     r"train\.vocab\.json names .*tiny_spm\.model, .*more\.tfrecord\.vocab\.json "
                     r"names /elsewhere/other\.model"):
    vocab_record.read(records + [str(tmp_path / "more.tfrecord")])
  # A record that is not one: named.
  (tmp_path / "bad.tfrecord.vocab.json").write_text("{")
  with pytest.raises(AlbertError, match=r"bad\.tfrecord\.vocab\.json: not a vocabulary record"):
    vocab_record.read([str(tmp_path / "bad.tfrecord")])
