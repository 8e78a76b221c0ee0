"""SavedModel exports, loaded in fresh processes that import only TensorFlow (+ tensorflow_text
for raw text), compared with the in-process models; saved_model_cli; safe export directories."""

import base64
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.data import classifier_features, glue, race
from albert_tf.errors import AlbertError
from albert_tf.export import export_classifier, export_encoder, export_multiple_choice
from albert_tf.export import saved_model_writer
from albert_tf.export import serving
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.tokenization import FullTokenizer
from tests.helpers import finetune
from tests.helpers.paths import CONFIG_DIR, REPO
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_config_dict

SEQ = 24
PAIRS = [("The quick brown fox jumps over the lazy dog.", "Paris is the capital of France."),
         ("  Café  NAÏVE résumé, 3,000 miles!", "Rivers flow to the sea " * 6),
         ("Albert shares parameters.", "")]
RACE_INPUT = {"article": [" ".join(finetune.SENTENCES)],
              "question": ["Albert shares _ across layers."],
              "options": [["parameters", "rivers", "the lazy dog", "pieces"]]}


def _random_ids(batch, seq, seed, extra=()):
  rng = np.random.default_rng(seed)
  shape = (batch,) + tuple(extra) + (seq,)
  mask = np.ones(shape, np.int32)
  mask[..., seq - 5:] = 0
  return {"input_ids": (rng.integers(5, 400, size=shape) * mask).astype(np.int32),
          "input_mask": mask, "segment_ids": (np.arange(seq) >= 7).astype(np.int32) * mask}


def _reseed(model, head, seed, std=0.1, head_std=1.0):
  rng = np.random.default_rng(seed)
  head_ids = {id(v) for v in head.weights}
  for v in model.weights:
    if "gamma" in v.name:
      v.assign(np.ones(v.shape))
    elif "beta" in v.name or "bias" in v.name:
      v.assign(np.zeros(v.shape))
    else:
      v.assign(rng.normal(0, head_std if id(v) in head_ids else std, v.shape))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  # Exported as ALBERT-xxlarge is: the shared layers as one loop (serving.py's rule; the tiny
  # model saves too little to loop by itself), so the comparisons below with the unrolled
  # in-process models check the looped graphs.
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(serving, "LOOP_SAVES_AT_LEAST_BYTES", 0)
    return _export_all(tmp_path_factory)


def _export_all(tmp_path_factory):
  root = tmp_path_factory.mktemp("export")
  spm = make_tiny_spm_model(str(root))
  # Three layers: the exports run the first two as one loop (the pooled-only last layer runs
  # alone), which the comparisons below check against the unrolled in-process models.
  config = AlbertConfig.from_dict(tiny_config_dict(num_hidden_layers=3))
  tf.random.set_seed(0)
  classifier = AlbertClassifier(config, num_classes=2)
  chooser = AlbertMultipleChoice(config, num_choices=4)
  pretrainer = AlbertPretrainer(config)
  # Weights from a fixed NumPy seed (independent of test order), larger than the 0.02 init:
  # the comparisons below must be sensitive to a single changed token.
  _reseed(classifier, classifier.classifier_head, seed=0)
  _reseed(chooser, chooser.choice_head.scorer, seed=1)
  classifier.classifier_head.output_bias.assign([0.3, -0.2])
  # Serving exports are TF Serving versions <base>/<version>/; the hub encoder is written in place.
  dirs = {"mrpc": export_classifier(classifier, str(root / "mrpc"), ["0", "1"], SEQ, spm, True,
                                    "mrpc", True),
          "race": export_multiple_choice(chooser, str(root / "race"), SEQ, 8, spm, True),
          "hub": str(root / "hub")}
  export_encoder(pretrainer, dirs["hub"], spm, do_lower_case=True)
  return dict(root=str(root), spm=spm, classifier=classifier, chooser=chooser,
              pretrainer=pretrainer, dirs=dirs)


@pytest.mark.parametrize("config_file,loops", [
    ("albert_base_v2.json", False), ("albert_large_v2.json", False),
    ("albert_xlarge_v2.json", True), ("albert_xxlarge_v2.json", True)])
def test_only_models_whose_kept_weight_copies_are_large_loop(config_file, loops):
  config = AlbertConfig.from_json_file(str(CONFIG_DIR / config_file))
  saved = serving.kept_copies_saved_by_loop(config)
  assert (saved >= serving.LOOP_SAVES_AT_LEAST_BYTES) == loops, saved / 2**30


