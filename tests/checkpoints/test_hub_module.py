"""--albert_hub_module_handle sources: the official TF1 hub module and our export_savedmodel.py
output give the config, SentencePiece model, do_lower_case and encoder weights; bad modules fail
with one line."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.checkpoints import official_names
from albert_tf.checkpoints.hub_module import (ALBERT_TF, TF1_HUB, HubModule,
                                              load_hub_module_weights, read_hub_module)
from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.text.hub_tokenization import is_remote_handle
from tests.helpers.tiny_config import tiny_config_dict
from tests.helpers.hub_module import (MODULE_DEF_V3, run_tf1_module_signature,
                                      write_official_tf1_hub_module)
from tests.helpers.paths import REPO
from tests.helpers.text import make_tiny_spm_model

SEQ = 12
# Two groups and two inner layers, so that group/inner_group names and their order matter.
CONFIG = tiny_config_dict(num_hidden_layers=3, num_hidden_groups=2, inner_group_num=2)


def _reseed(model, seed):
  """Weights well away from the initializer's, including LayerNorm and biases."""
  rng = np.random.default_rng(seed)
  for v in model.weights:
    scale = 0.2 if "gamma" not in v.name else 0.1
    offset = 1.0 if "gamma" in v.name else 0.0
    v.assign(offset + rng.normal(0, scale, v.shape))


def _inputs(seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, 400, (3, SEQ)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 7:] = 0
  mask[2, 4:] = 0
  return {"input_ids": ids * mask, "input_mask": mask,
          "segment_ids": (np.arange(SEQ)[None] >= 5).astype(np.int32).repeat(3, 0) * mask}


POSITIONS = np.array([[1, 2], [3, 0], [2, 3]], np.int32)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
  root = tmp_path_factory.mktemp("hub")
  spm = make_tiny_spm_model(str(root))
  pretrainer = AlbertPretrainer(AlbertConfig.from_dict(CONFIG))
  _reseed(pretrainer, seed=3)
  outputs = pretrainer(dict(_inputs(), masked_lm_positions=POSITIONS), training=False)
  tf1_dir = write_official_tf1_hub_module(str(root / "tf1_module"), CONFIG, spm,
                                          weights=pretrainer, do_lower_case=False)
  return dict(root=root, spm=spm, pretrainer=pretrainer, tf1_dir=tf1_dir,
              outputs={k: v.numpy() for k, v in outputs.items() if k != "encoder_outputs"})


@pytest.fixture(scope="module")
def ours_dir(source):
  """Our export_savedmodel.py output, run as a user runs it (official export_to_tfhub flags)."""
  root = source["root"]
  directory = root / "albert_ours"
  directory.mkdir()
  (directory / "albert_config.json").write_text(source["pretrainer"].config.to_json_string())
  shutil.copyfile(source["spm"], directory / "30k-clean.model")
  tf.train.Checkpoint(model=source["pretrainer"]).write(str(directory / "model.ckpt-best"))
  export = str(root / "ours_module")
  proc = subprocess.run(
      [sys.executable, os.path.join(REPO, "export_savedmodel.py"),
       f"--albert_directory={directory}", f"--export_path={export}", "--nodo_lower_case"],
      capture_output=True, text=True, timeout=600, check=False,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO))
  assert proc.returncode == 0, proc.stderr[-3000:]
  return export


def _one_line_error(fn, *args):
  with pytest.raises(AlbertError) as info:
    fn(*args)
  message = str(info.value)
  assert "\n" not in message, message
  return message


def _copy_module(src, dst):
  shutil.copytree(src, dst)
  return str(dst)


# ---------------------------------------------------------------- the official TF1 module


def test_fixture_has_the_official_layout(source):
  """The files and graphs of a module written by export_to_tfhub.py (hub.create_module_spec)."""
  from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=g-import-not-at-top
  path = source["tf1_dir"]
  assert sorted(os.listdir(path)) == ["assets", "saved_model.pb", "tfhub_module.pb",
                                      "variables"]
  assert sorted(os.listdir(os.path.join(path, "assets"))) == [
      "30k-clean.model", "30k-clean.vocab", "albert_config.json"]
  assert sorted(os.listdir(os.path.join(path, "variables"))) == [
      "variables.data-00000-of-00001", "variables.index"]
  with open(os.path.join(path, "tfhub_module.pb"), "rb") as f:
    assert f.read() == MODULE_DEF_V3
  proto = saved_model_pb2.SavedModel()
  with open(os.path.join(path, "saved_model.pb"), "rb") as f:
    proto.ParseFromString(f.read())
  assert [list(m.meta_info_def.tags) for m in proto.meta_graphs] == [["train"], []]
  for meta_graph in proto.meta_graphs:
    assert sorted(meta_graph.signature_def) == ["mlm", "sop", "tokenization_info", "tokens"]
  # The variables: exactly the official names of the source model, no scope prefix.
  stored = set(tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
               .get_variable_to_shape_map())
  assert stored == set(official_names.model_variable_map(source["pretrainer"]))
  assert "bert/encoder/transformer/group_1/inner_group_1/ffn_1/intermediate/output/dense/kernel" \
      in stored


