"""`MultipleChoice`: RACE from a notebook. Articles, questions and options as raw text in, one
score per option out, `compile()`/`fit()` with run_race.py's recipe, its export and checkpoint.

  model = albert_tf.MultipleChoice.from_pretrained("albert_base", num_choices=4)
  model.compile()                        # AdamW, lr 1e-5 (run_race.py's), clipping at 1.0
  model.fit((articles, questions, options), answers, epochs=2, batch_size=8)  # answers "A".."D"
  model.predict((articles, questions, options))      # logits [N, num_choices]
  model.predict_answers((articles, questions, options))   # ["B", ...]
  model.save_for_serving("export/")      # the SavedModel run_race.py --export_dir writes
  model.save_checkpoint("out/model.ckpt-best")      # official TF1 layout; from_pretrained reads it

The model on token ids is the scripts' AlbertMultipleChoice (official names); its inputs come
from a MultipleChoicePreprocessor, the in-graph RACE rule the export's raw-text signature runs
(the same ids as run_race.py's features); the loss is the task's mean softmax cross-entropy over
the choices, the metric its accuracy. The rest (the loop, callbacks, strategies) is Keras'.
"""

import dataclasses
import os

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf import pretrained as pretrained_lib
from albert_tf.common import kinds, output_layout
from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.export import export_multiple_choice
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.tasks.race import RaceConfig
from albert_tf.text.multiple_choice_preprocessor import input_columns
from albert_tf.text.multiple_choice_preprocessor import MultipleChoicePreprocessor
from albert_tf.text.tokenization import check_vocabulary_fits
from albert_tf.training.raw_text_model import AlbertTextError
from albert_tf.training.raw_text_model import as_text_column
from albert_tf.training.raw_text_model import check_string_spec
from albert_tf.training.raw_text_model import RawTextModel

# run_race.py's defaults: its --max_seq_length, --max_qa_length, --dropout_prob (RaceConfig's)
# and its --learning_rate (a flag default only; tests/training/test_multiple_choice_model.py
# reads it from the script).
_RACE = {f.name: f.default for f in dataclasses.fields(RaceConfig)}
SEQUENCE_LENGTH, MAX_QA_LENGTH = _RACE["max_seq_length"], _RACE["max_qa_length"]
DROPOUT_RATE = _RACE["dropout_rate"]
LEARNING_RATE = 1e-5


