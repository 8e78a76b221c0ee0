"""Models: an encoder with task heads (each keeps the encoder at `.encoder`); `build(kind,
config, ...)` makes a fresh one of a kind (albert_tf/common/kinds.py)."""

from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.models.registry import build, model_class
from albert_tf.models.squad import AlbertSquadModel
from albert_tf.models.token_classifier import AlbertTokenClassifier
