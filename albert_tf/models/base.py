"""AlbertModel: what every ALBERT model with a task head shares.

The config (an AlbertConfig, or its dict from get_config), the encoder at `.encoder`, the
Keras config round trip and the kinds the class builds (albert_tf/common/kinds.py). Loading
weights of any form is `albert_tf.from_pretrained(path, model_type=...)` (albert_tf/pretrained.py,
above the models).
"""

import tf_keras

from albert_tf.config import AlbertConfig
from albert_tf.networks.encoder import AlbertEncoder


class AlbertModel(tf_keras.Model):
  """An encoder (`.encoder`, built from `.config`) with the task head a subclass adds.

  Subclasses set KINDS (the kinds they build, the first their default), return their own
  constructor arguments from `head_config()`, and map a kind to them in `kind_args`.
  """

  KINDS = ()

  def __init__(self, config, **kwargs):
    super().__init__(**kwargs)
    if isinstance(config, dict):
      config = AlbertConfig.from_dict(config)
    self.config = config
    self.encoder = AlbertEncoder(config, name="encoder")

  @property
  def kind(self):
    """This model's kind (one of KINDS)."""
    return self.KINDS[0]

  @classmethod
  def kind_args(cls, kind, num_labels=None):  # pylint: disable=unused-argument
    """The constructor arguments that make this class a model of `kind` (one of KINDS)."""
    return {}

  def head_config(self):
    """The subclass's constructor arguments (besides config and name), for get_config."""
    return {}

  def get_config(self):
    return {"config": self.config.to_dict(), **self.head_config(), "name": self.name}

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = dict(config)
    return cls(AlbertConfig.from_dict(config.pop("config")), **config)
