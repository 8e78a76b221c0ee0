"""albert_tf.checkpoints.formats: every kind x every format we write, round trip.

A model of each kind (albert_tf.kinds) with non-initial weights is saved in each format, the
path is detected back as that format, its kind (and a classifier's classes) read from the files,
and a fresh model of that kind loaded from it holds the same weights."""

import json

import numpy as np
import pytest

from albert_tf import kinds, models
from albert_tf.checkpoints import formats
from albert_tf.checkpoints import official_names
from albert_tf.errors import AlbertError
from tests.helpers.tiny_config import tiny_albert_config

_WRITTEN = (formats.TF1, formats.TF2, formats.HF)
_NUM_LABELS = {kinds.CLASSIFIER: 3}


def _model(kind, seed):
  model = models.build(kind, tiny_albert_config(), _NUM_LABELS.get(kind))
  rng = np.random.default_rng(seed)
  for weight in model.weights:  # away from the initial values, so a missed weight shows
    weight.assign(rng.normal(0, 0.05, weight.shape).astype(np.float32))
  return model


def _save(tmp_path, kind, fmt):
  model = _model(kind, seed=len(kind) * 7 + len(fmt))
  if fmt == formats.HF:
    path = str(tmp_path / "hf")
  else:
    (tmp_path / fmt).mkdir()
    path = str(tmp_path / fmt / "model.ckpt")
    (tmp_path / fmt / formats.CONFIG_FILE).write_text(tiny_albert_config().to_json_string())
  formats.adapter_class(fmt).save(model, path)
  return model, path


def _values(model):
  """{official name: value} of every weight of the model."""
  named = official_names.model_variable_map(model)
  assert len(named) == len(model.weights)
  return {name: variable.numpy() for name, variable in named.items()}


@pytest.mark.parametrize("fmt", _WRITTEN)
@pytest.mark.parametrize("kind", kinds.KINDS)
def test_round_trip(tmp_path, kind, fmt):
  model, path = _save(tmp_path, kind, fmt)
  source = formats.detect(path)
  assert source.name == fmt
  assert source.config().to_dict() == tiny_albert_config().to_dict()
  if fmt == formats.HF and kind == kinds.SQUAD_V2:
    # HF ALBERT has no SQuAD v2.0 head: the encoder is written as an AlbertModel.
    assert source.kind() == (kinds.ENCODER, None)
    return
  one_row = kind in (kinds.REGRESSION, kinds.MULTIPLE_CHOICE) and fmt == formats.TF1
  if one_row:  # the official one-row `output_weights` cannot tell these two apart
    with pytest.raises(AlbertError, match="model_type=regression or"):
      source.kind()
  found = source.kind(kind if one_row else None)
  assert found == (kind, {kinds.CLASSIFIER: 3, kinds.REGRESSION: 1}.get(kind))
  fresh = models.build(kind, source.config(), found[1])
  source.load_into(fresh)
  before, after = _values(model), _values(fresh)
  assert sorted(before) == sorted(after)
  if fmt == formats.HF and kind == kinds.SQUAD_V1:
    # HF AlbertForQuestionAnswering has no pooler (SQuAD never reads it): it stays fresh.
    before = {n: v for n, v in before.items() if not n.startswith("bert/pooler/")}
  for name, value in before.items():
    np.testing.assert_array_equal(after[name], value, err_msg=name)


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
  # (imported here: the official module writer builds a TF1 graph, which only this test needs)
  from tests.helpers.hub_module import write_official_tf1_hub_module  # pylint: disable=g-import-not-at-top
  from tests.helpers.text import make_tiny_spm_model  # pylint: disable=g-import-not-at-top
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
