"""AlbertConfig on a tf.io.gfile URL (ram://, TensorFlow's in-memory filesystem, standing in for
gs://): read and written as locally, and a missing file is the same one-line error."""

import pytest

from albert_tf import AlbertConfig, AlbertError
from albert_tf.common import fileio
from tests.helpers.paths import CONFIG_DIR
from tests.helpers.remote import ram_bucket


def test_config_written_and_read_on_ram_as_locally(tmp_path):
  config = AlbertConfig.from_json_file(CONFIG_DIR / "albert_base_v2.json")
  config.extra["some_future_key"] = [1, 2]
  remote = f"{ram_bucket()}/run/albert_config.json"
  config.to_json_file(remote)  # its directory made as locally
  config.to_json_file(tmp_path / "albert_config.json")
  assert fileio.read_bytes(remote) == (tmp_path / "albert_config.json").read_bytes()
  read = AlbertConfig.from_json_file(remote)
  assert read == config and read.hidden_size == 768 and read.source == remote
  assert read.extra["some_future_key"] == [1, 2]


def _message(path):
  with pytest.raises(AlbertError) as info:
    AlbertConfig.from_json_file(path)
  return str(info.value)


def test_a_missing_config_on_ram_is_the_local_one_line(tmp_path):
  bucket = ram_bucket()
  fileio.makedirs(bucket)
  for root in (bucket, str(tmp_path)):
    assert _message(f"{root}/albert_config.json") == (
        f"{root}/albert_config.json: cannot read config (No such file or directory)")


def test_a_wrong_file_as_config_on_ram_is_the_local_one_line(tmp_path):
  bucket = ram_bucket()
  for root in (bucket, str(tmp_path)):
    fileio.write_bytes(f"{root}/30k-clean.model", b"\x0a\x8f\x01 a SentencePiece model")
    assert _message(f"{root}/30k-clean.model") == (
        f"{root}/30k-clean.model: not a UTF-8 text file (byte 1); expected an "
        "albert_config.json (was a checkpoint or model file given?)")
    fileio.write_text(f"{root}/list.json", "[1, 2]")
    assert _message(f"{root}/list.json") == (
        f"{root}/list.json: found a list, expected a JSON object of ALBERT config fields")
