"""Models: an encoder with task heads."""

from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.models.squad import AlbertSquadModel
