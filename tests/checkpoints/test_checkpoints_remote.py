"""Checkpoints on a tf.io.gfile URL: an official tarball directory, our TF2 checkpoint directory,
an HF directory and a TF1 TF-Hub module, copied to ram:// (TensorFlow's in-memory filesystem,
standing in for gs://), load through albert_tf.from_pretrained with the same weights as from the
local copy (and supply the config and SentencePiece model as --init_checkpoint); the converter
and export_checkpoints.py's library read and write there; a missing or broken checkpoint there is
the same one-line AlbertError as locally.

Where ram:// differs from Cloud Storage: ram:// calls `run/ckpt-1` a directory once
`run/ckpt-1.index` exists, so TensorFlow's own tf.train.load_checkpoint(prefix) fails there
(it does not on gs://); integrity.checkpoint_reader reads the prefix on both.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import albert_tf
from albert_tf.checkpoints import clean_checkpoint, conversion, integrity, tf1
from albert_tf.checkpoints.hf.tensors import read_hf_tensors
from albert_tf.checkpoints.model_source import resolve_model_source
from albert_tf.common import fileio
from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.models.pretrainer import AlbertPretrainer
from tests.helpers.hub_module import write_official_tf1_hub_module
from tests.helpers.model_dirs import HF, TARBALL, TF2, write_model_directories
from tests.helpers.paths import REPO_ROOT
from tests.helpers.remote import copied_to_ram, ram_bucket
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_config_dict

# Another size than the tiny defaults, so a config read from anywhere else shows.
_CONFIG = dict(num_hidden_layers=3, intermediate_size=48)


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
  """{"tarball", "tf2", "hf", "hub": local directory} and "spm"."""
  root = tmp_path_factory.mktemp("model_dirs")
  spm = make_tiny_spm_model(str(root / "build"))
  dirs = write_model_directories(root, spm, **_CONFIG)
  pretrainer = AlbertPretrainer(AlbertConfig.from_dict(tiny_config_dict(**_CONFIG)))
  rng = np.random.default_rng(5)
  ids = np.array([[2, 10, 11, 3, 0]], np.int32)
  pretrainer(dict(input_ids=ids, input_mask=(ids > 0).astype(np.int32), segment_ids=0 * ids,
                  masked_lm_positions=np.array([[1]], np.int32)), training=False)
  for variable in pretrainer.weights:
    variable.assign(rng.normal(0, 0.2, variable.shape))
  dirs["hub"] = write_official_tf1_hub_module(str(root / "tf1_module"),
                                              tiny_config_dict(**_CONFIG), spm,
                                              weights=pretrainer, do_lower_case=True)
  return dict(dirs, spm=spm)


def _weights(pretrained):
  return {v.name: v.numpy() for v in pretrained.model.weights}


@pytest.mark.parametrize("kind", [TARBALL, TF2, HF, "hub"])
def test_from_pretrained_on_ram_equals_the_local_load(model_dirs, kind):
  local = albert_tf.from_pretrained(model_dirs[kind])
  remote_dir = copied_to_ram(model_dirs[kind])
  remote = albert_tf.from_pretrained(remote_dir)
  assert remote.model_type == local.model_type == "pretrainer"
  assert remote.config == local.config and remote.config.num_hidden_layers == 3
  assert remote.tokenizer.spm_model_file.startswith(remote_dir)  # read from the bucket
  assert remote.tokenizer.tokenize("hello world") == local.tokenizer.tokenize("hello world")
  local_weights, remote_weights = _weights(local), _weights(remote)
  assert sorted(remote_weights) == sorted(local_weights)
  for name, value in local_weights.items():
    np.testing.assert_array_equal(remote_weights[name], value, err_msg=name)
  # Not the initializer's: the weights were read (the model is built the same both times).
  assert any(np.abs(value).max() > 0.3 for value in local_weights.values())


@pytest.mark.parametrize("kind,spm_name", [(TARBALL, "30k-clean.model"),
                                           (TF2, "30k-clean.model"), (HF, "spiece.model")])
def test_a_model_directory_on_ram_supplies_config_and_sentencepiece(model_dirs, kind, spm_name):
  remote = copied_to_ram(model_dirs[kind])
  source = resolve_model_source(init_checkpoint=remote)
  assert source.config.num_hidden_layers == 3 and source.config.intermediate_size == 48
  assert source.spm_model_file == f"{remote}/{spm_name}" and source.init_checkpoint == remote


def test_a_checkpoint_prefix_on_ram_reads_where_load_checkpoint_fails(model_dirs):
  remote_dir = copied_to_ram(model_dirs[TF2])
  prefix = f"{remote_dir}/ckpt-1"
  assert tf.io.gfile.isdir(prefix)  # the ram:// quirk (Cloud Storage says False)
  assert not fileio.isdir(prefix)
  with pytest.raises(ValueError):
    tf.train.load_checkpoint(prefix)
  local = integrity.checkpoint_reader(os.path.join(model_dirs[TF2], "ckpt-1"))
  for path in (prefix, remote_dir):  # a prefix, or a directory: its newest checkpoint
    reader = integrity.checkpoint_reader(path)
    assert reader.get_variable_to_shape_map() == local.get_variable_to_shape_map()
  assert tf1.resolve_checkpoint_path(remote_dir) == prefix
  assert integrity.checkpoint_problem(prefix) is None


@pytest.mark.parametrize("name", ["g2_zip", "g2_legacy", "g2_sharded"])
def test_hf_torch_weights_on_ram_equal_the_local_read(name):
  local = os.path.join(REPO_ROOT, "tests", "fixtures", "hf_torch", name)
  remote = read_hf_tensors(copied_to_ram(local))
  expected = read_hf_tensors(local)
  assert sorted(remote) == sorted(expected)
  for key, value in expected.items():
    np.testing.assert_array_equal(remote[key], value, err_msg=key)


def test_hf_h5_weights_on_ram_equal_the_local_read():
  local = os.path.join(REPO_ROOT, "tests", "fixtures", "hf_h5", "g1")
  remote = read_hf_tensors(copied_to_ram(local))
  expected = read_hf_tensors(local)
  assert sorted(remote) == sorted(expected) and expected
  for key, value in expected.items():
    np.testing.assert_array_equal(remote[key], value, err_msg=key)


def _one_line(fn, *args):
  with pytest.raises(AlbertError) as info:
    fn(*args)
  message = str(info.value)
  assert "\n" not in message, message
  return message


def test_missing_checkpoint_on_ram_is_one_line_as_locally(tmp_path):
  bucket = ram_bucket()
  fileio.makedirs(f"{bucket}/empty")
  os.makedirs(tmp_path / "empty")
  for root in (bucket, str(tmp_path)):
    assert _one_line(albert_tf.from_pretrained, f"{root}/empty") == (
        f"checkpoint {root}/empty: directory holds no checkpoint")
    assert _one_line(albert_tf.from_pretrained, f"{root}/model.ckpt-7") == (
        f"checkpoint {root}/model.ckpt-7: no checkpoint there (expected "
        f"{root}/model.ckpt-7.index)")
    assert _one_line(integrity.checkpoint_reader, f"{root}/model.ckpt-7", "--init_checkpoint") == (
        f"--init_checkpoint {root}/model.ckpt-7: no checkpoint there (expected "
        f"{root}/model.ckpt-7.index)")


# A file replaced by a wrong one: (kind of directory, file, its new bytes, how the one-line
# error of from_pretrained starts; for a checkpoint, integrity.checkpoint_reader's too).
_WRONG_FILES = {
    "checkpoint index": (TF2, "ckpt-1.index", b"not an index",
                         "checkpoint {d}/ckpt-1: unreadable ("),
    "config": (TARBALL, "albert_config.json", b"\x80\x81 a checkpoint?",
               "{d}/albert_config.json: not a UTF-8 text file (byte 0); expected an "
               "albert_config.json (was a checkpoint or model file given?)"),
}


@pytest.mark.parametrize("what", sorted(_WRONG_FILES))
def test_a_wrong_file_on_ram_is_one_line_as_locally(model_dirs, tmp_path, what):
  kind, name, data, expected = _WRONG_FILES[what]
  local = str(tmp_path / kind)
  fileio.copytree(model_dirs[kind], local)
  for directory in (local, copied_to_ram(model_dirs[kind])):
    fileio.write_bytes(f"{directory}/{name}", data)
    message = _one_line(albert_tf.from_pretrained, directory)
    assert message.startswith(expected.format(d=directory)), message
    if name.endswith(".index"):
      assert _one_line(integrity.checkpoint_reader, f"{directory}/ckpt-1").startswith(
          expected.format(d=directory))


@pytest.mark.parametrize("output_format", ["tf1", "tf2", "hf"])
def test_convert_from_and_to_ram_equals_the_local_conversion(model_dirs, tmp_path, output_format):
  """The converter (and export_checkpoints.py's library) read a tarball on ram:// and write
  there: the output loads with the local conversion's weights."""
  names = {"tf1": "out/model.ckpt", "tf2": "out/ckpt-1", "hf": "out"}
  source = copied_to_ram(model_dirs[TARBALL])
  outputs = (str(tmp_path / names[output_format]), f"{ram_bucket()}/{names[output_format]}")
  for checkpoint, output in zip((model_dirs[TARBALL], source), outputs):
    conversion.convert(None, checkpoint, output, output_format=output_format)
  local, remote = (albert_tf.from_pretrained(path) for path in outputs)
  assert remote.config == local.config and remote.tokenizer.spm_model_file.startswith("ram://")
  local_weights, remote_weights = _weights(local), _weights(remote)
  assert sorted(remote_weights) == sorted(local_weights)
  for name, value in local_weights.items():
    np.testing.assert_array_equal(remote_weights[name], value, err_msg=name)


def test_export_checkpoint_from_and_to_ram(model_dirs, tmp_path):
  source = copied_to_ram(model_dirs[TF2])
  config = clean_checkpoint.read_config(source)
  outputs = (str(tmp_path / "model.ckpt"), f"{ram_bucket()}/export/model.ckpt")
  for checkpoint, output in zip((model_dirs[TF2], source), outputs):
    prefix, with_heads, _ = clean_checkpoint.export_checkpoint(config, checkpoint, output)
    assert prefix == output and with_heads
  local, remote = (integrity.checkpoint_reader(path) for path in outputs)
  assert remote.get_variable_to_shape_map() == local.get_variable_to_shape_map()
  for name in local.get_variable_to_shape_map():
    np.testing.assert_array_equal(remote.get_tensor(name), local.get_tensor(name), err_msg=name)
