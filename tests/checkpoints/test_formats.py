"""albert_tf.checkpoints.formats: which format a path is (`detect`), the TF-Hub module and the
official tarball directories read back, and the one-line errors of what is not there.

Every kind x every format, round trip: test_kind_format_round_trip.py."""

import json
import os

import numpy as np
import pytest

from albert_tf import models
from albert_tf.common import kinds
from albert_tf.checkpoints import conversion
from albert_tf.checkpoints import formats
from albert_tf.checkpoints import official_names
from albert_tf.checkpoints import tf1
from albert_tf.errors import AlbertError
from tests.helpers.hub_module import write_official_tf1_hub_module
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_albert_config

_NUM_LABELS = {kinds.CLASSIFIER: 3}


def _model(kind, seed):
  model = models.build(kind, tiny_albert_config(), _NUM_LABELS.get(kind))
  rng = np.random.default_rng(seed)
  for weight in model.weights:  # away from the initial values, so a missed weight shows
    weight.assign(rng.normal(0, 0.05, weight.shape).astype(np.float32))
  return model


def _values(model):
  """{official name: value} of every weight of the model."""
  named = official_names.model_variable_map(model)
  assert len(named) == len(model.weights)
  return {name: variable.numpy() for name, variable in named.items()}


def test_detect_names_a_missing_checkpoint(tmp_path):
  with pytest.raises(AlbertError, match="--init_checkpoint .*no checkpoint there"):
    formats.detect(str(tmp_path / "nothing"), "--init_checkpoint")


def test_directory_formats(tmp_path):
  hf_dir = tmp_path / "hf"
  hf_dir.mkdir()
  (hf_dir / "config.json").write_text(json.dumps({"model_type": "albert"}))
  module = tmp_path / "module"
  module.mkdir()
  (module / "saved_model.pb").write_bytes(b"")
  assert formats.directory_format(str(hf_dir)) == formats.HF
  assert formats.directory_format(str(module)) == formats.HUB_MODULE
  assert formats.directory_format(str(module), hub_modules=False) is None
  assert formats.directory_format(str(tmp_path / "x.ckpt")) is None
  assert isinstance(formats.detect(str(module)), formats.HubModuleFormat)
  with pytest.raises(AlbertError, match="export_savedmodel.py"):
    formats.adapter_class(formats.HUB_MODULE).save(None, str(module))


@pytest.mark.parametrize("kind", (kinds.PRETRAINER, kinds.ENCODER))
def test_official_hub_module_reads_back(tmp_path, kind):
  """A TF-Hub module (read only): the official TF1 layout, written from a pretrainer."""
  model = _model(kinds.PRETRAINER, seed=11)
  directory = write_official_tf1_hub_module(
      str(tmp_path / "module"), tiny_albert_config().to_dict(),
      make_tiny_spm_model(str(tmp_path)), weights=model)
  source = formats.detect(directory)
  assert source.name == formats.HUB_MODULE
  assert source.config().to_dict() == tiny_albert_config().to_dict()
  assert source.kind() == (kinds.PRETRAINER, None)
  fresh = models.build(kind, source.config())
  source.load_into(fresh)
  expected = _values(model if kind == kinds.PRETRAINER else model.encoder)
  after = _values(fresh)
  assert sorted(after) == sorted(expected)
  for name, value in expected.items():
    np.testing.assert_allclose(after[name], value, err_msg=name)


# ------------------------------------------------------------------------ official tarballs
def _tarball(directory, model, config=None):
  """An official v2 tarball directory, untarred: albert_config.json, model.ckpt-best.{index,
  data-00000-of-00001} (TF1 names) and 30k-clean.{model,vocab}; nothing else."""
  directory.mkdir()
  (directory / formats.CONFIG_FILE).write_text((config or tiny_albert_config()).to_json_string())
  if model is not None:
    tf1.save_tf1_checkpoint(model, str(directory / "model.ckpt-best"), update_state=False)
  make_tiny_spm_model(str(directory), name="30k-clean")
  return str(directory)


def test_official_v2_tarball_reads_back(tmp_path):
  model = _model(kinds.PRETRAINER, seed=5)
  directory = _tarball(tmp_path / "albert_base", model)
  assert sorted(os.listdir(directory)) == [
      "30k-clean.model", "30k-clean.vocab", "albert_config.json",
      "model.ckpt-best.data-00000-of-00001", "model.ckpt-best.index"]
  source = formats.detect(directory)
  assert isinstance(source, formats.TarballFormat) and source.name == formats.TARBALL
  assert source.path == os.path.join(directory, "model.ckpt-best")
  assert source.config().to_dict() == tiny_albert_config().to_dict()
  assert source.kind() == (kinds.PRETRAINER, None)
  assert source.spm_model_file() == os.path.join(directory, "30k-clean.model")
  fresh = models.build(kinds.PRETRAINER, source.config())
  report = source.load_into(fresh)
  assert not report.missing and not report.unexpected
  expected, after = _values(model), _values(fresh)
  for name, value in expected.items():
    np.testing.assert_array_equal(after[name], value, err_msg=name)
  with pytest.raises(AlbertError, match="read only"):
    source.save(model, directory)


