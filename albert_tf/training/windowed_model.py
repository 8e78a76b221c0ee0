"""WindowedModel: the notebook task models whose examples become the scripts' windows in Python
before Keras sees them (TokenClassifier, QuestionAnswerer).

One sentence of run_ner.py, or one question of run_squad.py, may be several rows of the model's
(windows with a stride over a long text), with labels placed by the script's own feature code; so
these models convert (x, y) into those arrays first, and Keras' fit/evaluate run on them. A
subclass defines `_keras_data(x, y)` -> (inputs dict, labels), passing a dict or tf.data of
ready features through.
"""

from albert_tf.training.raw_text_model import RawTextModel


class WindowedModel(RawTextModel):
  """RawTextModel whose fit/evaluate take the user's examples and train on the script's windows
  (see the module docstring)."""

  def _keras_data(self, x, y):
    """(x, y) as the user gives them -> (inputs, labels) of the script's windows."""
    raise NotImplementedError

  def _texts(self, x):
    return x  # (made into windows before Keras sees them: _keras_data)

  def _labels(self, y):
    return y

  def fit(self, x=None, y=None, validation_data=None, **kwargs):
    """Keras' fit on the examples' windows; validation_data=(x, y) of the same kind."""
    x, y = self._keras_data(x, y)
    if validation_data is not None:
      validation_data = self._keras_data(*validation_data)
    return super().fit(x, y, validation_data=validation_data, **kwargs)

  def evaluate(self, x=None, y=None, **kwargs):
    """Keras' evaluate (the loss and compiled metrics) over the examples' windows."""
    return super().evaluate(*self._keras_data(x, y), **kwargs)