def test_fixture_module_graph_computes_the_source_model(source):
  """The module's own signatures (run in a TF1 session, as hub.Module would) give the source
  Keras model's outputs: the fixture is a working official module, not just named weights."""
  out = run_tf1_module_signature(source["tf1_dir"], "mlm",
                                 dict(_inputs(), mlm_positions=POSITIONS))
  want = source["outputs"]
  np.testing.assert_allclose(out["sequence_output"], want["sequence_output"], atol=2e-5)
  np.testing.assert_allclose(out["pooled_output"], want["pooled_output"], atol=2e-5)
  np.testing.assert_allclose(out["mlm_logits"], want["mlm_logits"], atol=2e-5)
  sop = run_tf1_module_signature(source["tf1_dir"], "sop", _inputs(), tags=["train"])
  np.testing.assert_allclose(sop["sop_log_probs"],
                             tf.nn.log_softmax(want["sop_logits"]).numpy(), atol=2e-5)


def test_read_official_module(source):
  module = read_hub_module(source["tf1_dir"])
  assert isinstance(module, HubModule)
  assert module.format == TF1_HUB
  assert module.config.to_dict() == AlbertConfig.from_dict(CONFIG).to_dict()
  assert module.do_lower_case is False
  assert module.spm_model_file == os.path.join(source["tf1_dir"], "assets", "30k-clean.model")
  with open(module.spm_model_file, "rb") as f, open(source["spm"], "rb") as g:
    assert f.read() == g.read()
  assert module.vocab_file == os.path.join(source["tf1_dir"], "assets", "30k-clean.vocab")
  assert module.checkpoint_prefix == os.path.join(source["tf1_dir"], "variables", "variables")


def test_read_do_lower_case_true(source, tmp_path):
  path = write_official_tf1_hub_module(str(tmp_path / "m"), tiny_config_dict(), source["spm"],
                                       do_lower_case=True)
  assert read_hub_module(path).do_lower_case is True


def _assert_encoder_matches(model, source):
  got = model.encoder(_inputs(), training=False)
  for key in ("sequence_output", "pooled_output"):
    np.testing.assert_allclose(got[key].numpy(), source["outputs"][key], rtol=0, atol=1e-6)


def _assert_pretrainer_matches(module, source):
  """Loads `module` into a fresh AlbertPretrainer: every variable is used and none is missing,
  and the MLM logits are the source model's. Returns the pretrainer's outputs."""
  pretrainer = AlbertPretrainer(module.config)
  report = load_hub_module_weights(pretrainer, module)
  assert not report.missing and not report.unexpected
  out = pretrainer(dict(_inputs(), masked_lm_positions=POSITIONS), training=False)
  np.testing.assert_allclose(out["mlm_logits"].numpy(), source["outputs"]["mlm_logits"],
                             rtol=0, atol=1e-5)
  return out


def test_official_module_weights_load_into_classifier(source):
  module = read_hub_module(source["tf1_dir"])
  classifier = AlbertClassifier(module.config, num_classes=3)
  head_before = [w.numpy() for w in classifier.classifier_head.weights]
  report = load_hub_module_weights(classifier, module)
  _assert_encoder_matches(classifier, source)
  encoder_names = set(official_names.encoder_variable_map(classifier.encoder))
  assert set(report.loaded) == encoder_names
  assert report.unexpected and all(n.startswith("cls/") for n in report.unexpected)
  for before, after in zip(head_before, classifier.classifier_head.weights):
    np.testing.assert_array_equal(before, after.numpy())


def test_official_module_loads_pretraining_heads(source):
  out = _assert_pretrainer_matches(read_hub_module(source["tf1_dir"]), source)
  np.testing.assert_allclose(out["sop_logits"].numpy(), source["outputs"]["sop_logits"],
                             rtol=0, atol=1e-6)


