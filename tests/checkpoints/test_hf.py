"""HF transformers ALBERT directories into our models and back, against transformers' outputs.

tests/fixtures/hf/ holds directories and reference outputs made once with torch + transformers by
tests/fixtures/make_hf_reference.py (see its docstring); no PyTorch is needed here."""

import json
import os
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from albert_tf import AlbertConfig, AlbertEncoder, AlbertError, AlbertPretrainer
import albert_tf
from albert_tf.checkpoints import official_names
from albert_tf.checkpoints.hf.config import config_from_hf, hf_config_dict
from albert_tf.checkpoints.hf.tensors import is_hf_directory
from albert_tf.checkpoints.init import init_from_checkpoint
from albert_tf.models import AlbertClassifier
from tests.helpers.paths import FIXTURES_DIR
from tests.helpers.tiny_config import tiny_config_dict


DATA = FIXTURES_DIR / "hf"


FIXTURES = ("hf_g1", "hf_g2", "ours_e_eq_h")


TOLERANCE = 1e-4


def pretrainer_from(directory):
  model = AlbertPretrainer(config_from_hf(directory))
  report = albert_tf.load_hf_checkpoint(model, directory)
  return model, report


def our_outputs(model, ref):
  return model(dict(input_ids=ref["input_ids"], input_mask=ref["attention_mask"],
                    segment_ids=ref["token_type_ids"]), training=False)


def copy_fixture(name, tmp_path):
  return shutil.copytree(DATA / name, tmp_path / name)


def assert_same_tensors(expected_dir, actual_dir):
  """The two directories' model.safetensors hold the same names and bit-equal tensors."""
  expected = load_file(os.path.join(expected_dir, "model.safetensors"))
  actual = load_file(os.path.join(actual_dir, "model.safetensors"))
  assert sorted(actual) == sorted(expected)
  for key, value in expected.items():
    assert actual[key].dtype == value.dtype, key
    np.testing.assert_array_equal(actual[key], value, err_msg=key)


@pytest.mark.parametrize("name", FIXTURES)
def test_outputs_match_transformers(name):
  model, report = pretrainer_from(DATA / name)
  assert not report.missing and not report.unexpected
  assert sorted(report.loaded) == sorted(official_names.model_variable_map(model))
  ref = np.load(DATA / name / "reference.npz")
  out = our_outputs(model, ref)
  for ours, theirs in (("sequence_output", "sequence_output"), ("pooled_output", "pooled_output"),
                       ("mlm_logits", "mlm_logits"), ("sop_logits", "sop_logits")):
    got = out[ours].numpy()
    assert got.shape == ref[theirs].shape, ours
    # Values are O(1) (random weights ~ N(0, 0.2)), so a wrong tensor would be far off.
    assert np.max(np.abs(ref[theirs])) > 0.5
    np.testing.assert_allclose(got, ref[theirs], rtol=0, atol=TOLERANCE, err_msg=f"{name} {ours}")


@pytest.mark.parametrize("name", FIXTURES)
def test_transformers_loaded_every_fixture_cleanly(name):
  """The generator asserted it; the record says which versions and that nothing was left out."""
  record = json.loads((DATA / name / "reference.json").read_text())
  assert record["transformers"] and record["torch"]
  assert record["loading_info"]["missing_keys"] == []
  assert record["loading_info"]["unexpected_keys"] == []
  assert record["loading_info"]["mismatched_keys"] == []


def test_save_writes_what_transformers_accepted(tmp_path):
  """ours_e_eq_h was written by save_hf_checkpoint and loaded by transformers with no missing or
  unexpected keys; saving the same weights again must give the same files."""
  model, _ = pretrainer_from(DATA / "ours_e_eq_h")
  written = albert_tf.save_hf_checkpoint(model, tmp_path / "again")
  committed = load_file(DATA / "ours_e_eq_h" / "model.safetensors")
  again = load_file(tmp_path / "again" / "model.safetensors")
  assert written == sorted(committed) == sorted(again)
  for key, value in committed.items():
    assert again[key].dtype == np.float32
    np.testing.assert_array_equal(again[key], value, err_msg=key)
  # E == H: the official model has no projection; HF's is written as the identity.
  np.testing.assert_array_equal(again["albert.encoder.embedding_hidden_mapping_in.weight"],
                                np.eye(32, dtype=np.float32))
  assert json.loads((tmp_path / "again" / "config.json").read_text()) == json.loads(
      (DATA / "ours_e_eq_h" / "config.json").read_text())
  assert not [p for p in os.listdir(tmp_path / "again") if p.startswith(".")]  # no temp files


