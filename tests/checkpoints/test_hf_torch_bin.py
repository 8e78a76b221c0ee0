"""pytorch_model.bin read without torch (albert_tf/checkpoints/hf/torch_bin.py), against files
torch and transformers wrote once (tests/fixtures/hf_torch/, made by
tests/fixtures/make_hf_other_formats.py), and hostile files that must be refused unrun.

Every hostile pickle is first shown to be hostile: plain `pickle.loads` of it runs its payload
(creates the sentinel file); then our reader refuses it with one line and the sentinel stays
absent.
"""

import argparse
import io
import json
import os
import pickle
import shutil
import sys
import types
import zipfile

import numpy as np
import pytest
from safetensors.numpy import load_file

import albert_tf
from albert_tf import AlbertError, AlbertPretrainer
from albert_tf.checkpoints.hf import tensors as hf_tensors
from albert_tf.checkpoints.hf import torch_bin as hf_torch_bin
from albert_tf.checkpoints.hf.config import config_from_hf
from albert_tf.checkpoints.hf.heads import hf_label_names, hf_model_type
from albert_tf.models import AlbertClassifier, AlbertSquadModel
from tests.helpers.paths import FIXTURES_DIR

TORCH = FIXTURES_DIR / "hf_torch"
SAFETENSORS_G2 = FIXTURES_DIR / "hf" / "hf_g2"
TOLERANCE = 1e-4
G2_FIXTURES = ("g2_zip", "g2_legacy", "g2_sharded")


def _feed(ref):
  return dict(input_ids=ref["input_ids"], input_mask=ref["attention_mask"],
              segment_ids=ref["token_type_ids"])


def test_torch_is_not_importable_here():
  """The point of the reader: these tests run where torch is absent (the project's venv)."""
  with pytest.raises(ImportError):
    __import__("torch")


@pytest.mark.parametrize("name", G2_FIXTURES)
def test_tensors_equal_the_safetensors_ones(name):
  """zip, legacy and sharded files of the same weights: the same names and bit-equal arrays."""
  expected = load_file(SAFETENSORS_G2 / "model.safetensors")
  got = hf_tensors.read_hf_tensors(TORCH / name)
  for copy, original in hf_tensors.TIED.items():  # transformers 4.x pickles keep them
    np.testing.assert_array_equal(got.pop(copy), expected[original])
  assert sorted(got) == sorted(expected)
  for key, value in expected.items():
    assert got[key].dtype == np.float32, key
    np.testing.assert_array_equal(got[key], value, err_msg=key)
  shapes = hf_tensors.read_hf_tensors(TORCH / name, shapes_only=True)
  assert shapes == {k: v.shape for k, v in hf_tensors.read_hf_tensors(TORCH / name).items()}


def test_legacy_fixture_is_the_pre_zip_format_and_sharded_has_shards():
  with open(TORCH / "g2_legacy" / "pytorch_model.bin", "rb") as f:
    assert f.read(2) == b"\x80\x02"  # a pickle, not a zip
  assert zipfile.is_zipfile(TORCH / "g2_zip" / "pytorch_model.bin")
  index = json.loads((TORCH / "g2_sharded" / "pytorch_model.bin.index.json").read_text())
  assert len(set(index["weight_map"].values())) > 1
  assert not (TORCH / "g2_sharded" / "pytorch_model.bin").exists()


def pretrainer_matches(directory, ref):
  """Our AlbertPretrainer loaded from `directory` gives transformers' outputs in `ref`."""
  model = AlbertPretrainer(config_from_hf(directory))
  report = albert_tf.load_hf_checkpoint(model, directory)
  assert not report.missing and not report.unexpected
  out = model(_feed(ref), training=False)
  for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
    assert np.max(np.abs(ref[key])) > 0.5  # O(1) values: a wrong tensor would be far off
    np.testing.assert_allclose(out[key].numpy(), ref[key], rtol=0, atol=TOLERANCE, err_msg=key)
  return model


@pytest.mark.parametrize("name", G2_FIXTURES + ("g1_fp16",))
def test_pretrainer_outputs_match_transformers(name):
  """g1_fp16: transformers' outputs on this directory; g2_*: hf_g2's (the same tensors;
  transformers 4.x, which wrote them, cannot run that layout: see the maker's docstring)."""
  directory = TORCH / name
  source = directory if (directory / "reference.npz").exists() else SAFETENSORS_G2
  pretrainer_matches(directory, np.load(source / "reference.npz"))


