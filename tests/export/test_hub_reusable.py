"""A TF Hub user's code on our exports: `export_savedmodel.py --with_preprocessor` writes the
encoder (TF Hub's Reusable SavedModel "Transformer encoder" API, as albert_en_base/3) and the
text preprocessor (as albert_en_preprocess/3); `hub.KerasLayer` fine-tunes them with model.fit,
on one device and under MirroredStrategy; --albert_hub_module_handle still reads both the new
and the earlier export.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_hub as hub
import tensorflow_text  # pylint: disable=unused-import  (the preprocessor's SentencePiece op)
import tf_keras

from albert_tf.checkpoints import official_names
from albert_tf.checkpoints.hub_module import ALBERT_TF, load_hub_module_weights, read_hub_module
from albert_tf.config import AlbertConfig
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.text import packing
from albert_tf.text import tokenization
from tests.helpers.hub_encoder_v1 import export_encoder_v1
from tests.helpers.paths import REPO
from tests.helpers.scripts import describe, run_script
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_config_dict

SEQ = 32
# Two groups of two inner layers over three layers (L x K = 6 encoder outputs), dropout on so
# that `training` visibly matters; vocabulary = the tiny SentencePiece model's.
CONFIG = tiny_config_dict(vocab_size=400, num_hidden_layers=3, num_hidden_groups=2,
                          inner_group_num=2, hidden_dropout_prob=0.1,
                          attention_probs_dropout_prob=0.1)
TEXTS = ["Café naïve résumé jalapeño Ångström",
         "The quick brown fox jumps over the lazy dog.",
         "It was 3,000 miles away, and the price was $3.50.", "  MiXeD   CaSe\twords  ", ""]
PAIRS = [("The quick brown fox jumps.", "A fox jumped quickly."),
         ("Tokyo is the capital of Japan.", "Paris is the capital of France."),
         ("Rivers flow to the sea.", "Mountains rise above the clouds."),
         ("Albert shares parameters across layers.", "Parameters are shared across layers."),
         ("Café naïve résumé.", "Cafe naive resume."),
         ("Masked language modelling hides tokens.", "Sentence order prediction swaps them."),
         ("Every document is separated by a blank line.", "Documents are separated."),
         ("The price was $3.50.", "It was 3,000 miles away.")]
LABELS = np.array([1, 0, 0, 1, 1, 0, 1, 0], np.int32)


def _reseed(model, seed):
  """Weights away from the initializer's (LayerNorm and biases too), moderate activations."""
  rng = np.random.default_rng(seed)
  for v in model.weights:
    if "gamma" in v.name:
      v.assign(1.0 + rng.normal(0, 0.1, v.shape))
    else:
      v.assign(rng.normal(0, 0.1, v.shape))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  """The official-style model directory, exported by the real script with the preprocessor."""
  root = tmp_path_factory.mktemp("hub_reusable")
  spm = make_tiny_spm_model(str(root))
  pretrainer = AlbertPretrainer(AlbertConfig.from_dict(CONFIG))
  _reseed(pretrainer, seed=7)
  directory = root / "albert_base"
  directory.mkdir()
  (directory / "albert_config.json").write_text(pretrainer.config.to_json_string())
  with open(spm, "rb") as f:
    (directory / "30k-clean.model").write_bytes(f.read())
  tf.train.Checkpoint(model=pretrainer).write(str(directory / "model.ckpt-best"))
  export = root / "hub"
  proc = run_script("export_savedmodel.py",
                    [f"--albert_directory={directory}", f"--export_path={export}",
                     "--with_preprocessor", f"--preprocessor_seq_length={SEQ}"], cwd=str(root))
  assert proc.returncode == 0, describe(proc)
  assert proc.stdout.splitlines()[-1] == (f"exported the text preprocessor (seq_length {SEQ}) "
                                          f"to {export / 'preprocessor'}")
  return dict(root=root, spm=spm, pretrainer=pretrainer, encoder=str(export / "encoder"),
              preprocessor=str(export / "preprocessor"),
              tokenizer=tokenization.make_tokenizer(spm, do_lower_case=True))


