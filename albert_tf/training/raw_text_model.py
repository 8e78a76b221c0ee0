"""RawTextModel: what every notebook task model shares (raw text in, the scripts' recipe).

A task model (TextClassifier, and the multiple-choice, SQuAD and tagging models beside it) is a
tf_keras.Model holding an AlbertPreprocessor and the scripts' task model on token ids. This base
owns what is the same for all of them:
- compile() defaults that reproduce the scripts' recipe: the official AdamW or LAMB with the
  official weight-decay exclusions, warm-up then linear decay, gradients clipped to global norm
  1.0 after the replicas' sum; the number of steps left open until fit() knows it;
- train_step with the trainer's dense gradients (see train_step);
- fit/evaluate/predict on Python lists, NumPy arrays, pandas columns or a tf.data, the texts and
  labels checked by the subclass's `_texts` / `_labels` before Keras sees them;
- the files save_checkpoint() writes beside a TF1 checkpoint.

A subclass sets `task_model` (the model whose variables carry the official names), and defines
`_default_loss`, `_default_metrics`, `_texts` and `_labels`.
"""

import math
import os

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf.checkpoints import tf1
from albert_tf.common import fileio, output_layout
from albert_tf.errors import AlbertError
from albert_tf.training import optimizer as optimizer_lib

# The scripts' defaults (their flags): the recipe compile() reproduces.
DEFAULT_LEARNING_RATE = 5e-5
CLIP_NORM = 1.0


class AlbertTextError(AlbertError, TypeError):
  """Texts that are not strings, or the wrong number of text columns for the model."""


def as_text_column(texts, what):
  """A list / NumPy array / pandas column of strings -> NumPy object array [N]."""
  if isinstance(texts, str):
    texts = [texts]
  values = np.asarray(list(texts) if not isinstance(texts, np.ndarray) else texts, dtype=object)
  values = values.reshape(-1)
  bad = [i for i, v in enumerate(values) if not isinstance(v, (str, bytes))]
  if bad:
    raise AlbertTextError(f"{what}: expected strings, got {type(values[bad[0]]).__name__} "
                          f"at index {bad[0]}")
  return values


def is_token_ids(x):
  """Whether x (inputs, or their spec) are token ids (a dict with input_ids) rather than texts:
  what a tf.data pipeline holding the preprocessor yields (as a TPU needs: no string ops there)."""
  return isinstance(x, dict) and "input_ids" in x


def check_string_spec(x, token_ids=False):
  """Raises AlbertTextError unless the texts of a tf.data / tensor x are tf.string (token_ids:
  or token ids, a dict with input_ids).

  Checked here: inside Keras' traced step the error would come wrapped in TensorFlow's."""
  spec = x.element_spec if isinstance(x, tf.data.Dataset) else tf.TensorSpec.from_tensor(x)
  texts = spec[0] if isinstance(spec, tuple) else spec  # (x, y[, weights]) or x
  if token_ids and is_token_ids(texts):
    return
  dtypes = {s.dtype for s in tf.nest.flatten(texts)}
  if dtypes - {tf.string}:
    raise AlbertTextError(f"texts: expected strings, got "
                          f"{', '.join(sorted(d.name for d in dtypes - {tf.string}))} values")


