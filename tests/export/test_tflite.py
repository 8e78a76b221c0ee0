"""TFLite export: the files run in the plain LiteRT interpreter and give the Keras outputs."""

import os

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter

from albert_tf import AlbertConfig, AlbertError
from albert_tf.export.tflite import write_tflite
from albert_tf.models import (AlbertClassifier, AlbertMultipleChoice, AlbertSquadModel,
                              AlbertTokenClassifier)
from tests.helpers.model_inputs import randomize_weights
from tests.helpers.tiny_config import tiny_config_dict

SEQ = 16
FP32_TOLERANCE = 1e-4


def make_model(kind):
  config = AlbertConfig.from_dict(tiny_config_dict(num_hidden_layers=2, num_hidden_groups=2))
  if kind == "classifier":
    return randomize_weights(AlbertClassifier(config, num_classes=3))
  if kind == "multiple_choice":
    return randomize_weights(AlbertMultipleChoice(config, num_choices=4))
  if kind == "token_classifier":
    return randomize_weights(AlbertTokenClassifier(config, num_classes=5))
  return randomize_weights(AlbertSquadModel(config,
                                            version_2_with_negative=kind == "squad_v2"))


def make_inputs(shape, with_p_mask, seed=1):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, 1000, size=shape).astype(np.int32)
  ids[..., 0] = 2
  mask = np.ones_like(ids)
  mask[..., 11:] = 0
  ids[..., 11:] = 0
  segments = np.zeros_like(ids)
  segments[..., 5:11] = 1
  inputs = dict(input_ids=ids, input_mask=mask, segment_ids=segments)
  if with_p_mask:
    p_mask = np.zeros_like(ids)
    p_mask[..., :5] = 1
    p_mask[..., 11:] = 1
    inputs["p_mask"] = p_mask
  return inputs


def run_tflite(path, inputs):
  runner = Interpreter(model_path=str(path)).get_signature_runner("serving_default")
  return runner(**inputs)


KINDS = ("classifier", "multiple_choice", "squad_v1", "squad_v2", "token_classifier")
LABEL_KINDS = ("classifier", "multiple_choice", "token_classifier")  # logits and probabilities


@pytest.fixture(scope="module", params=KINDS)
def exported(request, tmp_path_factory):
  kind = request.param
  model = make_model(kind)
  directory = tmp_path_factory.mktemp(kind)
  fp32 = write_tflite(model, directory / "albert_model.tflite", SEQ)
  dynamic = write_tflite(model, directory / "albert_model_dynamic.tflite", SEQ,
                         quantize="dynamic")
  shape = [1, 4, SEQ] if kind == "multiple_choice" else [1, SEQ]
  inputs = make_inputs(shape, kind == "squad_v2")
  expected = {k: v.numpy() for k, v in model(inputs, training=False).items()}
  return kind, fp32, dynamic, inputs, expected


def test_fp32_file_matches_keras(exported):
  kind, fp32, _, inputs, expected = exported
  got = run_tflite(fp32, inputs)
  assert sorted(got) == sorted(expected)
  for key, value in expected.items():
    assert got[key].shape == value.shape and got[key].dtype == value.dtype, key
    if key.endswith("_index"):
      np.testing.assert_array_equal(got[key], value, err_msg=f"{kind} {key}")
    else:
      np.testing.assert_allclose(got[key], value, rtol=0, atol=FP32_TOLERANCE,
                                 err_msg=f"{kind} {key}")
  if kind in LABEL_KINDS:
    assert np.ptp(expected["logits"]) > 0.1  # logits far apart: the tolerance bites


def test_dynamic_file_is_smaller_and_close(exported):
  kind, fp32, dynamic, inputs, expected = exported
  fp32_size, dynamic_size = os.path.getsize(fp32), os.path.getsize(dynamic)
  # int8 weights; the converter leaves tensors under 1024 elements float, many in a tiny model.
  assert dynamic_size < 0.6 * fp32_size, (fp32_size, dynamic_size)
  got = run_tflite(dynamic, inputs)
  assert sorted(got) == sorted(expected)
  if kind in LABEL_KINDS:
    np.testing.assert_allclose(got["probabilities"], expected["probabilities"], atol=0.05)
    assert got["probabilities"].argmax() == expected["probabilities"].argmax()
  elif kind == "squad_v1":
    for key in ("start_logits", "end_logits"):
      np.testing.assert_allclose(got[key], expected[key], atol=0.25, err_msg=key)
  else:
    np.testing.assert_allclose(got["cls_logits"], expected["cls_logits"], atol=0.25)
    assert got["start_top_index"][0, 0] == expected["start_top_index"][0, 0]