def _python_ids(tokenizer, text):
  return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))


def _python_pack(tokenizer, text_a, text_b=None, seq_length=SEQ):
  """The Python feature writers' packing: the reference for the preprocessor."""
  tokens_a = tokenizer.tokenize(text_a)
  tokens_b = tokenizer.tokenize(text_b) if text_b is not None else None
  tokens_a, tokens_b = packing.fit_classifier_tokens(tokens_a, tokens_b, seq_length)
  tokens, segments = packing.pack_tokens(tokens_a, tokens_b, seq_length)
  ids = tokenizer.convert_tokens_to_ids(tokens)
  pad = seq_length - len(ids)
  return ids + [0] * pad, [1] * len(ids) + [0] * pad, segments + [0] * pad


def _ours(features):
  """TF Hub names -> our model's input names."""
  return {"input_ids": features["input_word_ids"], "input_mask": features["input_mask"],
          "segment_ids": features["input_type_ids"]}


def _pair_inputs(exported, pairs=PAIRS):
  rows = [_python_pack(exported["tokenizer"], a, b) for a, b in pairs]
  return {name: np.array([r[i] for r in rows], np.int32)
          for i, name in enumerate(("input_word_ids", "input_mask", "input_type_ids"))}


# ------------------------------------------------------------------------- the two exports


def test_one_command_writes_encoder_and_preprocessor(exported):
  with open(exported["spm"], "rb") as f:
    spm_bytes = f.read()
  with open(os.path.join(exported["preprocessor"], "assets", "30k-clean.model"), "rb") as f:
    assert f.read() == spm_bytes  # the SentencePiece model is an asset of the preprocessor
  for name in ("encoder", "preprocessor"):
    assert os.path.exists(os.path.join(exported[name], "saved_model.pb"))
  with open(os.path.join(exported["preprocessor"], "assets.extra", "albert_export.json")) as f:
    info = json.load(f)
  assert info["kind"] == "albert_hub_preprocessor" and info["seq_length"] == SEQ
  # The official TF1 module's signatures are still there, under their names.
  encoder = tf.saved_model.load(exported["encoder"])
  assert sorted(encoder.signatures) == ["mlm", "serving_default", "sop", "tokenization_info",
                                        "tokens"]


