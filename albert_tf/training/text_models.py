"""Keras models of raw text for notebooks: `TextClassifier` (text or pair classification and
regression), the preprocessor inside, `compile()`/`fit()` with the scripts' recipe.

  model = albert_tf.TextClassifier.from_pretrained("albert_base", num_classes=2)
  model.compile()                       # AdamW, warm-up + linear decay, clipping at 1.0
  model.fit(texts, labels, epochs=2, batch_size=32)
  model.predict(texts)                  # logits [N, num_classes]
  model.save_for_serving("export/")     # the SavedModel run_classifier.py --export_dir writes
  model.save_checkpoint("out/model.ckpt-best")   # official TF1 layout; from_pretrained reads it

Early exit (PABEE, as run_classifier.py --early_exit=patience): `early_exit="patience"` adds the
internal classifiers and trains on the weighted average of every layer's loss (EarlyExitLoss);
with `patience` set, predict() answers each text from its exit layer (predict_exit_layers()
says which), and save_for_serving() exports the loop.

What is the scripts' and what is Keras': the classifier is the scripts' AlbertClassifier (same
variables, official names), its inputs come from an AlbertPreprocessor (the scripts' ids), the
default optimizer is `optimizer.create_optimizer` (run_classifier.py's AdamW with the official
weight-decay exclusions, or LAMB) with gradients clipped to global norm 1.0 after the replicas'
sum, as the trainer does, and the loss is the mean softmax cross-entropy (squared error for
regression) over the global batch, as the task's. Everything else (the loop, callbacks,
`strategy.scope()`, any optimizer, loss or metric) is Keras'.
"""

import contextlib
import os
import re

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf import pretrained as pretrained_lib
from albert_tf.common import kinds, task_labels
from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.checkpoints import formats
from albert_tf.checkpoints.init import restore_model_weights
from albert_tf.export import export_classifier
from albert_tf.heads.early_exit import weighted_layer_losses
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.text.preprocessor import AlbertPreprocessor
from albert_tf.text.tokenization import check_vocabulary_fits
from albert_tf.training.raw_text_model import AlbertTextError
from albert_tf.training.raw_text_model import as_text_column
from albert_tf.training.raw_text_model import check_string_spec
from albert_tf.training.raw_text_model import is_token_ids
from albert_tf.training.raw_text_model import RawTextModel


# A class label the head has no row for; "{}" is the label (NumPy's, or the pipeline's check).
_OUTSIDE = "labels: {} is outside num_classes={} (expected 0..{})"
# How tf.debugging.Assert's failure names our message, inside TensorFlow's node and op dump.
_ASSERTED = re.compile(r"assertion failed: \[(labels: -?\d+ is outside num_classes=\d+ "
                       r"\(expected 0\.\.\d+\))\]")


