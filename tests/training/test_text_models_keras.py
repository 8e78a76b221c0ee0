"""TextClassifier inside Keras' machinery: callbacks (ModelCheckpoint, EarlyStopping,
TensorBoard, BackupAndRestore resuming the schedule), mixed precision, and a tf.data whose labels
do not fit the head. (MirroredStrategy over 2 logical CPUs: test_text_models.py's
test_strategy_scope_mirrored_matches_one_device, in a fresh interpreter since the devices must
be set before TensorFlow starts.)

The tiny config has no dropout and the head's dropout is 0 here, so a step is deterministic:
two models with the same weights on the same batches give the same losses.
"""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf.errors import AlbertError
from albert_tf.training.text_models import TextClassifier
from tests.helpers.glue_fixtures import SENTENCES
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_albert_config

LENGTH = 16
TEXTS = SENTENCES[:8]
LABELS = np.array([i % 2 for i in range(8)])
BATCH = 4  # 2 steps per epoch


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
  return make_tiny_spm_model(tmp_path_factory.mktemp("text_models_keras"))


@pytest.fixture(scope="module")
def initial_weights(spm):
  """One random initialisation every model of this file starts from."""
  tf_keras.utils.set_random_seed(3)
  return _model(spm).get_weights()


def _model(spm, weights=None):
  """A built TextClassifier of the tiny config (with `weights`: those)."""
  model = TextClassifier(tiny_albert_config(), 2, spm, sequence_length=LENGTH, dropout_rate=0.0)
  model(tf.constant(TEXTS[:1]))  # builds the variables (eagerly: no function to trace)
  if weights is not None:
    model.set_weights(weights)
  return model


def _data(labels=LABELS):
  """TEXTS and `labels` as a tf.data of batches of BATCH, without tf.data's autotuning: each
  epoch's iterator would otherwise wait for its autotune thread's sleep (up to the next of
  1.27 s, 2.55 s, ...) when Keras drops it, idle time that would dominate these tiny fits."""
  options = tf.data.Options()
  options.autotune.enabled = False
  return tf.data.Dataset.from_tensor_slices((TEXTS, labels)).batch(BATCH).with_options(options)


def _trained(model):
  """The values of the model's trainable variables, in order."""
  return [v.numpy() for v in model.trainable_variables]


class _Record(tf_keras.callbacks.Callback):
  """The epochs begun and, before each step, the step number and its learning rate."""

  def __init__(self):
    super().__init__()
    self.epochs, self.rates = [], []

  def on_epoch_begin(self, epoch, logs=None):
    self.epochs.append(epoch)

  def on_train_batch_begin(self, batch, logs=None):
    optimizer = self.model.optimizer
    step = int(optimizer.iterations)
    self.rates.append((step, float(optimizer.learning_rate(step))))


def test_model_checkpoint_writes_each_epochs_weights_and_they_reload(spm, initial_weights,
                                                                     tmp_path):
  model = _model(spm, initial_weights)
  model.compile(learning_rate=1e-3, num_warmup_steps=1)
  after_epoch = []
  weights = tf_keras.callbacks.LambdaCallback(
      on_epoch_end=lambda epoch, logs: after_epoch.append(_trained(model)))
  path = str(tmp_path / "weights-{epoch}")
  model.fit(_data(), epochs=2, verbose=0,
            callbacks=[tf_keras.callbacks.ModelCheckpoint(path, save_weights_only=True),
                       weights])
  reloaded = _model(spm)
  for epoch, want in enumerate(after_epoch, start=1):
    reloaded.load_weights(path.format(epoch=epoch)).expect_partial()  # (no optimizer here)
    got = _trained(reloaded)
    assert len(got) == len(want)
    for mine, theirs in zip(got, want):
      np.testing.assert_array_equal(mine, theirs)
  assert not all(np.array_equal(a, b) for a, b in zip(*after_epoch))  # the epochs' files differ


def test_early_stopping_stops_on_a_plateau(spm, initial_weights):
  model = _model(spm, initial_weights)
  model.compile(optimizer=tf_keras.optimizers.SGD(0.0))  # nothing moves: a plateau
  stop = tf_keras.callbacks.EarlyStopping(monitor="loss", patience=2)
  history = model.fit(_data(), epochs=10, verbose=0,
                      callbacks=[stop])
  losses = history.history["loss"]
  assert len(losses) == 3 and stop.stopped_epoch == 2  # the best, then 2 epochs no better
  assert losses == pytest.approx([losses[0]] * 3, abs=1e-6)


