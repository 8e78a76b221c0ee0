"""The kind registry: `build(kind, config, ...)` -> a fresh model of that kind.

The kinds are named in albert_tf/common/kinds.py; each model class declares the kinds it builds
(`KINDS`) and how a kind sets its constructor (`kind_args`), so this table is only the list
of classes.
"""

from albert_tf.common import kinds
from albert_tf.errors import AlbertError
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.models.squad import AlbertSquadModel
from albert_tf.models.token_classifier import AlbertTokenClassifier
from albert_tf.networks.encoder import AlbertEncoder

MODEL_CLASSES = (AlbertPretrainer, AlbertClassifier, AlbertMultipleChoice, AlbertSquadModel,
                 AlbertTokenClassifier)


def model_class(kind):
  """The model class that builds `kind` (AlbertEncoder for the encoder).

  Raises:
    AlbertError: kind is not one of albert_tf.common.kinds.KINDS.
  """
  if kind == kinds.ENCODER:
    return AlbertEncoder
  for cls in MODEL_CLASSES:
    if kind in cls.KINDS:
      return cls
  raise AlbertError(f"model type {kind!r} is invalid: expected one of {', '.join(kinds.KINDS)}")


def build(kind, config, num_labels=None, **head_args):
  """A fresh model of `kind` (albert_tf.common.kinds.KINDS).

  Args:
    kind: the model's kind.
    config: an AlbertConfig.
    num_labels: a classifier's or token classifier's labels (2 or more; a regression has one).
    **head_args: further constructor arguments of the class (dropout_rate, ...); the encoder
      takes none.
  Raises:
    AlbertError: an unknown kind; a classifier with fewer than 2 classes.
  """
  cls = model_class(kind)
  if cls is AlbertEncoder:
    return AlbertEncoder(config)
  return cls(config, **cls.kind_args(kind, num_labels), **head_args)