def test_fp16_file_holds_half_precision_values():
  got = hf_tensors.read_hf_tensors(TORCH / "g1_fp16")
  expected = load_file(FIXTURES_DIR / "hf" / "hf_g1" / "model.safetensors")
  for key, value in expected.items():
    assert got[key].dtype == np.float16, key
    np.testing.assert_array_equal(got[key], value.astype(np.float16), err_msg=key)


def test_classifier_and_squad_heads():
  ref = np.load(TORCH / "classifier_zip" / "reference.npz")
  model = AlbertClassifier(config_from_hf(TORCH / "classifier_zip"), num_classes=3)
  albert_tf.load_hf_checkpoint(model, TORCH / "classifier_zip",
                               label_list=hf_label_names(TORCH / "classifier_zip"),
                               require_head=True)
  np.testing.assert_allclose(model(_feed(ref), training=False)["logits"].numpy(), ref["logits"],
                             atol=TOLERANCE)
  ref = np.load(TORCH / "squad_legacy" / "reference.npz")
  model = AlbertSquadModel(config_from_hf(TORCH / "squad_legacy"))
  albert_tf.load_hf_checkpoint(model, TORCH / "squad_legacy", require_head=True)
  out = model(_feed(ref), training=False)
  for key in ("start_logits", "end_logits"):
    np.testing.assert_allclose(out[key].numpy(), ref[key], atol=TOLERANCE)
  assert hf_model_type(TORCH / "squad_legacy") == ("squad_v1", None)


def test_safetensors_first_when_both_present(tmp_path):
  directory = shutil.copytree(TORCH / "g2_zip", tmp_path / "both")
  shutil.copy(SAFETENSORS_G2 / "model.safetensors", directory)
  assert hf_tensors.weights_file(directory) == str(directory / "model.safetensors")
  (directory / "model.safetensors").write_bytes(b"broken")  # proves which one is read
  with pytest.raises(AlbertError, match="cannot read as safetensors"):
    hf_tensors.read_hf_tensors(directory)
  os.remove(directory / "model.safetensors")
  assert hf_tensors.weights_file(directory) == str(directory / "pytorch_model.bin")


# ------------------------------------------------------------------------ hostile files


def _torch_zip(path, pickle_bytes, records=None):
  """A zip laid out as torch writes one, around the given data.pkl."""
  with zipfile.ZipFile(path, "w") as archive:
    archive.writestr("archive/data.pkl", pickle_bytes)
    archive.writestr("archive/byteorder", "little")
    for key, data in (records or {}).items():
      archive.writestr(f"archive/data/{key}", data)
    archive.writestr("archive/version", "3\n")
  return path


class _System:
  def __init__(self, command):
    self.command = command

  def __reduce__(self):
    return os.system, (self.command,)


class _Eval:
  def __init__(self, code):
    self.code = code

  def __reduce__(self):
    return eval, (self.code,)


def _hostile_payloads(sentinel):
  touch = f"open({str(sentinel)!r}, 'w').close()"
  return {
      "os.system": (pickle.dumps({"w": _System(f"touch '{sentinel}'")}, protocol=2),
                    r"asks for (posix|os)\.system"),
      "builtins.eval": (pickle.dumps({"w": _Eval(touch)}, protocol=2),
                        r"asks for (__builtin__|builtins)\.eval"),
  }


@pytest.mark.parametrize("payload", ["os.system", "builtins.eval"])
@pytest.mark.parametrize("container", ["zip", "legacy"])
def test_code_running_pickles_are_refused_unrun(tmp_path, payload, container):
  sentinel = tmp_path / "ran"
  data, message = _hostile_payloads(sentinel)[payload]
  pickle.loads(data)  # the payload is real: plain pickle runs it
  assert sentinel.exists()
  os.remove(sentinel)
  path = tmp_path / "pytorch_model.bin"
  if container == "zip":
    _torch_zip(path, data)
  else:  # the legacy layout: magic, protocol, sys_info, then the state dict
    head = b"".join(pickle.dumps(v, protocol=2) for v in (
        hf_torch_bin.LEGACY_MAGIC, hf_torch_bin.LEGACY_PROTOCOL, {"little_endian": True}))
    path.write_bytes(head + data + pickle.dumps([], protocol=2))
  with pytest.raises(AlbertError, match=message) as raised:
    hf_torch_bin.read_torch_file(path)
  assert "\n" not in str(raised.value) and str(path) in str(raised.value)
  assert "nothing in it was run" in str(raised.value)
  assert not sentinel.exists()