@pytest.mark.parametrize("name", ["hf_g1", "hf_g2"])
def test_hf_to_ours_to_hf_is_bit_exact(name, tmp_path):
  model, _ = pretrainer_from(DATA / name)
  albert_tf.save_hf_checkpoint(model, tmp_path / "out")
  assert_same_tensors(DATA / name, tmp_path / "out")
  theirs = json.loads((DATA / name / "config.json").read_text())
  ours = json.loads((tmp_path / "out" / "config.json").read_text())
  for key, value in ours.items():
    if key in theirs:
      assert theirs[key] == value, key
  assert ours["architectures"] == ["AlbertForPreTraining"] and ours["hidden_act"] == "gelu_new"


def test_config_mapping(tmp_path):
  config = config_from_hf(DATA / "hf_g2")
  assert (config.num_hidden_layers, config.num_hidden_groups, config.inner_group_num) == (3, 2, 2)
  assert config.hidden_act == "gelu" and config.embedding_size == 16
  assert config_from_hf(DATA / "hf_g2" / "config.json") == config
  written = hf_config_dict(AlbertConfig.from_dict(tiny_config_dict(hidden_act="relu")),
                              ["AlbertModel"])
  assert written["hidden_act"] == "relu" and written["layer_norm_eps"] == 1e-12
  # Keys a config.json leaves out take transformers' defaults.
  (tmp_path / "d").mkdir()
  (tmp_path / "d" / "config.json").write_text(json.dumps({"model_type": "albert"}))
  default = config_from_hf(tmp_path / "d")
  assert (default.hidden_size, default.num_attention_heads, default.hidden_act) == (
      4096, 64, "gelu")


@pytest.mark.parametrize("change,message", [
    ({"model_type": "bert"}, "model_type='bert' is not an HF ALBERT config"),
    ({"hidden_act": "gelu"}, "HF 'gelu' is the erf form"),
    ({"layer_norm_eps": 1e-5}, "layer_norm_eps=1e-05 is not supported"),
    ({"position_embedding_type": "relative_key"}, "position_embedding_type='relative_key'"),
    ({"tie_word_embeddings": False}, "tie_word_embeddings=False is not supported"),
    ({"num_attention_heads": 5}, "hidden_size=32 is invalid"),
])
def test_config_json_refusals(tmp_path, change, message):
  directory = copy_fixture("hf_g1", tmp_path)
  cfg = json.loads((directory / "config.json").read_text())
  cfg.update(change)
  (directory / "config.json").write_text(json.dumps(cfg))
  model = AlbertPretrainer(config_from_hf(DATA / "hf_g1"))
  with pytest.raises(AlbertError, match=message) as raised:
    albert_tf.load_hf_checkpoint(model, directory)
  assert "config.json" in str(raised.value) and "\n" not in str(raised.value)


def test_missing_safetensors(tmp_path):
  directory = tmp_path / "hf"
  directory.mkdir()
  shutil.copy(DATA / "hf_g1" / "config.json", directory)
  assert is_hf_directory(directory)
  model = AlbertPretrainer(config_from_hf(directory))
  with pytest.raises(AlbertError, match=r"HF directory has no weights file \(one of "
                     r"model.safetensors, .*pytorch_model.bin, .*tf_model.h5\)$"):
    init_from_checkpoint(model, str(directory))
  (directory / "pytorch_model.bin").write_bytes(b"\0")
  with pytest.raises(AlbertError, match="pytorch_model.bin: refused as a PyTorch checkpoint"):
    albert_tf.load_hf_checkpoint(model, directory)
  (directory / "model.safetensors").write_bytes(b"not safetensors")
  with pytest.raises(AlbertError, match="cannot read as safetensors"):
    albert_tf.load_hf_checkpoint(model, directory)


def test_wrong_config_and_shape_mismatch_change_nothing(tmp_path):
  # The model's config disagrees with config.json (same shapes when G = 1: L is invisible).
  wrong = AlbertPretrainer(AlbertConfig.from_dict(dict(config_from_hf(DATA / "hf_g1")
                                                       .to_dict(), num_hidden_layers=3)))
  before = [v.numpy() for v in wrong.variables]
  with pytest.raises(AlbertError, match="num_hidden_layers=2 but the model was built with "
                     "num_hidden_layers=3"):
    albert_tf.load_hf_checkpoint(wrong, DATA / "hf_g1")
  # A tensor whose shape disagrees with config.json.
  directory = copy_fixture("hf_g1", tmp_path)
  tensors = load_file(directory / "model.safetensors")
  key = "albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"
  tensors[key] = np.zeros((48, 32), np.float32)
  save_file(tensors, directory / "model.safetensors", metadata={"format": "pt"})
  model = AlbertPretrainer(config_from_hf(directory))
  before = [v.numpy() for v in model.variables]
  with pytest.raises(AlbertError, match=rf"tensor {key} \(bert/encoder/transformer/group_0/"
                     r"inner_group_0/ffn_1/intermediate/dense/kernel\) has shape \[48, 32\] but "
                     r"the model expects \[64, 32\]"):
    albert_tf.load_hf_checkpoint(model, directory)
  for a, b in zip(before, model.variables):
    np.testing.assert_array_equal(a, b.numpy())  # refused before assigning anything