def test_scoped_variable_names_are_stripped(source, tmp_path):
  """A module whose variables carry a scope (`module/bert/...`) loads the same."""
  path = _copy_module(source["tf1_dir"], tmp_path / "scoped")
  prefix = os.path.join(path, "variables", "variables")
  reader = tf.train.load_checkpoint(prefix)
  names = sorted(reader.get_variable_to_shape_map())
  tensors = [tf.constant(reader.get_tensor(n)) for n in names]
  for f in os.listdir(os.path.join(path, "variables")):
    os.remove(os.path.join(path, "variables", f))
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=["module/" + n for n in names],
                    shape_and_slices=[""] * len(names), tensors=tensors)
  module = read_hub_module(path)
  assert module.variable_names["bert/embeddings/word_embeddings"] == (
      "module/bert/embeddings/word_embeddings")
  classifier = AlbertClassifier(module.config, num_classes=2)
  load_hub_module_weights(classifier, module)
  _assert_encoder_matches(classifier, source)


# ---------------------------------------------------------------- our export_savedmodel.py


def test_our_export_reads_and_loads(source, ours_dir):
  module = read_hub_module(ours_dir)
  assert module.format == ALBERT_TF
  assert module.config.to_dict() == AlbertConfig.from_dict(CONFIG).to_dict()
  assert module.do_lower_case is False
  assert module.spm_model_file == os.path.join(ours_dir, "assets", "30k-clean.model")
  with open(module.spm_model_file, "rb") as f, open(source["spm"], "rb") as g:
    assert f.read() == g.read()
  classifier = AlbertClassifier(module.config, num_classes=2)
  report = load_hub_module_weights(classifier, ours_dir)  # a directory works too
  _assert_encoder_matches(classifier, source)
  assert len(report.unexpected) == 7  # the MLM and SOP heads
  _assert_pretrainer_matches(module, source)


def test_our_export_do_lower_case_from_signature_without_export_info(ours_dir, tmp_path):
  path = _copy_module(ours_dir, tmp_path / "no_info")
  shutil.rmtree(os.path.join(path, "assets.extra"))
  assert read_hub_module(path).do_lower_case is False


def test_our_export_recorded_variable_names_are_used(source, ours_dir, tmp_path):
  """When the export lists the official name of each stored variable, the list decides."""
  import json  # pylint: disable=g-import-not-at-top
  path = _copy_module(ours_dir, tmp_path / "named")
  template = AlbertPretrainer(AlbertConfig.from_dict(CONFIG))
  by_id = {id(v): n for n, v in official_names.model_variable_map(template).items()}
  names = [by_id[id(v)] for v in template.variables]
  query = next(i for i, n in enumerate(names) if n.endswith("group_0/inner_group_0/"
                                                             "attention_1/self/query/kernel"))
  key = names.index(names[query].replace("query", "key"))
  names[query], names[key] = names[key], names[query]
  info_file = os.path.join(path, "assets.extra", "albert_export.json")
  with open(info_file) as f:
    info = json.load(f)
  info["tf1_variable_names"] = names
  with open(info_file, "w") as f:
    json.dump(info, f)
  classifier = AlbertClassifier(AlbertConfig.from_dict(CONFIG), num_classes=2)
  load_hub_module_weights(classifier, path)
  loaded = official_names.model_variable_map(classifier)
  wanted = official_names.model_variable_map(source["pretrainer"])
  np.testing.assert_array_equal(loaded[names[key]].numpy(), wanted[names[query]].numpy())


# ---------------------------------------------------------------- wrong inputs


@pytest.mark.parametrize("handle", ["https://tfhub.dev/google/albert_base/3",
                                    "http://example.com/albert.tar.gz",
                                    "tfhub.dev/google/albert_base/3",
                                    "https://www.kaggle.com/models/google/albert"])
def test_url_handle_is_refused(handle):
  message = _one_line_error(read_hub_module, handle)
  assert handle in message and "download" in message and "local directory" in message


def test_gs_and_local_paths_are_not_urls():
  assert not is_remote_handle("gs://bucket/albert_base")
  assert not is_remote_handle("ram://bucket/albert_base")  # any filesystem tf.io.gfile reads
  assert not is_remote_handle("/tmp/albert_base")
  assert not is_remote_handle("hub/tfhub.dev/albert")


def test_not_a_directory(tmp_path):
  missing = str(tmp_path / "nope")
  assert missing in _one_line_error(read_hub_module, missing)
  archive = tmp_path / "albert_base.tar.gz"
  archive.write_bytes(b"x")
  message = _one_line_error(read_hub_module, str(archive))
  assert str(archive) in message and "not a directory" in message
  empty = tmp_path / "empty"
  empty.mkdir()
  message = _one_line_error(read_hub_module, str(empty))
  assert str(empty) in message and "saved_model.pb" in message


def _plain_saved_model(path, config_asset=None):
  module = tf.Module()
  module.weight = tf.Variable(tf.ones([3]))
  if config_asset:
    module.config = tf.saved_model.Asset(config_asset)
  module.f = tf.function(lambda x: x * module.weight,
                         input_signature=[tf.TensorSpec([3], tf.float32)])
  tf.saved_model.save(module, path)
  return path