def test_the_serving_signatures_run_the_shared_layers_as_one_loop(exported):
  for name in ("mrpc", "race"):
    function = tf.saved_model.load(exported["dirs"][name]).signatures["token_ids"]
    graph = function.graph.as_graph_def()
    ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
    assert ops & {"While", "StatelessWhile"}, f"{name}: no loop in the token_ids graph"


def _python_features(spm):
  """What run_classifier feeds the model for PAIRS: the Python tokenizer + official packing."""
  tokenizer = FullTokenizer(spm_model_file=spm, do_lower_case=True)
  feats = [classifier_features.convert_classifier_example(
      glue.InputExample(str(i), a, b or None, "0"), ["0", "1"], SEQ, tokenizer)
           for i, (a, b) in enumerate(PAIRS)]
  return feats, {k: np.array([f[k] for f in feats], np.int32)
                 for k in ("input_ids", "input_mask", "segment_ids")}


def _race_features(spm):
  tokenizer = FullTokenizer(spm_model_file=spm, do_lower_case=True)
  question = RACE_INPUT["question"][0]
  endings = [question.replace("_", o) for o in RACE_INPUT["options"][0]]
  example = race.RaceExample("x", RACE_INPUT["article"][0], endings, 0, "high")
  feature = classifier_features.convert_race_example(example, SEQ, 8, tokenizer)
  return {k: np.array(feature[k], np.int32).reshape(1, 4, SEQ)
          for k in ("input_ids", "input_mask", "segment_ids")}


def _b64(features):
  return {"b64": [base64.b64encode(classifier_features.feature_to_tf_example(f)
                                   .SerializeToString()).decode() for f in features]}


def _listify(features):
  return {k: np.asarray(v).tolist() for k, v in features.items()}


def test_served_outputs_match_in_process_models(exported):
  dirs, spm = exported["dirs"], exported["spm"]
  py_features, pair_inputs = _python_features(spm)
  token_inputs = _random_ids(3, SEQ, seed=1)
  race_tokens = _random_ids(2, SEQ, seed=2, extra=(4,))
  race_text_features = _race_features(spm)
  hub_inputs = _random_ids(2, 16, seed=3)
  positions = [[1, 4, 6], [0, 2, 9]]
  text_calls = [
      dict(export_dir=dirs["mrpc"], signature="serving_default",
           inputs={"text_a": [a for a, _ in PAIRS], "text_b": [b for _, b in PAIRS]}),
      dict(export_dir=dirs["mrpc"], signature="token_ids", inputs=_listify(token_inputs)),
      dict(export_dir=dirs["race"], signature="serving_default", inputs=RACE_INPUT),
  ]
  core_calls = [
      dict(export_dir=os.path.join(dirs["mrpc"], "core_ops"), signature="token_ids",
           inputs=_listify(token_inputs)),
      dict(export_dir=os.path.join(dirs["mrpc"], "core_ops"), signature="tf_example",
           inputs={"examples": _b64(py_features)}),
      dict(export_dir=os.path.join(dirs["race"], "core_ops"), signature="token_ids",
           inputs=_listify(race_tokens)),
      dict(export_dir=dirs["hub"], signature="mlm",
           inputs=dict(_listify(hub_inputs), mlm_positions=positions)),
      dict(export_dir=dirs["hub"], signature="sop", inputs=_listify(hub_inputs)),
  ]
  text_out = finetune.run_serving_client(exported["root"], text_calls, True)
  core_out = finetune.run_serving_client(exported["root"], core_calls, False)

  classifier, chooser, pretrainer = (exported["classifier"], exported["chooser"],
                                     exported["pretrainer"])
  tol = dict(rtol=1e-4, atol=1e-5)
  prob_tol = dict(rtol=0, atol=2e-5)  # probabilities: absolute, well below the effect above
  # Raw text in the served graph == Python tokenizer + official packing + model.
  expected_pairs = classifier(pair_inputs, training=False)["probabilities"].numpy()
  # The check has teeth: one extra [SEP] (pair-packing an empty text_b) moves the output.
  extra_sep = dict(pair_inputs)
  extra_sep["input_ids"] = pair_inputs["input_ids"].copy()
  extra_sep["input_mask"] = pair_inputs["input_mask"].copy()
  last = int(pair_inputs["input_mask"][2].sum())
  extra_sep["input_ids"][2, last], extra_sep["input_mask"][2, last] = 3, 1
  moved = classifier(extra_sep, training=False)["probabilities"].numpy()[2]
  assert np.abs(moved - expected_pairs[2]).max() > 10 * prob_tol["atol"]
  np.testing.assert_allclose(text_out[0]["probabilities"], expected_pairs, **prob_tol)
  np.testing.assert_array_equal(text_out[0]["label_id"], expected_pairs.argmax(-1))
  assert [l.decode() for l in text_out[0]["label"]] == [str(i) for i in
                                                        expected_pairs.argmax(-1)]
  expected_tokens = classifier(token_inputs, training=False)["probabilities"].numpy()
  np.testing.assert_allclose(text_out[1]["probabilities"], expected_tokens, **tol)
  np.testing.assert_allclose(core_out[0]["probabilities"], expected_tokens, **tol)
  # tf.Example records (the official feature format) give the raw-text result too.
  np.testing.assert_allclose(core_out[1]["probabilities"], expected_pairs, **prob_tol)
  expected_race = chooser(race_text_features, training=False)["probabilities"].numpy()
  np.testing.assert_allclose(text_out[2]["probabilities"], expected_race, **prob_tol)
  assert text_out[2]["label"][0].decode() == "ABCD"[int(expected_race.argmax())]
  np.testing.assert_allclose(core_out[2]["probabilities"],
                             chooser(race_tokens, training=False)["probabilities"].numpy(), **tol)
  hub_expected = pretrainer(dict(hub_inputs, masked_lm_positions=tf.constant(positions)),
                            training=False)
  np.testing.assert_allclose(core_out[3]["mlm_logits"], hub_expected["mlm_logits"].numpy(),
                             **tol)
  np.testing.assert_allclose(core_out[3]["pooled_output"],
                             hub_expected["pooled_output"].numpy(), **tol)
  np.testing.assert_allclose(core_out[4]["sop_log_probs"],
                             tf.nn.log_softmax(hub_expected["sop_logits"]).numpy(), **tol)
  np.testing.assert_allclose(core_out[4]["sequence_output"],
                             hub_expected["sequence_output"].numpy(), **tol)


