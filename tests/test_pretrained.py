"""albert_tf.from_pretrained: an official tarball directory, a fine-tuned run's model.ckpt-best
(its `predict(texts)` answering as the exported SavedModel does), and the errors that keep a
random head from ever being used."""

import os
import shutil

import numpy as np
import pytest

import albert_tf
from albert_tf import AlbertError
from albert_tf.models import AlbertClassifier, AlbertMultipleChoice, AlbertSquadModel
from tests.helpers import finetune, scripts
from tests.helpers.albert_numpy import make_official_weights, write_official_checkpoint
from tests.helpers.tiny_config import tiny_config_dict


@pytest.fixture(scope="module")
def official_tarball(tmp_path_factory):
  """albert_config.json + 30k-clean.model + model.ckpt-best, as the released tarballs."""
  root = tmp_path_factory.mktemp("tarball")
  setup = finetune.mrpc_setup(root / "work")
  directory = root / "albert_tiny"
  directory.mkdir()
  shutil.copy(setup["config"], directory / "albert_config.json")
  shutil.copy(setup["spm"], directory / "30k-clean.model")
  weights = make_official_weights(tiny_config_dict(), seed=4)
  write_official_checkpoint(weights, str(directory / "model.ckpt-best"))
  return directory, weights


def test_official_tarball_gives_the_pretrainer_config_and_tokenizer(official_tarball):
  directory, weights = official_tarball
  pretrained = albert_tf.from_pretrained(str(directory))
  assert pretrained.model_type == "pretrainer"
  assert pretrained.config.hidden_size == tiny_config_dict()["hidden_size"]
  assert pretrained.tokenizer.tokenize("hello world")
  word = pretrained.model.encoder.embeddings.word_embeddings.numpy()
  np.testing.assert_array_equal(word, weights["bert/embeddings/word_embeddings"])
  with pytest.raises(AlbertError, match="predict\\(\\) classifies text"):
    pretrained.predict(["a sentence"])
  # A pretraining checkpoint is no classifier: the head is missing, never random.
  with pytest.raises(AlbertError, match="holds a pretrainer checkpoint .* needs a classifier"):
    albert_tf.from_pretrained(str(directory), model_type="classifier", label_list=["0", "1"])


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory):
  """A 2-step MRPC run with an export (model.ckpt-best and a TF Serving version)."""
  setup = finetune.mrpc_setup(tmp_path_factory.mktemp("finetuned"))
  root = setup["root"]
  proc = scripts.run_script("run_classifier.py", [
      "--task_name=MRPC", f"--data_dir={root / 'glue'}", f"--output_dir={root / 'out'}",
      f"--albert_config_file={setup['config']}", f"--spm_model_file={setup['spm']}",
      "--do_train", "--do_eval", "--train_step=2", "--save_checkpoints_steps=2",
      "--max_seq_length=24", "--train_batch_size=4", "--eval_batch_size=4",
      "--learning_rate=1e-2", f"--export_dir={root / 'export'}"], root)
  assert proc.returncode == 0, scripts.describe(proc)
  return setup


def test_finetuned_best_checkpoint_predicts_as_the_exported_savedmodel(finetuned, tmp_path):
  root = finetuned["root"]
  pretrained = albert_tf.from_pretrained(
      str(root / "out" / "model.ckpt-best"), task_name="MRPC",
      albert_config_file=finetuned["config"], spm_model_file=finetuned["spm"])
  assert isinstance(pretrained.model, AlbertClassifier) and pretrained.label_list == ["0", "1"]
  text_a = ["The cat sat on the mat.", "Prices rose sharply in May."]
  text_b = ["A cat was sitting on the mat.", "Nobody knows the answer."]
  answer = pretrained.predict(text_a, text_b, max_seq_length=24)
  served, = scripts.serve(str(tmp_path), [{
      "export_dir": scripts.versioned_export(str(root / "export")),
      "signature": "serving_default", "inputs": {"text_a": text_a, "text_b": text_b}}])
  assert "__error__" not in served, served
  np.testing.assert_allclose(answer["probabilities"], served["probabilities"], atol=1e-5)
  assert answer["labels"] == [label.decode() for label in served["label"]]