def test_unexpected_classes_and_opcodes_are_refused(tmp_path):
  cases = {
      # NumPy's own array reconstruction: importable and harmless-looking, still not torch's.
      "numpy": (pickle.dumps({"w": np.zeros(3, np.float32)}, protocol=2),
                r"asks for numpy\.core\.multiarray\._reconstruct|asks for numpy\._core"),
      # An instance of an unexpected class: NEWOBJ is refused before any name is looked up.
      "newobj": (pickle.dumps({"w": argparse.Namespace(a=1)}, protocol=2),
                 "uses opcode NEWOBJ"),
      # Not a dict of tensors at all.
      "list": (pickle.dumps([1, 2], protocol=2), "holds a list, expected a state dict"),
      "ints": (pickle.dumps({"w": 3}, protocol=2), "entry w is not a named tensor"),
  }
  for name, (data, message) in cases.items():
    path = _torch_zip(tmp_path / f"{name}.bin", data)
    with pytest.raises(AlbertError, match=message):
      hf_torch_bin.read_torch_file(path)


@pytest.fixture
def fake_torch(monkeypatch):
  """Importable stand-ins named like torch's, so that pickle writes torch's globals (the test
  writes hand-made torch files; the reader never imports anything)."""
  torch = types.ModuleType("torch")
  utils = types.ModuleType("torch._utils")

  for storage_name in ("FloatStorage", "LongStorage"):
    storage_type = type(storage_name, (), {})
    storage_type.__module__, storage_type.__qualname__ = "torch", storage_name
    setattr(torch, storage_name, storage_type)

  def _rebuild_tensor_v2(*args):
    return args
  _rebuild_tensor_v2.__module__ = "torch._utils"
  _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
  utils._rebuild_tensor_v2 = _rebuild_tensor_v2
  torch._utils = utils
  monkeypatch.setitem(sys.modules, "torch", torch)
  monkeypatch.setitem(sys.modules, "torch._utils", utils)
  return torch


class _TensorSpec:
  """Pickles as torch's tensor: _rebuild_tensor_v2(storage, offset, size, stride, False, {})."""

  def __init__(self, key, numel, offset, size, stride, storage_id=None,
               storage="FloatStorage"):
    self.key, self.numel, self.args = key, numel, (offset, size, stride)
    self.storage_id, self.storage = storage_id, storage

  def __reduce__(self):
    rebuild = sys.modules["torch._utils"]._rebuild_tensor_v2
    return rebuild, (_StorageRef(self), *self.args, False, {})


class _StorageRef:
  def __init__(self, spec):
    self.spec = spec


def _hand_made(path, tensors, records):
  """A torch zip whose data.pkl holds `tensors` ({name: _TensorSpec})."""
  buffer = io.BytesIO()

  class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
      if isinstance(obj, _StorageRef):
        spec = obj.spec
        if spec.storage_id is not None:
          return spec.storage_id
        return ("storage", getattr(sys.modules["torch"], spec.storage), spec.key, "cpu",
                spec.numel)
      return None
  Pickler(buffer, protocol=2).dump(tensors)
  return _torch_zip(path, buffer.getvalue(), records)