def test_tensorboard_writes_the_epoch_losses(spm, initial_weights, tmp_path):
  model = _model(spm, initial_weights)
  model.compile(learning_rate=1e-3)
  history = model.fit(_data(), epochs=2, verbose=0,
                      callbacks=[tf_keras.callbacks.TensorBoard(str(tmp_path / "logs"))])
  logged = {}
  for events in glob.glob(str(tmp_path / "logs" / "train" / "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(events):
      for value in event.summary.value:
        if value.tag == "epoch_loss":
          logged[event.step] = float(tf.make_ndarray(value.tensor))
  assert sorted(logged) == [0, 1]
  assert [logged[0], logged[1]] == pytest.approx(history.history["loss"], rel=1e-6)


class _Interrupt(tf_keras.callbacks.Callback):
  """Stops the run at the end of epoch `epoch` (after BackupAndRestore saved it), as a crash."""

  def __init__(self, epoch):
    super().__init__()
    self.epoch = epoch

  def on_epoch_end(self, epoch, logs=None):
    if epoch == self.epoch:
      raise KeyboardInterrupt(f"interrupted after epoch {epoch}")


def test_backup_and_restore_resumes_the_epoch_and_the_schedule(spm, initial_weights, tmp_path):
  def run(callbacks):
    model = _model(spm, initial_weights)
    model.compile(learning_rate=1e-3, num_warmup_steps=2)  # 8 steps: fit() sets the length
    record = _Record()
    history = model.fit(_data(), epochs=4, verbose=0,
                        callbacks=callbacks + [record])
    return model, record, history

  _, whole_record, whole_history = run([])
  backup = str(tmp_path / "backup")
  with pytest.raises(KeyboardInterrupt):
    run([tf_keras.callbacks.BackupAndRestore(backup), _Interrupt(1)])
  resumed, record, history = run([tf_keras.callbacks.BackupAndRestore(backup)])
  assert record.epochs == [2, 3]  # epochs 0 and 1 were done before the interruption
  # The schedule continues at step 4 of the same 8 steps: not restarted, not rescaled.
  assert resumed.optimizer.learning_rate.num_train_steps == 8
  assert [s for s, _ in record.rates] == [4, 5, 6, 7]
  assert record.rates == [(s, pytest.approx(r, rel=1e-6)) for s, r in whole_record.rates[4:]]
  # The weights and Adam's moments came back too: the last epochs' losses are the whole run's.
  np.testing.assert_allclose(history.history["loss"], whole_history.history["loss"][2:],
                             rtol=1e-5)
  # BackupAndRestore removed its state from the model when the fit ended: it fits again.
  assert len(resumed.fit(_data(), epochs=1, verbose=0).history["loss"]) == 1


def test_mixed_precision_fits_with_float32_logits(spm, initial_weights):
  # float16: the loss-scale path of train_step (bfloat16 needs none, and is the same otherwise).
  tf_keras.mixed_precision.set_global_policy("mixed_float16")
  try:
    model = _model(spm, initial_weights)
    model.compile(learning_rate=1e-3)
    history = model.fit(_data(), epochs=1, verbose=0)
    logits = model(tf.constant(TEXTS[:2]))
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  assert np.all(np.isfinite(history.history["loss"]))
  assert logits.dtype == tf.float32
  assert model.classifier.encoder.compute_dtype == "float16"
  assert all(v.dtype == tf.float32 for v in model.trainable_variables)  # float32 masters
  # Keras wrapped the recipe's optimizer in a loss scale optimizer; the recipe is inside.
  assert isinstance(model.optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
  assert model.optimizer.inner_optimizer.global_clipnorm == 1.0


def test_tf_data_labels_outside_num_classes_are_one_clear_error(spm, initial_weights):
  model = _model(spm, initial_weights)
  model.compile(learning_rate=1e-3)
  for call, labels, bad in ((model.fit, [0, 1, 0, 5, 0, 1, 0, 1], 5),
                            (model.evaluate, [0, 1, 0, 1, 0, -1, 0, 1], -1)):
    with pytest.raises(AlbertError) as raised:
      call(_data(labels), verbose=0)
    # The message alone: no TensorFlow node names, shapes or op dump.
    assert str(raised.value) == f"labels: {bad} is outside num_classes=2 (expected 0..1)"
  # (In range, the check is not in the way: every fit of this file reads its data through it.)