def test_missing_encoder_tensor_is_reported_and_refused_by_init(tmp_path):
  directory = copy_fixture("hf_g1", tmp_path)
  tensors = load_file(directory / "model.safetensors")
  del tensors["albert.pooler.weight"]
  tensors["classifier.weight"] = np.zeros((3, 32), np.float32)
  save_file(tensors, directory / "model.safetensors", metadata={"format": "pt"})
  model = AlbertPretrainer(config_from_hf(directory))
  report = albert_tf.load_hf_checkpoint(model, directory)
  assert report.missing == ["bert/pooler/dense/kernel"]
  assert report.unexpected == ["classifier.weight"]
  with pytest.raises(AlbertError, match="checkpoint lacks 1 encoder variables, e.g. "
                     "bert/pooler/dense/kernel"):
    init_from_checkpoint(model, str(directory))


def test_group_rule_mismatch_refused_both_ways(tmp_path):
  """HF: group int(l / (L / G)); official: int(l / L * G). For L=18, G=14 layer 9 differs."""
  cfg = dict(vocab_size=50, embedding_size=8, hidden_size=8, num_attention_heads=1,
             intermediate_size=8, max_position_embeddings=16, num_hidden_layers=18,
             num_hidden_groups=14)
  model = AlbertPretrainer(AlbertConfig.from_dict(cfg))
  message = (r"num_hidden_layers=18 with num_hidden_groups=14 maps layers to different groups "
             r"in HF transformers than in the official model \(layer 9: official group 7, HF "
             r"group 6\)")
  with pytest.raises(AlbertError, match=message):
    albert_tf.save_hf_checkpoint(model, tmp_path / "out")
  assert not (tmp_path / "out").exists()
  directory = tmp_path / "hf"
  directory.mkdir()
  (directory / "config.json").write_text(json.dumps(dict(cfg, model_type="albert")))
  save_file({"albert.pooler.bias": np.zeros(8, np.float32)}, directory / "model.safetensors")
  with pytest.raises(AlbertError, match=message):
    albert_tf.load_hf_checkpoint(model, directory)


def test_layouts_hf_cannot_hold_are_refused(tmp_path):
  ablation = AlbertPretrainer(AlbertConfig.from_dict(tiny_config_dict(sharing="attention")))
  with pytest.raises(AlbertError, match="sharing='attention' has no HF transformers ALBERT"):
    albert_tf.save_hf_checkpoint(ablation, tmp_path / "x")
  # E == H: a non-identity projection cannot be dropped.
  directory = copy_fixture("ours_e_eq_h", tmp_path)
  tensors = load_file(directory / "model.safetensors")
  tensors["albert.encoder.embedding_hidden_mapping_in.bias"][0] = 1.0
  save_file(tensors, directory / "model.safetensors", metadata={"format": "pt"})
  model = AlbertPretrainer(config_from_hf(directory))
  with pytest.raises(AlbertError, match="embedding_hidden_mapping_in is not the identity"):
    albert_tf.load_hf_checkpoint(model, directory)


def test_tied_decoder_checked(tmp_path):
  directory = copy_fixture("hf_g1", tmp_path)
  tensors = load_file(directory / "model.safetensors")
  tensors["predictions.decoder.weight"] = tensors["albert.embeddings.word_embeddings.weight"]
  tensors["predictions.decoder.bias"] = tensors["predictions.bias"]
  save_file(tensors, directory / "model.safetensors", metadata={"format": "pt"})
  model = AlbertPretrainer(config_from_hf(directory))
  report = albert_tf.load_hf_checkpoint(model, directory)
  assert not report.unexpected and not report.missing  # equal tied copies are accepted
  tensors["predictions.decoder.weight"] = tensors["predictions.decoder.weight"] + 1.0
  save_file(tensors, directory / "model.safetensors", metadata={"format": "pt"})
  with pytest.raises(AlbertError, match="predictions.decoder.weight differs from "
                     "albert.embeddings.word_embeddings.weight"):
    albert_tf.load_hf_checkpoint(model, directory)


