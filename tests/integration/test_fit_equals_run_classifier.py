"""One model, two doors: the same seed, data and recipe through TextClassifier.fit() and through
run_classifier.py give the same loss at each of the first 20 steps and the same dev accuracy.

What both sides share, and why each setting is what it is: the tiny pretrainer checkpoint of
tests/helpers/model_dirs.py (no dropout in the config, --dropout_prob=0 for the head, as v2),
--seed (set right before the classifier is built: the head's initial weights), the training
examples in file order (--shuffle_train_input=false; fit(shuffle=False) over 2 batches per
epoch), AdamW with 2 warm-up steps of 20 and clipping at 1.0. run_classifier.py's per-step loss
is read from its TensorBoard scalars (--log_every_n_steps=1: the loss of each step in float32),
fit()'s from a callback (Keras logs each epoch's running mean: step losses are its differences).
The same run's --export_dir and save_for_serving() then write the same SavedModel: the same
files, signatures and answers. With --early_exit=patience / early_exit="patience" the two doors
train on the same PABEE loss and answer from the same exit layers.
"""

import csv
import os

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf.training.text_models import TextClassifier
from tests.helpers import finetune, scripts
from tests.helpers.model_dirs import TARBALL, write_model_directories

STEPS, BATCH, LENGTH, SEED, LR = 20, 4, 24, 7, 1e-3