def test_saved_model_cli_lists_signatures(exported):
  cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
  proc = subprocess.run([cli, "show", "--all", "--dir", exported["dirs"]["mrpc"]],
                        capture_output=True, text=True, timeout=120, check=True,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  text = proc.stdout
  for name in ("serving_default", "token_ids", "tf_example"):
    assert f"signature_def['{name}']" in text
  serving = text.split("signature_def['serving_default']")[1].split("signature_def[")[0]
  assert "inputs['text_a']" in serving and "inputs['text_b']" in serving
  assert "DT_STRING" in serving and "outputs['probabilities']" in serving
  assert "shape: (-1, 2)" in serving
  token_ids = text.split("signature_def['token_ids']")[1].split("signature_def[")[0]
  assert token_ids.count("dtype: DT_INT32") >= 3 and "shape: (-1, -1)" in token_ids
  assets = sorted(os.listdir(os.path.join(exported["dirs"]["hub"], "assets")))
  assert assets == ["30k-clean.model", "30k-clean.vocab", "albert_config.json"]
  with open(os.path.join(exported["dirs"]["hub"], "assets", "albert_config.json")) as f:
    assert json.load(f)["hidden_size"] == 32


def _write_marker(tmp_dir, marker="v1"):
  """A stand-in export for saved_model_writer: a saved_model.pb holding `marker`."""
  os.makedirs(tmp_dir)
  (open(os.path.join(tmp_dir, "saved_model.pb"), "w")).write(marker)


def _crash_midway(tmp_dir):
  """An export that fails after writing part of its files."""
  _write_marker(tmp_dir, "v3")
  raise RuntimeError("disk full")


def test_export_dir_safety(tmp_path):
  target = str(tmp_path / "model")
  identity = {"kind": "albert_classifier", "task": "mrpc"}
  saved_model_writer.write_atomically(target, identity, _write_marker)
  # Same model again (e.g. newer weights): replaced in place.
  saved_model_writer.write_atomically(target, identity, lambda d: _write_marker(d, "v2"))
  assert open(os.path.join(target, "saved_model.pb")).read() == "v2"
  with pytest.raises(AlbertError, match=r"already holds a different model \(task: existing "
                                        r"\"mrpc\" vs new \"cola\"\)"):
    saved_model_writer.write_atomically(target, dict(identity, task="cola"), _write_marker)

  with pytest.raises(RuntimeError):
    saved_model_writer.write_atomically(target, identity, _crash_midway)
  assert open(os.path.join(target, "saved_model.pb")).read() == "v2"  # old export intact
  assert sorted(os.listdir(tmp_path)) == ["model"]  # no temp dirs left behind
  other = tmp_path / "other"
  other.mkdir()
  (other / "notes.txt").write_text("mine")
  with pytest.raises(AlbertError, match="not an albert_tf export; refusing to overwrite"):
    saved_model_writer.write_atomically(str(other), identity, _write_marker)


def test_serving_exports_are_tf_serving_versions(tmp_path):
  base = str(tmp_path / "model")
  identity = {"kind": "albert_classifier", "task": "mrpc"}
  first = saved_model_writer.write_new_version(base, identity, _write_marker)
  second = saved_model_writer.write_new_version(base, identity, lambda d: _write_marker(d, "v2"))
  versions = saved_model_writer.export_versions(base)
  # TF Serving's --model_base_path layout: numbered versions, the newest is the largest.
  assert [p for _, p in versions] == [first, second] and versions[1][0] > versions[0][0]
  assert sorted(os.listdir(base)) == sorted(str(v) for v, _ in versions)  # no temp dirs left
  assert saved_model_writer.latest_export(base) == second
  assert open(os.path.join(second, "saved_model.pb")).read() == "v2"
  assert open(os.path.join(first, "saved_model.pb")).read() == "v1"  # served until replaced
  with pytest.raises(AlbertError, match=r"already holds a different model \(task: existing "
                                        r"\"mrpc\" vs new \"cola\"\)"):
    saved_model_writer.write_new_version(base, dict(identity, task="cola"), _write_marker)
  flat = tmp_path / "flat"
  flat.mkdir()
  (flat / "saved_model.pb").write_text("old layout")
  with pytest.raises(AlbertError, match="holds a SavedModel directly; TF Serving expects "
                                        "numbered versions"):
    saved_model_writer.write_new_version(str(flat), identity, _write_marker)

  with pytest.raises(RuntimeError):
    saved_model_writer.write_new_version(base, identity, _crash_midway)
  assert saved_model_writer.latest_export(base) == second
  assert len(os.listdir(base)) == 2


def test_trim_padding_keeps_outputs(exported):
  from albert_tf.export.serving import trim_padding  # pylint: disable=g-import-not-at-top
  features = _random_ids(3, SEQ, seed=4)
  features["input_mask"][1, 3] = 0  # a hole inside the sequence is kept
  features["input_mask"][:, 12:] = 0
  features["input_mask"][2, 15] = 1  # one late real token keeps positions up to 15
  trimmed = trim_padding({k: tf.constant(v) for k, v in features.items()})
  assert trimmed["input_ids"].shape == (3, 16)
  model = exported["classifier"]
  np.testing.assert_allclose(model(trimmed, training=False)["logits"].numpy(),
                             model(features, training=False)["logits"].numpy(),
                             rtol=1e-5, atol=1e-6)


def test_export_savedmodel_cli(exported, tmp_path):
  """export_savedmodel.py with official export_to_tfhub flags, from one of our checkpoints."""
  directory = tmp_path / "albert_base"
  directory.mkdir()
  pretrainer = exported["pretrainer"]
  (directory / "albert_config.json").write_text(pretrainer.config.to_json_string())
  with open(exported["spm"], "rb") as src:
    (directory / "30k-clean.model").write_bytes(src.read())
  tf.train.Checkpoint(model=pretrainer).write(str(directory / "model.ckpt-best"))
  repo = REPO
  proc = subprocess.run(
      [sys.executable, os.path.join(repo, "export_savedmodel.py"),
       f"--albert_directory={directory}", f"--export_path={tmp_path / 'hub'}"],
      capture_output=True, text=True, timeout=300, check=False,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=repo))
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert sorted(os.listdir(tmp_path / "hub" / "assets")) == ["30k-clean.model",
                                                             "albert_config.json"]
  info = saved_model_writer.read_export_info(str(tmp_path / "hub"))
  assert info["kind"] == "albert_hub_encoder"