def test_encoder_api_equals_our_models(exported):
  """`__call__` and `mlm` of the export = AlbertEncoder / AlbertPretrainer, within 1e-5."""
  encoder = hub.load(exported["encoder"])
  pretrainer = exported["pretrainer"]
  inputs = _pair_inputs(exported)
  got = encoder(inputs, training=False)
  assert sorted(got) == ["default", "encoder_outputs", "pooled_output", "sequence_output"]
  want = pretrainer.encoder(_ours(inputs), training=False)
  batch, hidden = len(PAIRS), CONFIG["hidden_size"]
  assert got["pooled_output"].shape == (batch, hidden)
  assert got["sequence_output"].shape == (batch, SEQ, hidden)
  assert len(got["encoder_outputs"]) == 3 * 2  # L x K
  for key in ("pooled_output", "sequence_output"):
    np.testing.assert_allclose(got[key], want[key], atol=1e-5, rtol=0)
  np.testing.assert_array_equal(got["default"], got["pooled_output"])
  for got_layer, want_layer in zip(got["encoder_outputs"], want["encoder_outputs"]):
    np.testing.assert_allclose(got_layer, want_layer, atol=1e-5, rtol=0)
  np.testing.assert_array_equal(encoder(inputs)["pooled_output"], got["pooled_output"])
  # Dropout follows `training`.
  trained = encoder(inputs, training=True)["sequence_output"].numpy()
  assert np.abs(trained - got["sequence_output"].numpy()).max() > 1e-2

  positions = np.tile(np.array([[1, 3, 5]], np.int32), (batch, 1))
  mlm = encoder.mlm(dict(inputs, masked_lm_positions=positions), training=False)
  want_mlm = pretrainer(dict(_ours(inputs), masked_lm_positions=positions), training=False)
  assert mlm["mlm_logits"].shape == (batch, 3, CONFIG["vocab_size"])
  np.testing.assert_allclose(mlm["mlm_logits"], want_mlm["mlm_logits"], atol=1e-5, rtol=0)
  np.testing.assert_allclose(mlm["pooled_output"], want["pooled_output"], atol=1e-5, rtol=0)
  # The official `mlm` signature is unchanged: same names, same numbers.
  old = encoder.signatures["mlm"](input_ids=inputs["input_word_ids"],
                                  input_mask=inputs["input_mask"],
                                  segment_ids=inputs["input_type_ids"], mlm_positions=positions)
  np.testing.assert_allclose(old["mlm_logits"], want_mlm["mlm_logits"], atol=1e-5, rtol=0)

  # Reusable SavedModel attributes: the encoder's weights (pooler included); mlm adds its head.
  n_encoder = len(pretrainer.encoder.trainable_variables)
  assert len(encoder.variables) == len(encoder.trainable_variables) == n_encoder
  assert list(encoder.regularization_losses) == []
  assert len(encoder.mlm.trainable_variables) == n_encoder + len(
      pretrainer.masked_lm_head.trainable_variables)
  # A bad request is refused with the input named, as by the signatures.
  bad = dict(inputs, input_type_ids=inputs["input_type_ids"] + 5)
  with pytest.raises(tf.errors.InvalidArgumentError, match="segment_ids"):
    encoder(bad)


def test_preprocessor_ids_equal_python_tokenizer(exported):
  preprocessor = hub.load(exported["preprocessor"])
  tokenizer = exported["tokenizer"]
  tokens = preprocessor.tokenize(tf.constant(TEXTS))
  assert isinstance(tokens, tf.RaggedTensor) and tokens.shape.rank == 2
  assert tokens.dtype == tf.int32
  assert tokens.to_list() == [_python_ids(tokenizer, t) for t in TEXTS]
  assert any(_python_ids(tokenizer, TEXTS[0]))  # accents stripped, not <unk> only
  # The root call: one segment at the default seq_length.
  packed = preprocessor(tf.constant(TEXTS))
  assert sorted(packed) == ["input_mask", "input_type_ids", "input_word_ids"]
  for i, text in enumerate(TEXTS):
    for j, name in enumerate(("input_word_ids", "input_mask", "input_type_ids")):
      assert packed[name].dtype == tf.int32
      assert packed[name][i].numpy().tolist() == _python_pack(tokenizer, text)[j], (text, name)
  special = {k: int(v) for k, v in preprocessor.tokenize.get_special_tokens_dict().items()}
  assert special == {"vocab_size": 400, "start_of_sequence_id": 2, "end_of_segment_id": 3,
                     "padding_id": 0, "mask_id": 4}


@pytest.mark.parametrize("seq_length", [SEQ, 12])
def test_bert_pack_inputs_pairs(exported, seq_length):
  """Sentence pairs, with the official truncation when they do not fit (seq_length 12)."""
  preprocessor = hub.load(exported["preprocessor"])
  tokenizer = exported["tokenizer"]
  pairs = PAIRS + [(TEXTS[2], "x"), ("x", TEXTS[2]), (TEXTS[1], TEXTS[2])]
  segments = [preprocessor.tokenize(tf.constant([p[k] for p in pairs])) for k in (0, 1)]
  kwargs = {} if seq_length == SEQ else {"seq_length": seq_length}
  packed = preprocessor.bert_pack_inputs(segments, **kwargs)
  # The [batch, (words), (tokens)] form (WordPiece preprocessors) packs the same.
  nested = [tf.RaggedTensor.from_row_lengths(s, tf.ones_like(s.row_lengths())) for s in segments]
  packed_nested = preprocessor.bert_pack_inputs(nested, **kwargs)
  for i, (a, b) in enumerate(pairs):
    want = _python_pack(tokenizer, a, b, seq_length)
    for j, name in enumerate(("input_word_ids", "input_mask", "input_type_ids")):
      assert packed[name][i].numpy().tolist() == want[j], (a, b, name)
      assert packed_nested[name][i].numpy().tolist() == want[j]
  with pytest.raises(tf.errors.InvalidArgumentError, match="seq_length must be at least 3"):
    preprocessor.bert_pack_inputs(segments, seq_length=2)


