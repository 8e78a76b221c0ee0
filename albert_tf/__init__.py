"""albert_tf: ALBERT (A Lite BERT) in TensorFlow 2 / tf_keras, compatible with the official release.

Public API:
  AlbertConfig        the official albert_config.json
  AlbertEncoder       embeddings + shared transformer + pooler (tf_keras.Model)
  AlbertPretrainer    encoder + masked-LM + sentence-order heads (tf_keras.Model)
  load_tf1_checkpoint / save_tf1_checkpoint   official TF1 checkpoints, both ways
  init_from_checkpoint                        TF1 official or our TF2 checkpoints
"""

from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.networks.encoder import AlbertEncoder
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.checkpoints import (init_from_checkpoint, load_tf1_checkpoint,
                                   save_tf1_checkpoint)

__version__ = "0.1.0"