def _options_matrix(options, num_choices):
  """Options as a list of lists / NumPy array / pandas column of lists or DataFrame -> NumPy
  object array [N, num_choices] of strings."""
  if hasattr(options, "to_numpy"):  # pandas
    options = options.to_numpy()
  if isinstance(options, str) or not hasattr(options, "__len__"):
    raise AlbertTextError(f"options: expected {num_choices} strings per question, got "
                          f"{type(options).__name__}")
  rows = []
  for i, row in enumerate(options):
    if isinstance(row, str) or not hasattr(row, "__len__"):
      raise AlbertTextError(f"options[{i}]: expected {num_choices} strings (num_choices), got "
                            f"{type(row).__name__}")
    if len(row) != num_choices:
      raise AlbertError(f"options[{i}]: {len(row)} options, expected {num_choices} "
                        "(num_choices)")
    rows.append(as_text_column(row, f"options[{i}]"))
  return np.stack(rows) if rows else np.zeros([0, num_choices], object)


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class MultipleChoice(RawTextModel):
  """(articles, questions, options) in, logits out: MultipleChoicePreprocessor +
  AlbertMultipleChoice.

  Inputs: a tuple (articles tf.string [batch], questions [batch], options [batch, num_choices]),
  or a dict with the keys article, question, options (the export's names; the form a tf.data
  without labels needs, since Keras reads a 3-tuple as (x, y, weights)).
  Output: float32 logits [batch, num_choices].

  Attributes:
    preprocessor: the MultipleChoicePreprocessor (usable alone, e.g. in a tf.data map).
    chooser: the AlbertMultipleChoice on token ids (what run_race.py trains, exports, saves).
    answer_letters: the answers' names, "A", "B", ... (RACE's letters).
  """

  default_learning_rate = LEARNING_RATE

  def __init__(self, config, spm_model_file, num_choices=4, sequence_length=SEQUENCE_LENGTH,
               max_qa_length=MAX_QA_LENGTH, do_lower_case=True, dropout_rate=DROPOUT_RATE,
               **kwargs):
    kwargs.setdefault("name", "multiple_choice")
    super().__init__(**kwargs)
    config = config if isinstance(config, AlbertConfig) else AlbertConfig.from_dict(config)
    if not 2 <= num_choices <= 26:
      raise AlbertError(f"num_choices={num_choices}: expected 2 to 26 (answers A..Z)")
    config.check_sequence_length(sequence_length)
    self.preprocessor = MultipleChoicePreprocessor(
        spm_model_file, sequence_length=sequence_length, max_qa_length=max_qa_length,
        num_choices=num_choices, do_lower_case=do_lower_case)
    # The vocabulary must be the checkpoint's: more pieces than embedding rows is another model's.
    check_vocabulary_fits(self.preprocessor._py_tokenizer, config)  # pylint: disable=protected-access
    self.chooser = AlbertMultipleChoice(config, num_choices=num_choices,
                                        dropout_rate=dropout_rate)
    self.answer_letters = [chr(ord("A") + i) for i in range(num_choices)]

  @property
  def task_model(self):
    return self.chooser

  @property
  def num_choices(self):
    return self.chooser.num_choices

  # ------------------------------------------------------------------ loading
  @classmethod
  def from_pretrained(cls, path, num_choices=4, sequence_length=SEQUENCE_LENGTH,
                      max_qa_length=MAX_QA_LENGTH, dropout_rate=DROPOUT_RATE, seed=None,
                      albert_config_file=None, spm_model_file=None, do_lower_case=None):
    """A MultipleChoice on the weights at `path` (anything albert_tf.from_pretrained reads).

    A pretrained encoder gets a new scorer, initialised as run_race.py does (truncated normal
    with the config's initializer_range, seeded by `seed` when given); a fine-tuned RACE model
    keeps its scorer (one score per choice: any num_choices), an official run_race.py output
    (whose one-row scorer alone could be a regression head) included.
    """
    where = dict(albert_config_file=albert_config_file, spm_model_file=spm_model_file,
                 do_lower_case=do_lower_case)
    try:
      loaded = pretrained_lib.from_pretrained(path, **where)
    except AlbertError as error:
      # An official run_race.py output: its one-row scorer alone cannot say RACE from STS-B.
      try:
        loaded = pretrained_lib.from_pretrained(path, model_type=kinds.MULTIPLE_CHOICE, **where)
      except AlbertError:
        raise error from None
    cls._check_sentencepiece(loaded, path)
    fine_tuned = loaded.model_type == kinds.MULTIPLE_CHOICE
    if seed is not None:
      tf_keras.utils.set_random_seed(int(seed))  # the scorer's initial weights, then dropout
    model = cls(loaded.config, loaded.tokenizer.spm_model_file, num_choices=num_choices,
                sequence_length=sequence_length, max_qa_length=max_qa_length,
                do_lower_case=loaded.tokenizer.do_lower_case, dropout_rate=dropout_rate)
    model._take_weights(loaded, fine_tuned)  # pylint: disable=protected-access
    return model

  # ------------------------------------------------------------------ the forward pass
  def call(self, inputs, training=None):
    return self.chooser(self.preprocessor(inputs), training=training)["logits"]

  # ------------------------------------------------------------------ the task's half
  def _default_loss(self):
    """The mean softmax cross-entropy over the choices (run_race.py's loss)."""
    return tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)

  def _default_metrics(self):
    return [tf_keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

  def _texts(self, x):
    """(articles, questions, options) or their dict as NumPy string columns [N] and [N, C];
    a tf.data / tensors untouched (their texts checked to be strings)."""
    if x is None:
      return x
    if isinstance(x, tf.data.Dataset):
      check_string_spec(x)
      return x
    x = input_columns(x, "a multiple-choice model")
    if any(isinstance(column, tf.Tensor) for column in x):
      for column in x:
        check_string_spec(column)
      return tuple(x)
    articles = as_text_column(x[0], "articles")
    questions = as_text_column(x[1], "questions")
    options = _options_matrix(x[2], self.num_choices)
    if not len(articles) == len(questions) == len(options):
      raise AlbertError(f"{len(articles)} articles, {len(questions)} questions and "
                        f"{len(options)} option lists: expected one of each per question")
    return (articles, questions, options)

  def _labels(self, y):
    """y as answer indices: integers 0..num_choices-1 or letters "A".. (RACE's answers)."""
    if y is None or isinstance(y, (tf.data.Dataset, tf.Tensor)):
      return y
    values = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y).reshape(-1)
    expected = (f"expected answer indices 0..{self.num_choices - 1} or letters "
                f"{', '.join(self.answer_letters)}")
    if values.dtype.kind in "USO":
      for i, value in enumerate(values):
        if value not in self.answer_letters:
          raise AlbertError(f"labels[{i}]: {str(value)!r} is not an answer: {expected}")
      return np.array([self.answer_letters.index(v) for v in values], np.int32)
    if values.dtype.kind not in "iu" and not (values.dtype.kind == "f"
                                              and np.all(values == np.round(values))):
      raise AlbertError(f"labels: {expected}, got {values.dtype} values")
    outside = np.flatnonzero((values < 0) | (values >= self.num_choices))
    if outside.size:
      raise AlbertError(f"labels[{outside[0]}]: {values[outside[0]]} is outside "
                        f"num_choices={self.num_choices}: {expected}")
    return values.astype(np.int32)

  def predict_answers(self, x, **kwargs):
    """The answer letters ("A".."D" for RACE) of questions: a list of N."""
    return [self.answer_letters[i] for i in np.argmax(self.predict(x, **kwargs), axis=-1)]

  # ------------------------------------------------------------------ saving
  def save_for_serving(self, export_dir, precision="fp32"):
    """Writes the TF Serving SavedModel run_race.py --export_dir writes (raw-text, token-id
    and tf.Example signatures, warm-up records) as `<export_dir>/<version>/`. Returns the
    version directory."""
    p = self.preprocessor
    return export_multiple_choice(self.chooser, os.fspath(export_dir),
                                  max_seq_length=p.sequence_length,
                                  max_qa_length=p.max_qa_length, spm_model_file=p.spm_model_file,
                                  do_lower_case=p.do_lower_case, precision=precision)

  def save_checkpoint(self, path):
    """Writes the model in the official TF1 layout at the prefix `path`, with
    albert_config.json, 30k-clean.model and best_checkpoint.json (its kind: an official one-row
    scorer cannot tell RACE from STS-B) beside it, so that `from_pretrained(path)` (and
    MultipleChoice.from_pretrained) read it back."""
    path = self._save_tf1_checkpoint(path)
    output_layout.write_best_checkpoint_record(
        os.path.dirname(path) or ".", path, int(self.optimizer.iterations) if self.optimizer
        else 0, kind=kinds.MULTIPLE_CHOICE)
    return path

  def get_config(self):
    p = self.preprocessor
    return {"config": self.config.to_dict(), "spm_model_file": p.spm_model_file,
            "num_choices": self.num_choices, "sequence_length": p.sequence_length,
            "max_qa_length": p.max_qa_length, "do_lower_case": p.do_lower_case,
            "dropout_rate": self.chooser.dropout_rate, "name": self.name}
