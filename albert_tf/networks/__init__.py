"""Encoder networks."""

from albert_tf.networks.encoder import AlbertEncoder
from albert_tf.networks.sharing import SharingPlan, make_sharing_plan