def test_written_atomically_and_bad_arguments_refused(tmp_path):
  model = make_model("classifier")
  path = tmp_path / "out" / "albert_model.tflite"
  path.parent.mkdir()
  path.write_bytes(b"old")
  write_tflite(model, path, 8)
  assert path.read_bytes()[4:8] == b"TFL3"  # the flatbuffer identifier
  assert os.listdir(path.parent) == ["albert_model.tflite"]  # no temp file left
  with pytest.raises(AlbertError, match="--tflite_quantize='int8' is invalid: expected one of "
                     "none, dynamic"):
    write_tflite(model, tmp_path / "x.tflite", 8, quantize="int8")
  with pytest.raises(AlbertError, match=r"max_seq_length=512 is invalid for TFLite export: "
                     r"expected an integer in \[1, 128\]"):
    write_tflite(model, tmp_path / "x.tflite", 512)
  with pytest.raises(AlbertError, match="not AlbertEncoder"):
    write_tflite(model.encoder, tmp_path / "x.tflite", 8)
  assert not (tmp_path / "x.tflite").exists()


@pytest.mark.parametrize("kind", ["classifier", "squad_v2"])
def test_dynamic_batch_file_serves_any_batch(kind, tmp_path):
  """batch_size=None: one file, shape signature -1 in the batch; each batch gives what the
  Keras model gives for it (fp32), and rows do not depend on their neighbours."""
  model = make_model(kind)
  path = write_tflite(model, tmp_path / "batched.tflite", SEQ, batch_size=None)
  interpreter = Interpreter(model_path=str(path))
  assert [list(d["shape_signature"]) for d in interpreter.get_input_details()] == [
      [-1, SEQ]] * (4 if kind == "squad_v2" else 3)
  runner = interpreter.get_signature_runner("serving_default")
  for batch in (3, 1, 5):  # shrinking and growing between calls
    inputs = make_inputs([batch, SEQ], kind == "squad_v2", seed=batch)
    inputs["input_mask"][0, 6:] = 0  # one row shorter than the others
    got = runner(**inputs)
    expected = {k: v.numpy() for k, v in model(inputs, training=False).items()}
    for key, value in expected.items():
      assert got[key].shape == value.shape, (batch, key)
      if not key.endswith("_index"):
        np.testing.assert_allclose(got[key], value, rtol=0, atol=FP32_TOLERANCE,
                                   err_msg=f"batch {batch} {key}")
    if kind == "classifier":  # batch 1 of the first row alone gives that row's answer
      alone = runner(**{k: v[:1] for k, v in inputs.items()})
      np.testing.assert_allclose(alone["probabilities"][0], got["probabilities"][0], atol=1e-6)


def test_fixed_batch_file_refuses_other_batches_and_bad_batch_size(tmp_path):
  model = make_model("classifier")
  path = write_tflite(model, tmp_path / "b2.tflite", SEQ, batch_size=2)
  interpreter = Interpreter(model_path=str(path))
  assert [list(d["shape_signature"]) for d in interpreter.get_input_details()] == [[2, SEQ]] * 3
  runner = interpreter.get_signature_runner("serving_default")
  assert runner(**make_inputs([2, SEQ], False))["probabilities"].shape == (2, 3)
  with pytest.raises(RuntimeError):
    runner(**make_inputs([3, SEQ], False))
  for bad in (0, -1, 2.0, True):
    with pytest.raises(AlbertError, match=rf"batch_size={bad!r} is invalid for TFLite export: "
                       "expected a positive integer, or None for a dynamic batch"):
      write_tflite(model, tmp_path / "x.tflite", SEQ, batch_size=bad)