@contextlib.contextmanager
def _label_errors():
  """Keras' loops raising the pipeline's label check: AlbertError with its message alone."""
  try:
    yield
  except tf.errors.InvalidArgumentError as e:
    found = _ASSERTED.search(e.message)
    if not found:
      raise
    raise AlbertError(found.group(1)) from None


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class EarlyExitLoss(tf_keras.losses.Loss):
  """Early exit's training loss around a task's loss, as run_classifier.py --early_exit's.

  On every layer's logits [batch, L, num_classes] (training): per example, the layers' losses
  weighted l / (1 + ... + L) (heads/early_exit.py); on one layer's logits [batch, num_classes]
  (evaluation): the task's loss of those.

  Args:
    loss: the task's loss: a Keras loss object, function or name.
  """

  def __init__(self, loss, name="early_exit_loss", **kwargs):
    super().__init__(name=name, **kwargs)
    loss = tf_keras.losses.get(loss)
    # A function gets Keras' label/prediction rank matching, as a Loss object has it.
    self.task_loss = (loss if isinstance(loss, tf_keras.losses.Loss)
                      else tf_keras.losses.LossFunctionWrapper(loss))

  def call(self, y_true, y_pred):
    if y_pred.shape.rank == 3:
      return weighted_layer_losses(self.task_loss.call, y_true, y_pred)
    return self.task_loss.call(y_true, y_pred)

  def get_config(self):
    return {**super().get_config(), "loss": tf_keras.losses.serialize(self.task_loss)}

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    return cls(tf_keras.losses.deserialize(config.pop("loss")), **config)


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class TextClassifier(RawTextModel):
  """Raw text in, logits out: AlbertPreprocessor + AlbertClassifier.

  Inputs: texts tf.string [batch] (text_pair=False), or a pair (text_a, text_b) of [batch];
    or the preprocessor's output, a dict of int32 [batch, sequence_length] input_ids,
    input_mask, segment_ids (a tf.data that preprocesses, as TPUs need: no strings on them).
  Output: float32 logits [batch, num_classes] (regression: the score, [batch, 1]).

  Attributes:
    preprocessor: the AlbertPreprocessor (usable alone, e.g. in a tf.data map).
    classifier: the AlbertClassifier on token ids (what the scripts train, export and save).
    label_list: the class names (None for regression).
    patience: early exit's patience at inference (settable; None: every layer answers).
  """

  def __init__(self, config, num_classes, spm_model_file, sequence_length=128,
               text_pair=False, is_regression=False, label_list=None, do_lower_case=True,
               dropout_rate=0.1, early_exit=None, patience=None, regression_threshold=0.1,
               **kwargs):
    kwargs.setdefault("name", "text_classifier")
    super().__init__(**kwargs)
    config = config if isinstance(config, AlbertConfig) else AlbertConfig.from_dict(config)
    if is_regression:
      num_classes, label_list = 1, None
    elif label_list is not None and len(label_list) != num_classes:
      raise AlbertError(f"label_list has {len(label_list)} names for num_classes={num_classes}")
    self.preprocessor = AlbertPreprocessor(spm_model_file, sequence_length=sequence_length,
                                           do_lower_case=do_lower_case)
    if sequence_length > config.max_position_embeddings:
      raise AlbertError(f"sequence_length={sequence_length}: the model has "
                        f"{config.max_position_embeddings} positions (max_position_embeddings)")
    # The vocabulary must be the checkpoint's: more pieces than embedding rows is another model's.
    check_vocabulary_fits(self.preprocessor._py_tokenizer, config)  # pylint: disable=protected-access
    self.classifier = AlbertClassifier(config, num_classes=num_classes,
                                       is_regression=is_regression, dropout_rate=dropout_rate,
                                       early_exit=early_exit, patience=patience,
                                       regression_threshold=regression_threshold)
    self.text_pair = bool(text_pair)
    self.label_list = (list(label_list) if label_list is not None
                       else None if is_regression else [str(i) for i in range(num_classes)])

  @property
  def task_model(self):
    return self.classifier

  @property
  def num_classes(self):
    return self.classifier.num_classes

  @property
  def is_regression(self):
    return self.classifier.is_regression

  @property
  def early_exit(self):
    return self.classifier.early_exit

  @property
  def patience(self):
    return self.classifier.patience

  @patience.setter
  def patience(self, value):
    if value is not None and not self.early_exit:
      raise AlbertError("patience needs a model built with early_exit=\"patience\"")
    self.classifier.patience = value
    # Keras keeps its traced predict/evaluate functions: the loop's patience is traced in.
    self.predict_function = self.test_function = None

  # ------------------------------------------------------------------ loading
  @classmethod
  def from_pretrained(cls, path, num_classes=None, label_list=None, sequence_length=128,
                      text_pair=False, is_regression=False, dropout_rate=0.1, seed=None,
                      albert_config_file=None, spm_model_file=None, do_lower_case=None,
                      early_exit=None, patience=None, regression_threshold=0.1):
    """A TextClassifier on the weights at `path` (anything albert_tf.from_pretrained reads).

    A pretrained encoder gets a new head (num_classes, or len(label_list); is_regression: one
    score), initialised as run_classifier.py does (truncated normal 0.02, seeded by `seed`
    when given); a fine-tuned classifier keeps its head and class names.

    early_exit="patience": with internal classifiers (PABEE); those of a checkpoint trained
    with early exit are read, else they start new, as run_classifier.py --early_exit's.
    patience, regression_threshold: as --early_exit_patience and --early_exit_threshold.
    """
    loaded = pretrained_lib.from_pretrained(path, albert_config_file=albert_config_file,
                                            spm_model_file=spm_model_file,
                                            do_lower_case=do_lower_case)
    cls._check_sentencepiece(loaded, path)
    fine_tuned = loaded.model_type in (kinds.CLASSIFIER, kinds.REGRESSION)
    if fine_tuned:
      is_regression = loaded.model_type == kinds.REGRESSION
      label_list = label_list or loaded.label_list
      num_classes = num_classes or loaded.model.num_classes
      if num_classes != loaded.model.num_classes:
        raise AlbertError(f"{path}: its head has {loaded.model.num_classes} classes, not "
                          f"num_classes={num_classes}")
    elif is_regression:
      num_classes = 1
    else:
      num_classes = num_classes or (len(label_list) if label_list else None)
      if not num_classes or num_classes < 2:
        raise AlbertError(f"num_classes={num_classes}: a classifier needs 2 or more classes "
                          "(is_regression=True for one score)")
    if seed is not None:
      tf_keras.utils.set_random_seed(int(seed))  # the head's initial weights, then dropout
    model = cls(loaded.config, num_classes, loaded.tokenizer.spm_model_file,
                sequence_length=sequence_length, text_pair=text_pair,
                is_regression=is_regression, label_list=label_list,
                do_lower_case=loaded.tokenizer.do_lower_case, dropout_rate=dropout_rate,
                early_exit=early_exit, patience=patience,
                regression_threshold=regression_threshold)
    if (early_exit and fine_tuned and loaded.checkpoint
        and formats.detect(loaded.checkpoint, hub_modules=False).holds_early_exit()):
      restore_model_weights(model.classifier, loaded.checkpoint, label_list=model.label_list)
    else:
      model._take_weights(loaded, fine_tuned)  # pylint: disable=protected-access
    return model

  def _take_weights(self, loaded, fine_tuned):
    if not (self.early_exit and fine_tuned):
      super()._take_weights(loaded, fine_tuned)
      return
    # A classifier trained without early exit: its encoder and head; the internal ones new.
    for part in ("encoder", "classifier_head"):
      getattr(self.classifier, part).set_weights(getattr(loaded.model, part).get_weights())

  # ------------------------------------------------------------------ the forward pass
  def preprocess(self, inputs):
    """Texts (or a pair) -> the classifier's int32 [batch, sequence_length] inputs; token ids
    (input_ids, input_mask, segment_ids: the preprocessor ran in the input pipeline) pass."""
    if is_token_ids(inputs):
      return inputs
    if isinstance(inputs, dict):
      inputs = (inputs["text_a"], inputs["text_b"]) if "text_b" in inputs else inputs["text_a"]
    pair = isinstance(inputs, (tuple, list)) and len(inputs) == 2
    if self.text_pair and not pair:
      raise AlbertTextError("this model classifies text pairs: call it with (texts_a, texts_b)")
    if not self.text_pair and isinstance(inputs, (tuple, list)):
      raise AlbertTextError(f"this model classifies single texts, got {len(inputs)} inputs "
                            "(text_pair=True for pairs)")
    return self.preprocessor(tuple(inputs) if pair else inputs)

  def call(self, inputs, training=None):
    return self.classifier(self.preprocess(inputs), training=training)["logits"]

  def _training_outputs(self, x):
    if not self.early_exit:
      return super()._training_outputs(x)
    outputs = self.classifier(self.preprocess(x), training=True)
    # (shared_layers_in_one_loop keeps no per-layer outputs: the last layer's loss alone)
    return outputs["logits"], outputs.get("layer_logits", outputs["logits"])

  # ------------------------------------------------------------------ the task's half
  def _default_loss(self):
    """The mean softmax cross-entropy over the global batch (regression: squared error)."""
    return (tf_keras.losses.MeanSquaredError() if self.is_regression
            else tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))

  def compile(self, optimizer="adamw", loss=None, metrics=None, **kwargs):
    """RawTextModel.compile; with early exit, the loss (yours or the task's) is trained on
    every layer's logits through EarlyExitLoss."""
    loss = self._default_loss() if loss is None else loss
    if self.early_exit and not isinstance(loss, EarlyExitLoss):
      loss = EarlyExitLoss(loss)
    super().compile(optimizer, loss=loss, metrics=metrics, **kwargs)

  def _default_metrics(self):
    return ([tf_keras.metrics.MeanSquaredError(name="MSE")] if self.is_regression
            else [tf_keras.metrics.SparseCategoricalAccuracy(name="accuracy")])

  def _texts(self, x):
    """x as the model's input: NumPy string columns, or a tf.data / tensors untouched (their
    texts checked to be strings here: inside Keras' traced step the error would come wrapped)."""
    if isinstance(x, (tf.data.Dataset, tf.Tensor)):
      check_string_spec(x, token_ids=True)
      return self._label_checked(x) if isinstance(x, tf.data.Dataset) else x
    if x is None or is_token_ids(x):
      return x
    if isinstance(x, dict):
      x = (x["text_a"], x["text_b"]) if "text_b" in x else x["text_a"]
    if self.text_pair:
      if not (isinstance(x, (tuple, list)) and len(x) == 2
              and not isinstance(x[0], str) and not isinstance(x[1], str)):
        raise AlbertTextError("this model classifies text pairs: pass x=(texts_a, texts_b)")
      a, b = as_text_column(x[0], "texts_a"), as_text_column(x[1], "texts_b")
      if len(a) != len(b):
        raise AlbertError(f"{len(a)} texts_a but {len(b)} texts_b")
      return (a, b)
    if isinstance(x, tuple) or (isinstance(x, list) and x and not isinstance(x[0], str)
                                and np.ndim(x[0]) > 0):
      raise AlbertTextError("this model classifies single texts, got a pair or columns "
                            "(text_pair=True for pairs)")
    return as_text_column(x, "texts")

  def _labels(self, y):
    """y checked against the head: integer classes in [0, num_classes) (floats: regression)."""
    if y is None or isinstance(y, (tf.data.Dataset, tf.Tensor)):
      return y
    values = np.asarray(y)
    if self.is_regression:
      if not np.issubdtype(values.dtype, np.number):
        raise AlbertError(f"regression labels: expected numbers, got {values.dtype}")
      return values.astype(np.float32)
    if values.dtype.kind not in "iu" and not (values.dtype.kind == "f"
                                              and np.all(values == np.round(values))):
      raise AlbertError(f"labels: expected class indices 0..{self.num_classes - 1}, got "
                        f"{values.dtype} values")
    outside = values[(values < 0) | (values >= self.num_classes)]
    if outside.size:
      raise AlbertError(_OUTSIDE.format(outside.flat[0], self.num_classes, self.num_classes - 1))
    return values.astype(np.int32)

  def _label_checked(self, dataset):
    """A tf.data of (texts, class labels[, weights]) with its labels checked against the head
    as each batch is read (a dataset's labels are not known before; _labels checks NumPy's).
    Other datasets (texts alone, regression scores) are returned untouched."""
    spec = dataset.element_spec
    if (self.is_regression or not isinstance(spec, tuple) or len(spec) < 2
        or not isinstance(spec[1], tf.TensorSpec) or not spec[1].dtype.is_integer):
      return dataset
    num_classes = self.num_classes
    message = _OUTSIDE.format("{}", num_classes, num_classes - 1)

    def check(*element):
      labels = element[1]
      outside = tf.boolean_mask(labels, (labels < 0) | (labels >= num_classes))
      first = tf.cond(tf.size(outside) > 0, lambda: outside[0],
                      lambda: tf.zeros([], labels.dtype))
      checked = tf.debugging.Assert(tf.size(outside) == 0,
                                    [tf.strings.format(message, first)])
      with tf.control_dependencies([checked]):
        return (element[0], tf.identity(labels)) + element[2:]
    return dataset.map(check)

  def fit(self, *args, **kwargs):
    with _label_errors():
      return super().fit(*args, **kwargs)

  def evaluate(self, *args, **kwargs):
    with _label_errors():
      return super().evaluate(*args, **kwargs)

  def predict_exit_layers(self, x, batch_size=32):
    """int32 [N]: the 1-based layer each text's answer comes from (early exit; the last layer
    without a patience), as run_classifier.py's exit_layers.tsv."""
    if not self.early_exit:
      raise AlbertError("exit layers need a model built with early_exit=\"patience\"")
    x = self._texts(x)
    dataset = x if isinstance(x, tf.data.Dataset) else (
        tf.data.Dataset.from_tensor_slices(x).batch(batch_size))
    exit_layer = tf.function(lambda texts: self.classifier(
        self.preprocess(texts), training=False)["exit_layer"])
    layers = [exit_layer(batch).numpy() for batch in dataset]
    return np.concatenate(layers) if layers else np.zeros([0], np.int32)

  def predict_labels(self, x, **kwargs):
    """The class names (regression: the scores) of texts: a list of N."""
    logits = self.predict(x, **kwargs)
    if self.is_regression:
      return [float(v) for v in logits[:, 0]]
    return [self.label_list[i] for i in np.argmax(logits, axis=-1)]

  # ------------------------------------------------------------------ saving
  def save_for_serving(self, export_dir, precision="fp32", task_name=None):
    """Writes the TF Serving SavedModel run_classifier.py --export_dir writes (raw-text,
    token-id and tf.Example signatures, warm-up records) as `<export_dir>/<version>/`.
    Returns the version directory."""
    p = self.preprocessor
    return export_classifier(self.classifier, os.fspath(export_dir),
                             label_list=self.label_list or [],
                             max_seq_length=p.sequence_length, spm_model_file=p.spm_model_file,
                             do_lower_case=p.do_lower_case, task_name=task_name,
                             text_pair=self.text_pair, precision=precision)

  def save_checkpoint(self, path):
    """Writes the classifier in the official TF1 layout at the prefix `path`, with
    albert_config.json, 30k-clean.model and label_list.json beside it, so that
    `from_pretrained(path)` (and TextClassifier.from_pretrained) read it back."""
    problem_type = task_labels.REGRESSION if self.is_regression else task_labels.SINGLE_LABEL
    return self._save_tf1_checkpoint(path, {"problem_type": problem_type,
                                            "labels": self.label_list or []})

  def get_config(self):
    p = self.preprocessor
    return {"config": self.config.to_dict(), "num_classes": self.num_classes,
            "spm_model_file": p.spm_model_file, "sequence_length": p.sequence_length,
            "text_pair": self.text_pair, "is_regression": self.is_regression,
            "label_list": self.label_list, "do_lower_case": p.do_lower_case,
            "dropout_rate": self.classifier.dropout_rate, "early_exit": self.early_exit,
            "patience": self.patience,
            "regression_threshold": self.classifier.regression_threshold, "name": self.name}
