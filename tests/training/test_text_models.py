"""TextClassifier: raw text in, Keras' compile/fit/evaluate/predict, the scripts' recipe and
files out (serving export, official checkpoint read back by from_pretrained)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import albert_tf
from albert_tf.errors import AlbertError
from albert_tf.training import optimizer as optimizer_lib
from albert_tf.training.text_models import TextClassifier
from tests.helpers.glue_fixtures import SENTENCES
from tests.helpers.model_dirs import TARBALL, write_model_directories
from tests.helpers.paths import REPO
from tests.helpers.text import make_tiny_spm_model

LENGTH = 16
TEXTS = SENTENCES[:8]
LABELS = np.array([i % 2 for i in range(8)])  # even sentences: 0


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
  root = tmp_path_factory.mktemp("text_models")
  spm = make_tiny_spm_model(root)
  return dict(write_model_directories(root, spm), spm=spm, root=root)


def _model(dirs, **kwargs):
  kwargs.setdefault("num_classes", 2)
  return TextClassifier.from_pretrained(dirs[TARBALL], sequence_length=LENGTH, seed=1, **kwargs)


def test_loads_the_encoder_and_predicts_what_the_token_model_predicts(dirs):
  model = _model(dirs)
  reference = albert_tf.from_pretrained(dirs[TARBALL]).model.encoder
  for mine, theirs in zip(model.classifier.encoder.weights, reference.weights):
    np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
  logits = model.predict(TEXTS, verbose=0)
  ids = model.preprocessor(tf.constant(TEXTS))
  np.testing.assert_allclose(logits, model.classifier(ids)["logits"].numpy(), atol=1e-6)
  assert logits.shape == (8, 2)


def test_compile_defaults_are_run_classifiers_recipe(dirs):
  model = _model(dirs)
  model.compile(num_train_steps=10, num_warmup_steps=2)
  opt = model.optimizer
  assert isinstance(opt, optimizer_lib.AlbertAdamW) and opt.global_clipnorm == 1.0
  schedule = opt.learning_rate
  assert [float(schedule(s)) for s in (1, 2, 6)] == pytest.approx([2.5e-5, 4e-5, 2e-5])  # official: decay from step 0
  rules = optimizer_lib.decay_rules(model.classifier, opt)
  assert rules["output_weights"] == (True, False)
  assert rules["bert/embeddings/LayerNorm/gamma"] == (False, False)
  assert rules["output_bias"] == (False, False)


def test_fit_learns_on_lists_numpy_and_tf_data_and_sets_the_schedule(dirs):
  model = _model(dirs)
  model.compile(learning_rate=1e-3)  # the schedule's length comes from fit()
  history = model.fit(TEXTS, LABELS, batch_size=4, epochs=6, verbose=0)
  assert model.optimizer.learning_rate.num_train_steps == 12
  losses = history.history["loss"]
  assert losses[-1] < losses[0]
  accuracy = model.evaluate(np.array(TEXTS), LABELS, verbose=0, return_dict=True)["accuracy"]
  data = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(4)
  assert model.evaluate(data, verbose=0, return_dict=True)["accuracy"] == accuracy
  classes = np.argmax(model.predict(TEXTS[:2], verbose=0), -1)
  assert model.predict_labels(TEXTS[:2], verbose=0) == [model.label_list[i] for i in classes]


def test_pairs_and_regression(dirs):
  model = _model(dirs, text_pair=True)
  model.compile(num_train_steps=2)
  model.fit((TEXTS, TEXTS[::-1]), LABELS, batch_size=4, verbose=0)
  with pytest.raises(AlbertError, match="text pairs"):
    model.predict(TEXTS)
  regression = _model(dirs, num_classes=None, is_regression=True)
  regression.compile(num_train_steps=2)
  assert "MSE" in regression.fit(TEXTS, LABELS * 2.5, batch_size=4, verbose=0).history
  assert regression.predict(TEXTS, verbose=0).shape == (8, 1)


def test_bad_input_is_one_clear_error(dirs, tmp_path):
  model = _model(dirs)
  model.compile(num_train_steps=2)
  with pytest.raises(AlbertError, match="2 is outside num_classes=2"):
    model.fit(TEXTS, LABELS * 2, verbose=0)
  with pytest.raises(AlbertError, match="expected strings, got int at index 1"):
    model.fit(["a", 3], [0, 1], verbose=0)
  with pytest.raises(AlbertError, match="single texts"):
    model.predict((TEXTS, TEXTS))
  with pytest.raises(AlbertError, match="expected strings, got int32"):
    model.predict(tf.data.Dataset.from_tensor_slices([1, 2]).batch(2), verbose=0)
  big = make_tiny_spm_model(tmp_path, vocab_size=1100, name="big")
  with pytest.raises(AlbertError, match="vocabulary has .* pieces but .* vocab_size=1000"):
    TextClassifier.from_pretrained(dirs[TARBALL], num_classes=2, spm_model_file=big)


def test_callbacks_checkpoint_early_stopping_backup(dirs, tmp_path):
  model = _model(dirs)
  model.compile(num_train_steps=8)
  callbacks = [
      tf_keras.callbacks.ModelCheckpoint(str(tmp_path / "w.ckpt"), save_weights_only=True),
      tf_keras.callbacks.EarlyStopping(monitor="loss", patience=0, min_delta=10.0),
      tf_keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))]
  history = model.fit(TEXTS, LABELS, batch_size=4, epochs=4, callbacks=callbacks, verbose=0)
  assert len(history.history["loss"]) == 2  # EarlyStopping: no 10.0 improvement
  assert os.path.exists(str(tmp_path / "w.ckpt.index"))
  restored = _model(dirs)
  restored.load_weights(str(tmp_path / "w.ckpt")).expect_partial()  # (no optimizer yet)
  np.testing.assert_allclose(restored.predict(TEXTS, verbose=0),
                             model.predict(TEXTS, verbose=0), atol=1e-6)


def test_save_checkpoint_reads_back_and_save_for_serving_serves(dirs, tmp_path):
  model = _model(dirs, label_list=["no", "yes"])
  model.compile(num_train_steps=2)
  model.fit(TEXTS, LABELS, batch_size=4, verbose=0)
  want = model.predict(TEXTS, verbose=0)
  prefix = model.save_checkpoint(tmp_path / "out" / "model.ckpt-best")
  back = albert_tf.from_pretrained(prefix)
  assert back.label_list == ["no", "yes"] and back.model_type == "classifier"
  np.testing.assert_allclose(back.predict(TEXTS, max_seq_length=LENGTH)["probabilities"],
                             tf.nn.softmax(want).numpy(), atol=1e-5)
  again = TextClassifier.from_pretrained(prefix, sequence_length=LENGTH)
  np.testing.assert_allclose(again.predict(TEXTS, verbose=0), want, atol=1e-5)
  version = model.save_for_serving(tmp_path / "export")
  served = tf.saved_model.load(version).signatures["serving_default"]
  out = served(text_a=tf.constant(TEXTS))
  np.testing.assert_allclose(out["probabilities"].numpy(), tf.nn.softmax(want).numpy(),
                             atol=1e-5)


def test_get_config_round_trip(dirs):
  model = _model(dirs)
  clone = TextClassifier.from_config(model.get_config())
  assert clone.get_config() == model.get_config()


# In a fresh interpreter (logical devices are set before TensorFlow starts): the same seeded
# fit on one device and under a MirroredStrategy of 2 logical CPUs; prints both loss lists.
_MIRRORED = """
import json, sys
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from albert_tf.training.text_models import TextClassifier
texts, labels = json.loads(sys.argv[2]), np.array(json.loads(sys.argv[3]))
def run(strategy):
  with strategy.scope():
    model = TextClassifier.from_pretrained(sys.argv[1], num_classes=2, sequence_length=16,
                                           dropout_rate=0.0, seed=1)
    model.compile(learning_rate=1e-3)
  return model.fit(texts, labels, batch_size=4, epochs=3, shuffle=False,
                   verbose=0).history["loss"]
one = run(tf.distribute.get_strategy())
two = run(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
print(json.dumps({"one": one, "mirrored": two}))
"""


def test_strategy_scope_mirrored_matches_one_device(dirs):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO, TF_USE_LEGACY_KERAS="1")
  proc = subprocess.run([sys.executable, "-c", _MIRRORED, dirs[TARBALL], json.dumps(TEXTS),
                         json.dumps(LABELS.tolist())], capture_output=True, text=True, env=env,
                        timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  losses = json.loads(proc.stdout.strip().splitlines()[-1])
  assert len(losses["mirrored"]) == 3
  np.testing.assert_allclose(losses["mirrored"], losses["one"], rtol=1e-5)