class RawTextModel(tf_keras.Model):
  """The shared half of the notebook task models (see the module docstring).

  Attributes a subclass sets in __init__:
    preprocessor: its text preprocessor layer (strings -> the task model's int32 inputs).
    task_model: the scripts' model on token ids (official variable names: weight decay and
      save_checkpoint use them).
  Class attribute:
    default_learning_rate: the peak rate of compile()'s "adamw"/"lamb" (the script's default).
  """

  default_learning_rate = DEFAULT_LEARNING_RATE
  # tf_keras' BackupAndRestore deletes the model's `_training_state` when its fit() ends, and the
  # next fit() reads it: this default keeps a model fittable again afterwards.
  _training_state = None

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    self._recipe = None  # compile()'s official optimizer while its number of steps is open

  @property
  def config(self):
    return self.task_model.config

  # ------------------------------------------------------------------ loading
  @staticmethod
  def _check_sentencepiece(loaded, path):
    """A task model tokenizes in the graph with SentencePiece: the checkpoint must come with it."""
    if loaded.tokenizer is None or not loaded.tokenizer.spm_model_file:
      raise AlbertError(f"{path}: no SentencePiece model found; pass spm_model_file=")

  def _take_weights(self, loaded, fine_tuned):
    """Copies a loaded model's weights in: the whole task model when `fine_tuned` (the same
    head), else the encoder only (the new head keeps its initial weights)."""
    source = loaded.model if fine_tuned else loaded.model.encoder
    target = self.task_model if fine_tuned else self.task_model.encoder
    target.set_weights(source.get_weights())

  # ------------------------------------------------------------------ what a subclass defines
  def _default_loss(self):
    raise NotImplementedError

  def _default_metrics(self):
    raise NotImplementedError

  def _texts(self, x):
    """x checked and as the model takes it (NumPy string columns; a tf.data untouched)."""
    raise NotImplementedError

  def _labels(self, y):
    """y checked against the head (NumPy); None / tf.data / tensors untouched."""
    raise NotImplementedError

  def _training_outputs(self, x):
    """(what the metrics read, what the loss reads) of a training forward pass; both the
    model's output unless the task's loss reads more (early exit: every layer's logits)."""
    y_pred = self(x, training=True)
    return y_pred, y_pred

  def _rows(self, x):
    """The number of examples of checked NumPy inputs x (for the schedule's length)."""
    return len(tf.nest.flatten(x)[0])

  # ------------------------------------------------------------------ the recipe
  def compile(self, optimizer="adamw", loss=None, metrics=None, learning_rate=None,
              num_train_steps=None, num_warmup_steps=0, weight_decay_rate=0.01, **kwargs):
    """Keras' compile with the script's recipe as the defaults.

    Args:
      optimizer: "adamw" (the scripts' default) or "lamb": the official optimizer with the
        official weight-decay exclusions, warm-up over num_warmup_steps then linear decay to 0
        at num_train_steps, gradients clipped to global norm 1.0; or any Keras optimizer.
      loss: default: the task's loss (as the script's).
      metrics: default: the task's metric.
      learning_rate: the peak rate of "adamw"/"lamb" (default: the script's).
      num_train_steps: the schedule's length; None: fit() sets it (epochs x steps per epoch).
      num_warmup_steps, weight_decay_rate: as the scripts' --warmup_step and the official 0.01.
    """
    loss = self._default_loss() if loss is None else loss
    metrics = self._default_metrics() if metrics is None else metrics
    self._recipe = None
    if isinstance(optimizer, str) and optimizer.lower() in optimizer_lib.OPTIMIZERS:
      recipe = dict(name=optimizer.lower(),
                    learning_rate=self.default_learning_rate if learning_rate is None
                    else learning_rate,
                    num_warmup_steps=num_warmup_steps, weight_decay_rate=weight_decay_rate)
      optimizer = self._official_optimizer(recipe, num_train_steps or 1)
      if num_train_steps is None:
        self._recipe = recipe
    elif learning_rate is not None or num_train_steps is not None:
      raise AlbertError("learning_rate= and num_train_steps= set compile()'s own optimizer "
                        "(\"adamw\" or \"lamb\"); give yours its own schedule")
    self._compile_args = dict(loss=loss, metrics=metrics, **kwargs)
    self._bind(optimizer)
    super().compile(optimizer=optimizer, **self._compile_args)

  def _official_optimizer(self, recipe, num_train_steps):
    optimizer = optimizer_lib.create_optimizer(
        recipe["name"], recipe["learning_rate"], num_train_steps,
        num_warmup_steps=recipe["num_warmup_steps"],
        weight_decay_rate=recipe["weight_decay_rate"])
    # Clipped after the replicas' gradients are summed (Keras aggregates first), as the trainer.
    optimizer.global_clipnorm = CLIP_NORM
    return optimizer

  def _bind(self, optimizer):
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    if hasattr(inner, "bind_model"):  # weight decay decided on the official variable names
      inner.bind_model(self.task_model)

  # ------------------------------------------------------------------ Keras' loops
  def train_step(self, data):
    """Keras' step, with the trainer's gradients: dense before they are clipped.

    The embedding tables' gradients are IndexedSlices, one row per token of the batch; their
    global norm counts a token seen twice as two rows instead of one summed row, so Keras
    would clip them differently from the scripts (the trainer clips dense gradients)."""
    x, y, sample_weight = tf_keras.utils.unpack_x_y_sample_weight(data)
    optimizer = self.optimizer
    loss_scaling = isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
    with tf.GradientTape() as tape:
      y_pred, loss_input = self._training_outputs(x)
      loss = self.compute_loss(x, y, loss_input, sample_weight)
      scaled = optimizer.get_scaled_loss(loss) if loss_scaling else loss
    variables = self.trainable_variables
    grads = tape.gradient(scaled, variables)
    if loss_scaling:
      grads = optimizer.get_unscaled_gradients(grads)
    # A variable the task's output does not use (the pooler of a per-piece head) gets a zero
    # gradient, as the trainer gives it (steps.py): its weight decay then runs as the script's.
    grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
             for g, v in zip(grads, variables)]
    optimizer.apply_gradients(zip(grads, variables))
    return self.compute_metrics(x, y, y_pred, sample_weight)

  def _schedule_steps(self, x, epochs, batch_size, steps_per_epoch, initial_epoch):
    """The number of updates fit() will run, for compile()'s open schedule."""
    if steps_per_epoch is None:
      if isinstance(x, tf.data.Dataset):
        count = int(x.cardinality())
        if count < 0:
          raise AlbertError("fit(): the dataset's length is unknown; pass steps_per_epoch= or "
                            "compile(num_train_steps=...)")
        steps_per_epoch = count
      else:
        steps_per_epoch = math.ceil(self._rows(x) / (batch_size or 32))
    return max(1, steps_per_epoch * (epochs - initial_epoch))

  def fit(self, x=None, y=None, batch_size=None, epochs=1, steps_per_epoch=None,
          initial_epoch=0, **kwargs):
    """Keras' fit on texts (lists, NumPy arrays, pandas columns) or a tf.data of texts; the
    labels are checked against the head first."""
    x, y = self._texts(x), self._labels(y)
    if self._recipe is not None:  # compile() left the number of steps to fit()
      steps = self._schedule_steps(x, epochs, batch_size, steps_per_epoch, initial_epoch)
      optimizer = self._official_optimizer(self._recipe, steps)
      self._recipe = None
      self._bind(optimizer)
      super().compile(optimizer=optimizer, **self._compile_args)
    return super().fit(x, y, batch_size=batch_size, epochs=epochs,
                       steps_per_epoch=steps_per_epoch, initial_epoch=initial_epoch, **kwargs)

  def evaluate(self, x=None, y=None, **kwargs):
    return super().evaluate(self._texts(x), self._labels(y), **kwargs)

  def predict(self, x, **kwargs):
    return super().predict(self._texts(x), **kwargs)

  # ------------------------------------------------------------------ saving
  def _save_tf1_checkpoint(self, path, label_list_payload=None):
    """Writes task_model in the official TF1 layout at the prefix `path`, with
    albert_config.json, 30k-clean.model (the preprocessor's vocabulary) and, when given,
    label_list.json beside it, so that from_pretrained(path) reads it back."""
    path = os.fspath(path)
    directory = os.path.dirname(path) or "."
    fileio.makedirs(directory)
    tf1.save_tf1_checkpoint(self.task_model, path)
    fileio.write_text(os.path.join(directory, output_layout.ALBERT_CONFIG),
                      self.config.to_json_string())
    spm_copy = os.path.join(directory, output_layout.SPM_MODEL)
    if os.path.abspath(spm_copy) != os.path.abspath(self.preprocessor.spm_model_file):
      fileio.copy(self.preprocessor.spm_model_file, spm_copy)
    if label_list_payload is not None:
      fileio.write_json(os.path.join(directory, output_layout.LABEL_LIST), label_list_payload)
    return path