def test_plain_saved_model_without_albert_config(tmp_path):
  path = _plain_saved_model(str(tmp_path / "plain"))
  message = _one_line_error(read_hub_module, path)
  assert path in message and "albert_config.json" in message


def test_saved_model_with_config_but_no_albert_variables(tmp_path):
  staging = tmp_path / "staging"
  staging.mkdir()
  (staging / "albert_config.json").write_text(AlbertConfig.from_dict(CONFIG).to_json_string())
  path = _plain_saved_model(str(tmp_path / "plain"), str(staging / "albert_config.json"))
  message = _one_line_error(read_hub_module, path)
  assert path in message and "not an ALBERT" in message


def test_broken_config_asset(source, tmp_path):
  path = _copy_module(source["tf1_dir"], tmp_path / "broken")
  with open(os.path.join(path, "assets", "albert_config.json"), "w") as f:
    f.write("{not json")
  message = _one_line_error(read_hub_module, path)
  assert "albert_config.json" in message and "not JSON" in message


def test_missing_spm_asset(source, tmp_path):
  path = _copy_module(source["tf1_dir"], tmp_path / "no_spm")
  os.remove(os.path.join(path, "assets", "30k-clean.model"))
  message = _one_line_error(read_hub_module, path)
  assert path in message and "30k-clean.model" in message


def _write_config(path, **overrides):
  with open(os.path.join(path, "assets", "albert_config.json"), "w") as f:
    f.write(AlbertConfig.from_dict(dict(CONFIG, **overrides)).to_json_string())


def _classifier_load_error(path):
  """The one-line error of loading the module at `path` into a fresh 2-class classifier."""
  module = read_hub_module(path)
  return _one_line_error(load_hub_module_weights, AlbertClassifier(module.config, num_classes=2),
                         module)


def test_config_not_matching_variables_is_a_shape_error(source, tmp_path):
  path = _copy_module(source["tf1_dir"], tmp_path / "wrong_config")
  _write_config(path, intermediate_size=48)
  module = read_hub_module(path)
  classifier = AlbertClassifier(module.config, num_classes=2)
  before = [w.numpy() for w in classifier.weights]
  message = _one_line_error(load_hub_module_weights, classifier, module)
  assert path in message and "ffn_1/intermediate/dense/bias" in message
  assert "[64] in the module" in message and "expects [48]" in message
  for b, w in zip(before, classifier.weights):  # refused: nothing assigned
    np.testing.assert_array_equal(b, w.numpy())


def test_our_export_config_not_matching_variables(ours_dir, tmp_path):
  path = _copy_module(ours_dir, tmp_path / "wrong_config")
  _write_config(path, intermediate_size=48)
  message = _classifier_load_error(path)
  # The export records each weight's official name, so the first mismatch is named like the
  # TF1 module's (a [64] bias where the config asks for [48]).
  assert path in message and "ffn_1/intermediate/dense" in message
  assert ("[64] in the module" in message and "expects [48]" in message) or (
      "[32, 64]" in message and "[32, 48]" in message)
  _write_config(path, num_hidden_groups=1)  # fewer variables than stored
  message = _classifier_load_error(path)
  assert path in message and "model variables" in message and "group_1" in message


def test_module_missing_encoder_variables(source, tmp_path):
  path = write_official_tf1_hub_module(
      str(tmp_path / "partial"), CONFIG, source["spm"], weights=source["pretrainer"],
      omit_variables=("bert/pooler/dense/kernel", "bert/pooler/dense/bias",
                      "cls/seq_relationship/output_bias"))
  message = _classifier_load_error(path)
  assert path in message and "bert/pooler/dense/bias" in message and "2 of" in message


def test_module_missing_head_variables_only_reports_them(source, tmp_path):
  path = write_official_tf1_hub_module(
      str(tmp_path / "no_sop"), CONFIG, source["spm"], weights=source["pretrainer"],
      omit_variables=("cls/seq_relationship/output_bias", "cls/seq_relationship/output_weights"))
  report = load_hub_module_weights(AlbertPretrainer(AlbertConfig.from_dict(CONFIG)), path)
  assert report.missing == ["cls/seq_relationship/output_bias",
                            "cls/seq_relationship/output_weights"]


def test_module_without_albert_variables(source, tmp_path):
  path = _copy_module(source["tf1_dir"], tmp_path / "renamed")
  prefix = os.path.join(path, "variables", "variables")
  for f in os.listdir(os.path.join(path, "variables")):
    os.remove(os.path.join(path, "variables", f))
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=["dense/kernel"], shape_and_slices=[""],
                    tensors=[tf.ones([2, 2])])
  message = _one_line_error(read_hub_module, path)
  assert path in message and "not an ALBERT module" in message