# ------------------------------------------------------------------- a TF Hub user's model


def _user_model(preprocessor_dir, encoder_dir, seq_length=SEQ):
  """The TF Hub tutorial's sentence-pair classifier, written as a user writes it."""
  preprocessor = hub.load(preprocessor_dir)
  text_a = tf_keras.layers.Input(shape=(), dtype=tf.string, name="text_a")
  text_b = tf_keras.layers.Input(shape=(), dtype=tf.string, name="text_b")
  tokenize = hub.KerasLayer(preprocessor.tokenize, name="tokenize")
  pack = hub.KerasLayer(preprocessor.bert_pack_inputs, arguments=dict(seq_length=seq_length),
                        name="pack")
  encoder_inputs = pack([tokenize(text_a), tokenize(text_b)])
  encoder = hub.KerasLayer(encoder_dir, trainable=True, name="encoder")
  pooled = encoder(encoder_inputs)["pooled_output"]
  logits = tf_keras.layers.Dense(2, name="classifier")(pooled)
  model = tf_keras.Model([text_a, text_b], logits)
  model.compile(optimizer=tf_keras.optimizers.Adam(2e-3),
                loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return model, encoder


def _encoder_weight_names(exported):
  """Official names of the hub encoder layer's trainable weights (the loaded names are bare;
  the export keeps the order of AlbertEncoder.trainable_variables)."""
  official = {id(v): n for n, v in official_names.model_variable_map(
      exported["pretrainer"]).items()}
  return [official[id(v)] for v in exported["pretrainer"].encoder.trainable_variables]


def _pair_dataset():
  return ({"text_a": np.array([a for a, _ in PAIRS]), "text_b": np.array([b for _, b in PAIRS])},
          LABELS)


def test_keras_fine_tuning_save_and_reload(exported, tmp_path):
  tf_keras.utils.set_random_seed(0)
  model, encoder_layer = _user_model(exported["preprocessor"], exported["encoder"])
  assert len(encoder_layer.trainable_weights) == len(
      exported["pretrainer"].encoder.trainable_variables)
  x, y = _pair_dataset()
  # Before training, the layer is our AlbertEncoder on the Python tokenizer's packing.
  inputs = _pair_inputs(exported)
  got = encoder_layer(inputs, training=False)
  want = exported["pretrainer"].encoder(_ours(inputs), training=False)
  np.testing.assert_allclose(got["sequence_output"], want["sequence_output"], atol=1e-5, rtol=0)
  np.testing.assert_allclose(got["pooled_output"], want["pooled_output"], atol=1e-5, rtol=0)
  before = [w.numpy() for w in encoder_layer.trainable_weights]

  history = model.fit(x, y, batch_size=8, epochs=30, verbose=0)
  losses = history.history["loss"]
  assert np.mean(losses[-3:]) < 0.5 * losses[0], losses
  names = _encoder_weight_names(exported)
  unchanged = [name for name, w, b in zip(names, encoder_layer.trainable_weights, before)
               if np.abs(w.numpy() - b).max() <= 1e-4]
  # Every encoder weight got gradients (embeddings included); the attention key bias alone
  # cannot (it shifts a query's scores equally, which softmax ignores).
  assert unchanged and all(name.endswith("/key/bias") for name in unchanged), unchanged

  # Saved and reloaded (as the TF Hub tutorials do): the same outputs on raw text.
  logits = model.predict(x, verbose=0)
  path = str(tmp_path / "classifier")
  model.save(path, include_optimizer=False)
  reloaded = tf.saved_model.load(path)
  np.testing.assert_allclose(
      reloaded([tf.constant(x["text_a"]), tf.constant(x["text_b"])], training=False), logits,
      atol=1e-5, rtol=0)
  keras_reloaded = tf_keras.models.load_model(path, custom_objects={"KerasLayer": hub.KerasLayer})
  np.testing.assert_allclose(keras_reloaded.predict(x, verbose=0), logits, atol=1e-5, rtol=0)


def test_mlm_sub_object_in_keras(exported):
  """`hub.KerasLayer(encoder.mlm)`, as the TF Hub BERT/ALBERT docs use it."""
  encoder = hub.load(exported["encoder"])
  mlm_layer = hub.KerasLayer(encoder.mlm, trainable=True)
  inputs = _pair_inputs(exported)
  positions = np.tile(np.array([[0, 2, 4, 6]], np.int32), (len(PAIRS), 1))
  got = mlm_layer(dict(inputs, masked_lm_positions=positions))["mlm_logits"]
  want = exported["pretrainer"](dict(_ours(inputs), masked_lm_positions=positions),
                                training=False)["mlm_logits"]
  np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
  assert len(mlm_layer.trainable_weights) == len(encoder.mlm.trainable_variables)


_MIRRORED = r"""
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import numpy as np, tf_keras
sys.path.insert(0, sys.argv[3])
from tests.export import test_hub_reusable as t
tf_keras.utils.set_random_seed(0)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
  model, encoder_layer = t._user_model(sys.argv[1], sys.argv[2])
before = [w.numpy() for w in encoder_layer.trainable_weights]
x, y = t._pair_dataset()
history = model.fit(x, y, batch_size=8, epochs=30, verbose=0)
print(json.dumps({
    "replicas": strategy.num_replicas_in_sync,
    "mirrored": type(encoder_layer.trainable_weights[0]).__name__,
    "losses": history.history["loss"],
    "unchanged": [i for i, (w, b) in enumerate(zip(encoder_layer.trainable_weights, before))
                  if np.abs(w.numpy() - b).max() <= 1e-4],
    "weights": len(before)}))
"""


def test_keras_fine_tuning_under_mirrored_strategy(exported):
  """Two logical CPUs (configured before TensorFlow initialises, so in a fresh process)."""
  proc = subprocess.run(
      [sys.executable, "-c", _MIRRORED, exported["preprocessor"], exported["encoder"], REPO],
      capture_output=True, text=True, timeout=600, check=False, cwd=REPO,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO))
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  assert result["replicas"] == 2
  assert "Mirrored" in result["mirrored"], result
  assert np.mean(result["losses"][-3:]) < 0.5 * result["losses"][0], result
  names = _encoder_weight_names(exported)
  assert result["weights"] == len(names)
  unchanged = [names[i] for i in result["unchanged"]]
  assert unchanged and all(name.endswith("/key/bias") for name in unchanged), unchanged


# --------------------------------------------------------- --albert_hub_module_handle reads both


@pytest.mark.parametrize("kind", ["reusable", "earlier"])
def test_hub_module_handle_reads_new_and_earlier_exports(exported, tmp_path, kind):
  pretrainer = exported["pretrainer"]
  if kind == "reusable":
    path = exported["encoder"]
  else:
    path = export_encoder_v1(pretrainer, str(tmp_path / "earlier"), exported["spm"])
    assert not hasattr(tf.saved_model.load(path), "trainable_variables")  # really the old API
  module = read_hub_module(path)
  assert module.format == ALBERT_TF and module.do_lower_case is True
  assert module.config.to_dict() == pretrainer.config.to_dict()
  fresh = AlbertPretrainer(AlbertConfig.from_dict(CONFIG))
  report = load_hub_module_weights(fresh, module)
  assert not report.missing and not report.unexpected
  for got, want in zip(fresh.variables, pretrainer.variables):
    np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=want.name)