def _mrpc(path):
  with open(path, encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
  return [r[3] for r in rows], [r[4] for r in rows], np.array([int(r[0]) for r in rows])


class _StepLosses(tf_keras.callbacks.Callback):
  """Each step's own loss, from Keras' running mean of the epoch."""

  def __init__(self):
    super().__init__()
    self.losses, self._mean = [], 0.0

  def on_epoch_begin(self, epoch, logs=None):
    self._mean = 0.0

  def on_train_batch_end(self, batch, logs=None):
    mean = float(logs["loss"])
    self.losses.append((batch + 1) * mean - batch * self._mean)
    self._mean = mean


def _run_classifier(root, init, steps, *extra):
  """run_classifier.py on MRPC from `init`, with the settings fit() is given below."""
  proc = scripts.run_script("run_classifier.py", [
      "--task_name=MRPC", "--data_dir=glue", "--do_train",
      f"--albert_config_file={init}/albert_config.json",
      f"--spm_model_file={init}/30k-clean.model", f"--init_checkpoint={init}/model.ckpt-best",
      f"--max_seq_length={LENGTH}", f"--train_batch_size={BATCH}", f"--train_step={steps}",
      "--warmup_step=2", f"--learning_rate={LR}", "--dropout_prob=0", f"--seed={SEED}",
      "--shuffle_train_input=false", "--iterations_per_loop=1", "--log_every_n_steps=1",
      f"--save_checkpoints_steps={steps}", "--output_dir=out", *extra],
      cwd=str(root), timeout=600)
  assert proc.returncode == 0, scripts.describe(proc)
  return scripts.training_losses(str(root / "out"))


def _fit(setup, init, steps, **model_args):
  """TextClassifier fit as the script trains: the same head seed, recipe and batches."""
  model = TextClassifier.from_pretrained(init, num_classes=2, text_pair=True,
                                         sequence_length=LENGTH, dropout_rate=0.0, seed=SEED,
                                         **model_args)
  model.compile(learning_rate=LR, num_train_steps=steps, num_warmup_steps=2)
  a, b, y = _mrpc(os.path.join(setup["root"], "glue", "MRPC", "train.tsv"))
  losses = _StepLosses()
  model.fit((a, b), y, batch_size=BATCH, epochs=steps * BATCH // len(y), shuffle=False,
            callbacks=[losses], verbose=0)
  return model, losses.losses


def test_fit_and_run_classifier_agree_step_for_step(tmp_path):
  root = tmp_path
  setup = finetune.mrpc_setup(str(root), n_train=8, n_dev=4)
  init = write_model_directories(root / "models", setup["spm"])[TARBALL]
  script_losses = _run_classifier(root, init, STEPS, "--do_eval", "--export_dir=export")
  script_accuracy = float(scripts.eval_blocks(str(root / "out" / "eval_results.txt"))[-1][
      "eval_accuracy"])

  model, losses = _fit(setup, init, STEPS)
  da, db, dy = _mrpc(os.path.join(setup["root"], "glue", "MRPC", "dev.tsv"))
  accuracy = model.evaluate((da, db), dy, verbose=0, return_dict=True)["accuracy"]

  assert len(script_losses) == STEPS and len(losses) == STEPS
  np.testing.assert_allclose(losses, script_losses, atol=1e-5, rtol=0)
  assert accuracy == script_accuracy
  _assert_same_export(scripts.versioned_export(str(root / "export")),
                      model.save_for_serving(root / "notebook_export", task_name="MRPC"),
                      da, db)


def _split_first_layer(model, texts):
  """Moves the class boundary of the layer-1 internal classifier of `model` (a TextClassifier
  with early exit) into the widest middle gap of its margins on `texts`: about half the
  examples change class there, so at patience 1 some leave at layer 2 and some run every layer,
  whatever a few training steps made of the heads (they often answer one class for all)."""
  head = model.classifier.early_exit_classifiers.heads[0]
  logits = model.classifier(model.preprocess(texts), training=False)["layer_logits"].numpy()
  bias = head.output_bias.numpy()
  bias[0] -= finetune.middle_gap_boundary(logits[:, 0, 0] - logits[:, 0, 1])
  head.output_bias.assign(bias)


def test_early_exit_fit_and_run_classifier_agree(tmp_path):
  """--early_exit=patience, 3 layers: PABEE's loss (every layer's, weighted) step for step; the
  script's checkpoint read into a TextClassifier answers as the notebook's model; and a
  notebook model saved with save_checkpoint, predicted by run_classifier.py --do_predict
  --early_exit_patience=1, leaves at the layers of the script's exit_layers.tsv with its
  probabilities when read back with patience 1."""
  root, steps = tmp_path, 8
  setup = finetune.mrpc_setup(str(root), n_train=8, n_dev=4, n_test=16)
  init = write_model_directories(root / "models", setup["spm"], num_hidden_layers=3)[TARBALL]
  script_losses = _run_classifier(root, init, steps, "--early_exit=patience")
  model, losses = _fit(setup, init, steps, early_exit="patience")
  assert len(script_losses) == steps and len(losses) == steps
  np.testing.assert_allclose(losses, script_losses, atol=1e-5, rtol=0)

  ta, tb, _ = _mrpc(os.path.join(setup["root"], "glue", "MRPC", "test.tsv"))
  # Without a patience every layer answers; the script's trained model is the notebook's.
  assert set(model.predict_exit_layers((ta, tb)).tolist()) == {3}
  trained = TextClassifier.from_pretrained(root / "out", text_pair=True, sequence_length=LENGTH,
                                           early_exit="patience")
  np.testing.assert_allclose(trained.predict((ta, tb), verbose=0),
                             model.predict((ta, tb), verbose=0), atol=1e-4)

  # The other way: the notebook's model (its first internal classifier moved so that exits
  # differ) through save_checkpoint, then run_classifier.py --do_predict alone.
  _split_first_layer(model, (ta, tb))
  model.patience = 1
  exits = model.predict_exit_layers((ta, tb)).tolist()
  assert set(exits) == {2, 3}, exits  # some leave early, some run every layer
  model.save_checkpoint(root / "notebook" / "model.ckpt-best")
  proc = scripts.run_script("run_classifier.py", [
      "--task_name=MRPC", "--data_dir=glue", "--do_predict", "--output_dir=notebook",
      "--albert_config_file=notebook/albert_config.json",
      "--spm_model_file=notebook/30k-clean.model", f"--max_seq_length={LENGTH}",
      "--early_exit=patience", "--early_exit_patience=1"], cwd=str(root), timeout=600)
  assert proc.returncode == 0, scripts.describe(proc)
  script_exits = [int(line.split("\t")[1]) for line in
                  (root / "notebook" / "exit_layers.tsv").read_text().splitlines()[1:]]
  assert script_exits == exits
  probabilities = tf.nn.softmax(model.predict((ta, tb), verbose=0)).numpy()
  np.testing.assert_allclose(probabilities, np.loadtxt(root / "notebook" / "test_results.tsv"),
                             atol=1e-5)
  back = TextClassifier.from_pretrained(root / "notebook", text_pair=True,
                                        sequence_length=LENGTH, early_exit="patience",
                                        patience=1)
  assert back.predict_exit_layers((ta, tb)).tolist() == exits
  np.testing.assert_allclose(back.predict((ta, tb), verbose=0),
                             model.predict((ta, tb), verbose=0), atol=1e-6)


def _files(version_dir):
  return sorted(os.path.relpath(os.path.join(d, f), version_dir)
                for d, _, files in os.walk(version_dir) for f in files
                if not f.startswith("variables.data"))


def _assert_same_export(script_dir, notebook_dir, texts_a, texts_b):
  assert _files(notebook_dir) == _files(script_dir)
  script, notebook = tf.saved_model.load(script_dir), tf.saved_model.load(notebook_dir)
  assert sorted(notebook.signatures) == sorted(script.signatures)
  for name, signature in script.signatures.items():
    other = notebook.signatures[name]
    assert other.structured_input_signature == signature.structured_input_signature, name
    assert other.structured_outputs.keys() == signature.structured_outputs.keys(), name
  request = dict(text_a=tf.constant(texts_a), text_b=tf.constant(texts_b))
  want = script.signatures["serving_default"](**request)
  got = notebook.signatures["serving_default"](**request)
  np.testing.assert_allclose(got["probabilities"].numpy(), want["probabilities"].numpy(),
                             atol=1e-5)
