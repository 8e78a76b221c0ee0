"""tf_model.h5 (transformers 4.x TensorFlow weights) read with h5py (albert_tf/checkpoints/
hf/tf_h5.py), against directories transformers' TF classes wrote once and their outputs
(tests/fixtures/hf_h5/, made by tests/fixtures/make_hf_other_formats.py)."""

import shutil

import h5py
import numpy as np
import pytest
from safetensors.numpy import load_file

import albert_tf
from albert_tf import AlbertError, AlbertPretrainer
from albert_tf.checkpoints.hf import tensors as hf_tensors
from albert_tf.checkpoints.hf import tf_h5 as hf_tf_h5
from albert_tf.checkpoints.hf.config import config_from_hf
from albert_tf.checkpoints.hf.heads import hf_label_names, hf_model_type
from albert_tf.checkpoints import model_source
from tests.helpers.paths import FIXTURES_DIR

H5 = FIXTURES_DIR / "hf_h5"
TOLERANCE = 1e-4
# fixture -> (safetensors source, our model type, number of labels, outputs)
FIXTURES = {
    "g1": (FIXTURES_DIR / "hf" / "hf_g1", "pretrainer", None,
           ("sequence_output", "pooled_output", "mlm_logits", "sop_logits")),
    "classifier": (FIXTURES_DIR / "hf_heads" / "hf_classifier", "classifier", 3, ("logits",)),
    "regression": (FIXTURES_DIR / "hf_heads" / "hf_regression", "regression", 1, ("logits",)),
    "multiple_choice": (FIXTURES_DIR / "hf_heads" / "hf_multiple_choice", "multiple_choice",
                        None, ("logits",)),
    "squad": (FIXTURES_DIR / "hf_heads" / "hf_squad", "squad_v1", None,
              ("start_logits", "end_logits")),
}


def _load(directory, model_type, num_labels):
  model = model_source.build_model(model_type, config_from_hf(directory), num_labels)
  labels = hf_label_names(directory) if model_type == "classifier" else None
  report = albert_tf.load_hf_checkpoint(model, directory, label_list=labels,
                                        require_head=model_type != "pretrainer")
  return model, report


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_tensors_equal_the_safetensors_source(name):
  """The Keras names renamed and kernels transposed give the source's tensors bit-equal."""
  source = FIXTURES[name][0]
  with h5py.File(H5 / name / "tf_model.h5", "r") as f:  # really transformers' Keras layout
    assert "layer_names" in f.attrs
  expected = load_file(source / "model.safetensors")
  got = hf_tensors.read_hf_tensors(H5 / name)
  assert sorted(got) == sorted(expected)
  for key, value in expected.items():
    np.testing.assert_array_equal(got[key], value, err_msg=key)
  assert hf_tensors.read_hf_tensors(H5 / name, shapes_only=True) == {
      k: v.shape for k, v in expected.items()}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_outputs_match_transformers_tf(name):
  _, model_type, num_labels, outputs = FIXTURES[name]
  assert hf_model_type(H5 / name)[0] == model_type
  model, report = _load(H5 / name, model_type, num_labels)
  assert not report.unexpected
  ref = np.load(H5 / name / "reference.npz")  # transformers' TF class on this directory
  out = model(dict(input_ids=ref["input_ids"], input_mask=ref["attention_mask"],
                   segment_ids=ref["token_type_ids"]), training=False)
  for key in outputs:
    theirs = ref[key]  # a classifier keeps HF's rows: its label_list is id2label's names
    assert np.max(np.abs(theirs)) > 0.1
    np.testing.assert_allclose(np.reshape(out[key].numpy(), theirs.shape), theirs, rtol=0,
                               atol=TOLERANCE, err_msg=key)


def _rewrite(path, edit):
  with h5py.File(path, "r+") as f:
    edit(f)


def test_mlm_bias_is_the_one_tf_adds(tmp_path):
  """TF adds predictions/decoder/bias to the logits and never reads predictions/bias."""
  directory = shutil.copytree(H5 / "g1", tmp_path / "g1")
  prefix = "predictions/tf_albert_for_pre_training/predictions/"
  _rewrite(directory / "tf_model.h5", lambda f: f[prefix + "bias:0"].__setitem__(..., 7.0))
  np.testing.assert_array_equal(hf_tensors.read_hf_tensors(directory)["predictions.bias"],
                                load_file(FIXTURES["g1"][0] / "model.safetensors")[
                                    "predictions.bias"])
  _rewrite(directory / "tf_model.h5",
           lambda f: f[prefix + "decoder/bias:0"].__setitem__(..., 3.0))
  np.testing.assert_array_equal(hf_tensors.read_hf_tensors(directory)["predictions.bias"],
                                np.full(300, 3.0, np.float32))
  model = AlbertPretrainer(config_from_hf(directory))
  report = albert_tf.load_hf_checkpoint(model, directory)
  assert not report.missing and not report.unexpected


def test_split_weight_names_attribute(tmp_path):
  """Keras splits an attribute past HDF5's header limit into weight_names0, weight_names1..."""
  directory = shutil.copytree(H5 / "squad", tmp_path / "squad")

  def split(f):
    names = f["albert"].attrs["weight_names"]
    del f["albert"].attrs["weight_names"]
    f["albert"].attrs["weight_names0"] = names[:5]
    f["albert"].attrs["weight_names1"] = names[5:]
  _rewrite(directory / "tf_model.h5", split)
  expected = hf_tensors.read_hf_tensors(H5 / "squad")
  got = hf_tensors.read_hf_tensors(directory)
  assert sorted(got) == sorted(expected)


def test_wrong_files_are_one_line_errors(tmp_path):
  directory = shutil.copytree(H5 / "squad", tmp_path / "squad")
  path = directory / "tf_model.h5"
  data = path.read_bytes()
  path.write_bytes(data[:len(data) // 2])
  with pytest.raises(AlbertError, match="cannot read as Keras HDF5 weights") as raised:
    hf_tensors.read_hf_tensors(directory)
  assert "\n" not in str(raised.value)
  with h5py.File(path, "w") as f:
    f["x"] = np.zeros(3)
  with pytest.raises(AlbertError, match="not Keras HDF5 weights .no layer_names"):
    hf_tensors.read_hf_tensors(directory)
  shutil.copy(H5 / "squad" / "tf_model.h5", path)

  def clash(f):  # a tied copy that disagrees with the original
    name = [n for n in f["albert"].attrs["weight_names"] if "word_embeddings" in str(n)][0]
    key = name.decode() if isinstance(name, bytes) else name
    f["albert"][key][0, 0] += 1.0
    f.create_group("extra")
    f["extra"][key] = np.asarray(f["albert"][key]) - 1.0
    f["extra"].attrs["weight_names"] = [key.encode()]
    f.attrs["layer_names"] = [str(n).encode() for n in f.attrs["layer_names"]] + [b"extra"]
  _rewrite(path, clash)
  with pytest.raises(AlbertError, match="differs from the weight of that name"):
    hf_tensors.read_hf_tensors(directory)
  with pytest.raises(AlbertError, match="missing.h5: cannot read"):
    hf_tf_h5.read_tf_h5(directory / "missing.h5")


def test_pytorch_bin_is_read_before_h5(tmp_path):
  directory = shutil.copytree(H5 / "classifier", tmp_path / "both")
  (directory / "pytorch_model.bin").write_bytes(b"broken")
  with pytest.raises(AlbertError, match="pytorch_model.bin: refused as a PyTorch checkpoint"):
    hf_tensors.read_hf_tensors(directory)
