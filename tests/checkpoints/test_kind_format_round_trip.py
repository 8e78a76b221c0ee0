"""Every model kind (albert_tf.common.kinds.KINDS) x every checkpoint format, through `detect`.

For each format that saves (TF1, TF2, HF) and the official tarball layout (read only; written
here with the TF1 writer as the official release lays it out), a model of each kind with
non-initial weights is written, the path is detected back as that format, its config and kind
(a classifier's classes) read from the files, and a fresh model of that kind (built from the
detected config, `models.build`) loaded from it holds the same weights and gives the same outputs
on one input.

What a format cannot hold is an explicit error, tested here: HF ALBERT has no SQuAD v2.0 head
(the encoder is written alone and reads back as the encoder; loading the head is refused); the
official one-row `output_weights` cannot tell a regression classifier from a multiple-choice
scorer (kind() asks for --model_type); TF-Hub modules and tarballs are never written. TF-Hub
modules hold the encoder with the pretraining heads only: their read back is in test_formats.py.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import models
from albert_tf.common import kinds
from albert_tf.checkpoints import formats
from albert_tf.checkpoints import official_names
from albert_tf.checkpoints import tf1
from albert_tf.errors import AlbertError
from tests.helpers.model_inputs import random_features
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_albert_config

_FORMATS = (formats.TF1, formats.TF2, formats.HF, formats.TARBALL)
_READ_ONLY = (formats.HUB_MODULE, formats.TARBALL)
_NUM_LABELS = {kinds.CLASSIFIER: 3, kinds.TOKEN_CLASSIFIER: 5}
_CLASSES = {kinds.CLASSIFIER: 3, kinds.REGRESSION: 1, kinds.TOKEN_CLASSIFIER: 5}
_NUM_CHOICES = 4  # AlbertMultipleChoice's default
_BATCH, _SEQ = 2, 8


def _inputs(kind):
  """One batch the model of `kind` reads."""
  features = random_features(_BATCH, _SEQ, seed=3, vocab_size=tiny_albert_config().vocab_size,
                             extra_dims=(_NUM_CHOICES,) if kind == kinds.MULTIPLE_CHOICE else ())
  if kind == kinds.PRETRAINER:
    features["masked_lm_positions"] = tf.constant([[1, 2, 4], [0, 3, 5]], tf.int32)
  if kind == kinds.SQUAD_V2:
    p_mask = np.zeros([_BATCH, _SEQ], np.float32)
    p_mask[:, _SEQ - 3:] = 1.0  # padding cannot be in an answer
    features["p_mask"] = tf.constant(p_mask)
  return features


def _outputs(model, kind):
  return [np.asarray(t) for t in tf.nest.flatten(model(_inputs(kind), training=False))]


@pytest.fixture(scope="module")
def saved_models():
  """{kind: (model with non-initial weights, its outputs on _inputs(kind))}, built once."""
  built = {}
  for i, kind in enumerate(kinds.KINDS):
    model = models.build(kind, tiny_albert_config(), _NUM_LABELS.get(kind))
    rng = np.random.default_rng(100 + i)
    for weight in model.weights:  # away from the initial values, so a missed weight shows
      weight.assign(rng.normal(0, 0.05, weight.shape).astype(np.float32))
    built[kind] = (model, _outputs(model, kind))
  return built


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
  """A tiny SentencePiece model named as the tarballs name theirs (30k-clean.model/.vocab)."""
  return make_tiny_spm_model(str(tmp_path_factory.mktemp("spm")), name="30k-clean")


def _write(model, fmt, directory, spm_model):
  """Writes `model` in `fmt` under `directory`; returns the path a user would pass."""
  config_json = tiny_albert_config().to_json_string()
  if fmt == formats.HF:
    formats.adapter_class(fmt).save(model, str(directory))
    return str(directory)
  directory.mkdir()
  (directory / formats.CONFIG_FILE).write_text(config_json)
  if fmt == formats.TARBALL:  # the official v2 layout: nothing but these five files
    tf1.save_tf1_checkpoint(model, str(directory / "model.ckpt-best"), update_state=False)
    for suffix in (".model", ".vocab"):
      (directory / ("30k-clean" + suffix)).write_bytes(
          open(spm_model[:-len(".model")] + suffix, "rb").read())
    assert sorted(os.listdir(directory)) == [
        "30k-clean.model", "30k-clean.vocab", formats.CONFIG_FILE,
        "model.ckpt-best.data-00000-of-00001", "model.ckpt-best.index"]
    return str(directory)
  formats.adapter_class(fmt).save(model, str(directory / "model.ckpt"))
  return str(directory / "model.ckpt")


def _values(model):
  """{official name: value} of every weight of the model."""
  named = official_names.model_variable_map(model)
  assert len(named) == len(model.weights)
  return {name: variable.numpy() for name, variable in named.items()}


@pytest.mark.parametrize("fmt", _FORMATS)
@pytest.mark.parametrize("kind", kinds.KINDS)
def test_round_trip(tmp_path, saved_models, spm_model, kind, fmt):
  model, outputs = saved_models[kind]
  path = _write(model, fmt, tmp_path / fmt, spm_model)
  source = formats.detect(path)
  assert source.name == fmt
  assert source.config().to_dict() == tiny_albert_config().to_dict()
  if fmt == formats.HF and kind == kinds.SQUAD_V2:
    return _check_hf_squad_v2(source, model)
  one_row = kind in (kinds.REGRESSION, kinds.MULTIPLE_CHOICE) and fmt in (formats.TF1,
                                                                            formats.TARBALL)
  if one_row:  # the official one-row `output_weights` cannot tell these two apart
    with pytest.raises(AlbertError, match="model_type=regression or") as error:
      source.kind()
    assert "\n" not in str(error.value)
  found = source.kind(kind if one_row else None)
  assert found == (kind, _CLASSES.get(kind))
  fresh = models.build(kind, source.config(), found[1])
  source.load_into(fresh)
  before, after = _values(model), _values(fresh)
  assert sorted(before) == sorted(after)
  if fmt == formats.HF and kind in (kinds.SQUAD_V1, kinds.TOKEN_CLASSIFIER):
    # HF AlbertForQuestionAnswering and AlbertForTokenClassification have no pooler (the models
    # never read it): it stays fresh.
    before = {n: v for n, v in before.items() if not n.startswith("bert/pooler/")}
  for name, value in before.items():
    np.testing.assert_array_equal(after[name], value, err_msg=name)
  for got, want in zip(_outputs(fresh, kind), outputs, strict=True):
    np.testing.assert_array_equal(got, want)


def _check_hf_squad_v2(source, model):
  """HF ALBERT has no SQuAD v2.0 head: the directory holds the encoder, which reads back as the
  encoder, and a SQuAD v2.0 model is refused in one line naming what HF lacks."""
  assert source.kind() == (kinds.ENCODER, None)
  with pytest.raises(AlbertError, match="HF transformers ALBERT has no squad_v2 head") as error:
    source.load_into(models.build(kinds.SQUAD_V2, source.config()))
  assert "\n" not in str(error.value)
  encoder = models.build(kinds.ENCODER, source.config())
  source.load_into(encoder)
  after, before = _values(encoder), _values(model.encoder)
  assert sorted(after) == sorted(before)
  for name, value in before.items():
    np.testing.assert_array_equal(after[name], value, err_msg=name)


@pytest.mark.parametrize("fmt", _READ_ONLY)
@pytest.mark.parametrize("kind", kinds.KINDS)
def test_read_only_formats_refuse_to_save(tmp_path, saved_models, kind, fmt):
  with pytest.raises(AlbertError, match="export_savedmodel.py|read only") as error:
    formats.adapter_class(fmt).save(saved_models[kind][0], str(tmp_path / "out"))
  assert "\n" not in str(error.value)
  assert not (tmp_path / "out").exists()
