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
files, signatures and answers.
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


def test_fit_and_run_classifier_agree_step_for_step(tmp_path):
  root = tmp_path
  setup = finetune.mrpc_setup(str(root), n_train=8, n_dev=4)
  dirs = write_model_directories(root / "models", setup["spm"])
  init = dirs[TARBALL]
  proc = scripts.run_script("run_classifier.py", [
      "--task_name=MRPC", "--data_dir=glue", "--do_train", "--do_eval",
      f"--albert_config_file={init}/albert_config.json",
      f"--spm_model_file={init}/30k-clean.model", f"--init_checkpoint={init}/model.ckpt-best",
      f"--max_seq_length={LENGTH}", f"--train_batch_size={BATCH}", f"--train_step={STEPS}",
      "--warmup_step=2", f"--learning_rate={LR}", "--dropout_prob=0", f"--seed={SEED}",
      "--shuffle_train_input=false", "--iterations_per_loop=1", "--log_every_n_steps=1",
      f"--save_checkpoints_steps={STEPS}", "--output_dir=out", "--export_dir=export"],
      cwd=str(root), timeout=600)
  assert proc.returncode == 0, scripts.describe(proc)
  script_losses = scripts.training_losses(str(root / "out"))
  script_accuracy = float(scripts.eval_blocks(str(root / "out" / "eval_results.txt"))[-1][
      "eval_accuracy"])

  model = TextClassifier.from_pretrained(init, num_classes=2, text_pair=True,
                                         sequence_length=LENGTH, dropout_rate=0.0, seed=SEED)
  model.compile(learning_rate=LR, num_train_steps=STEPS, num_warmup_steps=2)
  a, b, y = _mrpc(os.path.join(setup["root"], "glue", "MRPC", "train.tsv"))
  steps = _StepLosses()
  model.fit((a, b), y, batch_size=BATCH, epochs=STEPS * BATCH // len(y), shuffle=False,
            callbacks=[steps], verbose=0)
  da, db, dy = _mrpc(os.path.join(setup["root"], "glue", "MRPC", "dev.tsv"))
  accuracy = model.evaluate((da, db), dy, verbose=0, return_dict=True)["accuracy"]

  assert len(script_losses) == STEPS and len(steps.losses) == STEPS
  np.testing.assert_allclose(steps.losses, script_losses, atol=1e-5, rtol=0)
  assert accuracy == script_accuracy
  _assert_same_export(scripts.versioned_export(str(root / "export")),
                      model.save_for_serving(root / "notebook_export", task_name="MRPC"),
                      da, db)


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