def test_errors_name_what_is_missing(finetuned, tmp_path):
  root = finetuned["root"]
  best = str(root / "out" / "model.ckpt-best")
  # The run's output dir describes itself (albert_config.json beside the checkpoint) ...
  assert albert_tf.from_pretrained(best, task_name="MRPC").model_type == "classifier"
  # ... a checkpoint copied away from it does not.
  bare = tmp_path / "bare"
  bare.mkdir()
  for name in os.listdir(root / "out"):
    if name.startswith("model.ckpt-best."):
      shutil.copy(root / "out" / name, bare / name)
  with pytest.raises(AlbertError, match="no albert_config.json beside the checkpoint"):
    albert_tf.from_pretrained(str(bare / "model.ckpt-best"), task_name="MRPC")
  # A GLUE head is no RACE scorer: the error names both kinds.
  with pytest.raises(AlbertError, match=r"holds a classifier checkpoint \(2 classes.* needs a "
                     r"multiple_choice model"):
    albert_tf.from_pretrained(best, model_type="multiple_choice",
                              albert_config_file=finetuned["config"])
  with pytest.raises(AlbertError, match="model_type='bert': expected one of"):
    albert_tf.from_pretrained(best, model_type="bert")
  with pytest.raises(AlbertError, match="no checkpoint there"):
    albert_tf.from_pretrained(str(tmp_path / "nothing" / "model.ckpt-1"),
                              albert_config_file=finetuned["config"])


HF_HEADS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "hf_heads")


@pytest.mark.parametrize("name, model_class, output", [
    ("hf_classifier", AlbertClassifier, "logits"),
    ("hf_regression", AlbertClassifier, "logits"),
    ("hf_multiple_choice", AlbertMultipleChoice, "logits"),
    ("hf_squad", AlbertSquadModel, "start_logits")])
def test_hf_task_directories_load_with_their_heads(name, model_class, output):
  """Each HF task directory gives its model (kind from `architectures`, class names from
  id2label) with the outputs transformers computed (tests/fixtures/make_hf_reference.py)."""
  directory = os.path.join(HF_HEADS, name)
  pretrained = albert_tf.from_pretrained(directory)
  assert isinstance(pretrained.model, model_class)
  reference = np.load(os.path.join(directory, "reference.npz"))
  inputs = {"input_ids": reference["input_ids"], "input_mask": reference["attention_mask"],
            "segment_ids": reference["token_type_ids"]}
  if model_class is AlbertSquadModel:
    inputs["p_mask"] = np.zeros_like(reference["input_ids"])
  got = np.asarray(pretrained.model(inputs, training=False)[output])
  want = reference[output]
  if name == "hf_classifier":
    # id2label names the classes; the model keeps transformers' order when nothing else is given
    assert pretrained.label_list == ["ENTAILMENT", "NEUTRAL", "CONTRADICTION"]
  np.testing.assert_allclose(got.reshape(want.shape), want, atol=1e-4)
  # The task's own order: rows follow the names given.
  if name == "hf_classifier":
    mapped = albert_tf.from_pretrained(directory,
                                       label_list=["contradiction", "entailment", "neutral"])
    logits = np.asarray(mapped.model(inputs, training=False)["logits"])
    np.testing.assert_allclose(logits, want[:, [2, 0, 1]], atol=1e-4)


def test_predict_fits_a_model_with_fewer_than_128_positions(tmp_path):
  """predict() pads to 128 by default, or to max_position_embeddings when that is smaller
  (issue 30: a 64-position model raised a TensorFlow traceback)."""
  setup = finetune.mrpc_setup(tmp_path / "work")
  cfg = tiny_config_dict(max_position_embeddings=64)
  weights = make_official_weights(cfg, seed=5)
  rng = np.random.RandomState(0)
  weights["output_weights"] = rng.normal(size=(2, cfg["hidden_size"])).astype(np.float32)
  weights["output_bias"] = np.zeros([2], np.float32)
  directory = tmp_path / "short_model"
  write_official_checkpoint(weights, str(directory / "model.ckpt-best"))
  albert_tf.AlbertConfig.from_dict(cfg).to_json_file(directory / "albert_config.json")
  shutil.copy(setup["spm"], directory / "30k-clean.model")
  pretrained = albert_tf.from_pretrained(str(directory), task_name="MRPC")
  long_text = " ".join(finetune.SENTENCES * 4)  # well over 64 pieces: truncated, not an error
  result = pretrained.predict([long_text, finetune.SENTENCES[0]], [finetune.SENTENCES[1]] * 2)
  assert result["probabilities"].shape == (2, 2)
  np.testing.assert_allclose(result["probabilities"].sum(-1), 1.0, rtol=1e-5)
  with pytest.raises(AlbertError, match=r"max_seq_length=128\): the model has 64 positions"):
    pretrained.predict([long_text], max_seq_length=128)