def test_bare_albert_model_directory_and_classifier_init(tmp_path):
  """An HF AlbertModel (names without `albert.`) initialises a classifier's encoder."""
  directory = copy_fixture("hf_g2", tmp_path)
  tensors = load_file(directory / "model.safetensors")
  bare = {k[len("albert."):]: v for k, v in tensors.items() if k.startswith("albert.")}
  save_file(bare, directory / "model.safetensors", metadata={"format": "pt"})
  classifier = AlbertClassifier(config_from_hf(directory), num_classes=3)
  report = init_from_checkpoint(classifier, str(directory))
  assert report.loaded and all(n.startswith("bert/") for n in report.loaded)
  assert sorted(report.missing) == ["output_bias", "output_weights"]  # the new task head
  np.testing.assert_array_equal(classifier.encoder.embeddings.word_embeddings.numpy(),
                                tensors["albert.embeddings.word_embeddings.weight"])
  np.testing.assert_array_equal(
      classifier.encoder.pooler.kernel.numpy(), tensors["albert.pooler.weight"].T)
  encoder = AlbertEncoder(config_from_hf(directory))
  albert_tf.save_hf_checkpoint(encoder, tmp_path / "enc")
  assert json.loads((tmp_path / "enc" / "config.json").read_text())["architectures"] == [
      "AlbertModel"]


def write_bfloat16_safetensors(tensors, path):
  """A safetensors file with every tensor as BF16 (NumPy has no bfloat16; written by hand)."""
  header, chunks, offset = {"__metadata__": {"format": "pt"}}, [], 0
  for name in sorted(tensors):
    bits = (np.ascontiguousarray(tensors[name], np.float32).view(np.uint32) >> 16)
    raw = bits.astype("<u2").tobytes()
    header[name] = {"dtype": "BF16", "shape": list(tensors[name].shape),
                    "data_offsets": [offset, offset + len(raw)]}
    chunks.append(raw)
    offset += len(raw)
  text = json.dumps(header).encode()
  text += b" " * (-len(text) % 8)
  with open(path, "wb") as f:
    f.write(len(text).to_bytes(8, "little") + text + b"".join(chunks))


def test_bfloat16_and_float16_directories_load_as_float32(tmp_path):
  directory = copy_fixture("hf_g1", tmp_path)
  tensors = load_file(directory / "model.safetensors")
  write_bfloat16_safetensors(tensors, directory / "model.safetensors")
  model = AlbertPretrainer(config_from_hf(directory))
  report = albert_tf.load_hf_checkpoint(model, directory)
  assert not report.missing and not report.unexpected
  truncated = (tensors["albert.embeddings.word_embeddings.weight"].view(np.uint32)
               & np.uint32(0xFFFF0000)).view(np.float32)
  loaded = model.encoder.embeddings.word_embeddings.numpy()
  np.testing.assert_array_equal(loaded, truncated)
  assert np.any(loaded != tensors["albert.embeddings.word_embeddings.weight"])
  save_file({k: v.astype(np.float16) for k, v in tensors.items()},
            directory / "model.safetensors", metadata={"format": "pt"})
  albert_tf.load_hf_checkpoint(model, directory)
  np.testing.assert_array_equal(
      model.encoder.pooler.kernel.numpy(),
      tensors["albert.pooler.weight"].astype(np.float16).astype(np.float32).T)


def test_sharded_directory(tmp_path):
  directory = copy_fixture("hf_g2", tmp_path)
  tensors = load_file(directory / "model.safetensors")
  os.remove(directory / "model.safetensors")
  names = sorted(tensors)
  shards = {"model-00001-of-00002.safetensors": names[::2],
            "model-00002-of-00002.safetensors": names[1::2]}
  weight_map = {}
  for shard, shard_names in shards.items():
    save_file({n: tensors[n] for n in shard_names}, directory / shard, metadata={"format": "pt"})
    weight_map.update(dict.fromkeys(shard_names, shard))
  (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
  model, report = pretrainer_from(directory)
  assert not report.missing and not report.unexpected
  ref = np.load(DATA / "hf_g2" / "reference.npz")
  np.testing.assert_allclose(our_outputs(model, ref)["sop_logits"].numpy(), ref["sop_logits"],
                             atol=TOLERANCE)
  (directory / "model.safetensors.index.json").write_text("[]")
  with pytest.raises(AlbertError, match="not an HF weights index with a weight_map"):
    albert_tf.load_hf_checkpoint(model, directory)