def test_hand_made_torch_file_reads_and_bad_shapes_are_refused(tmp_path, fake_torch):
  del fake_torch
  data = np.arange(6, dtype="<f4")
  good = _hand_made(tmp_path / "good.bin", {"w": _TensorSpec("0", 6, 0, (2, 3), (1, 2))},
                    {"0": data.tobytes()})
  np.testing.assert_array_equal(hf_torch_bin.read_torch_file(good)["w"],
                                data.reshape(3, 2).T)  # a transposed (strided) view
  cases = {
      "reaches past the storage": ({"w": _TensorSpec("0", 6, 1, (2, 3), (3, 1))},
                                   {"0": data.tobytes()}, "reaches element 6 of a storage of 6"),
      "record shorter than numel": ({"w": _TensorSpec("0", 6, 0, (6,), (1,))},
                                    {"0": data.tobytes()[:20]}, "holds 20 bytes, expected 6 x 4"),
      "record missing": ({"w": _TensorSpec("0", 6, 0, (6,), (1,))}, {},
                         "storage record archive/data/0 is missing"),
      "more elements than stored": ({"w": _TensorSpec("0", 6, 0, (10**9, 10**9), (0, 0))},
                                    {"0": data.tobytes()}, "more elements than its storage"),
      "negative stride": ({"w": _TensorSpec("0", 6, 0, (6,), (-1,))}, {"0": data.tobytes()},
                          "stride is"),
      "other persistent id": ({"w": _TensorSpec("0", 6, 0, (6,), (1,),
                                                storage_id=("module", "x", "y", "z", 1))},
                              {"0": data.tobytes()}, "persistent id other than a storage"),
  }
  for name, (tensors, records, message) in cases.items():
    path = _hand_made(tmp_path / "bad.bin", tensors, records)
    with pytest.raises(AlbertError, match=message):
      hf_torch_bin.read_torch_file(path)
    del name


@pytest.mark.parametrize("name", ["g2_zip", "g2_legacy"])
def test_truncated_files_are_refused(tmp_path, name):
  data = (TORCH / name / "pytorch_model.bin").read_bytes()
  for cut in (len(data) // 2, len(data) - 10):
    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(data[:cut])
    with pytest.raises(AlbertError, match="refused as a PyTorch checkpoint") as raised:
      hf_torch_bin.read_torch_file(path)
    assert "\n" not in str(raised.value)
  path.write_bytes(b"")
  with pytest.raises(AlbertError, match="neither a zip nor a pickle"):
    hf_torch_bin.read_torch_file(path)


def test_a_missing_shard_and_a_bad_index_are_errors(tmp_path):
  directory = shutil.copytree(TORCH / "g2_sharded", tmp_path / "sharded")
  index = json.loads((directory / "pytorch_model.bin.index.json").read_text())
  os.remove(directory / sorted(set(index["weight_map"].values()))[-1])
  with pytest.raises(AlbertError, match="cannot read"):
    hf_tensors.read_hf_tensors(directory)
  (directory / "pytorch_model.bin.index.json").write_text(
      json.dumps({"weight_map": {"a": "../elsewhere.bin"}}))
  with pytest.raises(AlbertError, match="not a file name beside it"):
    hf_tensors.read_hf_tensors(directory)


def _hand_made_state_dict(path, tensors):
  """{name: array (float32 or int64)} as a torch zip, each tensor in its own storage."""
  specs, records = {}, {}
  for i, (name, value) in enumerate(sorted(tensors.items())):
    storage = "LongStorage" if value.dtype == np.int64 else "FloatStorage"
    strides = tuple(int(s // value.itemsize) for s in np.ascontiguousarray(value).strides)
    specs[name] = _TensorSpec(str(i), value.size, 0, tuple(value.shape), strides,
                              storage=storage)
    records[str(i)] = np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tobytes()
  return _hand_made(path, specs, records)


def test_wrong_dtype_and_shape_in_a_bin_are_refused(tmp_path, fake_torch):
  del fake_torch
  source = FIXTURES_DIR / "hf" / "hf_g1"
  tensors = load_file(source / "model.safetensors")
  directory = tmp_path / "hf"
  directory.mkdir()
  shutil.copy(source / "config.json", directory)
  _hand_made_state_dict(directory / "pytorch_model.bin", tensors)
  # Our hand-made file is read as transformers' own: transformers' outputs.
  pretrainer_matches(directory, np.load(source / "reference.npz"))
  model = AlbertPretrainer(config_from_hf(directory))
  key = "albert.pooler.weight"
  _hand_made_state_dict(directory / "pytorch_model.bin",
                        dict(tensors, **{key: tensors[key].astype(np.int64)}))
  with pytest.raises(AlbertError, match=f"pytorch_model.bin: tensor {key} has dtype int64, "
                     "expected a float type"):
    albert_tf.load_hf_checkpoint(model, directory)
  _hand_made_state_dict(directory / "pytorch_model.bin",
                        dict(tensors, **{key: tensors[key][:5]}))
  with pytest.raises(AlbertError, match=rf"pytorch_model.bin: tensor {key} .* has shape "
                     r"\[5, 32\] but the model expects \[32, 32\]"):
    albert_tf.load_hf_checkpoint(model, directory)