def test_official_v1_tarball_reads_back(tmp_path):
  """v1 tarballs hold a TF1 TF-Hub module (variables/variables with the official names) with
  albert_config.json and 30k-clean.* beside it: read as a tarball, from its top-level config."""
  model = _model(kinds.PRETRAINER, seed=13)
  directory = tmp_path / "albert_base"
  write_official_tf1_hub_module(str(directory), tiny_albert_config().to_dict(),
                                make_tiny_spm_model(str(tmp_path)), weights=model)
  (directory / formats.CONFIG_FILE).write_text(tiny_albert_config().to_json_string())
  make_tiny_spm_model(str(directory), name="30k-clean")
  assert os.path.exists(directory / "saved_model.pb")
  assert os.path.exists(directory / "variables" / "variables.index")
  source = formats.detect(str(directory))
  assert source.name == formats.TARBALL
  assert source.path == os.path.join(str(directory), "variables", "variables")
  assert source.kind() == (kinds.PRETRAINER, None)
  fresh = models.build(kinds.ENCODER, source.config())
  source.load_into(fresh)
  expected, after = _values(model.encoder), _values(fresh)
  assert sorted(after) == sorted(expected)
  for name, value in expected.items():
    np.testing.assert_array_equal(after[name], value, err_msg=name)


def test_tarball_without_checkpoint_names_the_files(tmp_path):
  directory = _tarball(tmp_path / "albert_base", None)
  with pytest.raises(AlbertError) as error:
    formats.detect(directory, "--init_checkpoint")
  message = str(error.value)
  assert "\n" not in message
  assert message.startswith(f"--init_checkpoint {directory}: has albert_config.json but no "
                            "checkpoint")
  assert "model.ckpt-best.index or variables/variables.index" in message


@pytest.mark.parametrize("written, config, match", [
    # a shape differs: the vocabulary
    ({}, {"vocab_size": 500}, "bert/embeddings/word_embeddings has shape"),
    # the config has a second group the checkpoint lacks
    ({}, {"num_hidden_groups": 2}, "checkpoint lacks 16 variables"),
    # the checkpoint has a second group the config has no place for
    ({"num_hidden_groups": 2}, {}, "holds 16 encoder variables this config has no place for"),
])
def test_tarball_checkpoint_not_matching_its_config(tmp_path, written, config, match):
  model = models.build(kinds.PRETRAINER, tiny_albert_config(**written))
  directory = _tarball(tmp_path / "albert_base", model, tiny_albert_config(**config))
  source = formats.detect(directory)
  with pytest.raises(AlbertError, match=match) as error:
    source.load_into(models.build(kinds.PRETRAINER, source.config()))
  message = str(error.value)
  assert "\n" not in message
  assert message.startswith(f"{os.path.join(directory, 'albert_config.json')} does not match "
                            "the checkpoint beside it: ")


def test_a_run_directory_is_not_a_tarball(tmp_path):
  """A run's output directory (albert_config.json, our checkpoints and their state file) is read
  through its latest checkpoint, as before."""
  directory = tmp_path / "run"
  directory.mkdir()
  (directory / formats.CONFIG_FILE).write_text(tiny_albert_config().to_json_string())
  formats.adapter_class(formats.TF2).save(_model(kinds.ENCODER, seed=2),
                                          str(directory / "ckpt-1"))
  assert not formats.is_tarball_directory(str(directory))
  assert formats.detect(str(directory)).name == formats.TF2


def test_tarball_converts_with_its_own_config(tmp_path, capsys):
  """The converter reads an official tarball directory whole: its config, its weights."""
  model = _model(kinds.PRETRAINER, seed=7)
  directory = _tarball(tmp_path / "albert_base", model)
  output = str(tmp_path / "tf2" / "ckpt")
  assert conversion.convert(None, directory, output) == "tarball_to_tf2"
  assert "(pretrainer)" in capsys.readouterr().out
  source = formats.detect(output)
  assert source.name == formats.TF2
  fresh = models.build(kinds.PRETRAINER, tiny_albert_config())
  source.load_into(fresh)
  expected, after = _values(model), _values(fresh)
  for name, value in expected.items():
    np.testing.assert_array_equal(after[name], value, err_msg=name)
