"""albert_tf: ALBERT (A Lite BERT) in TensorFlow 2 / tf_keras, compatible with the official release.

Public API:
  AlbertConfig        the official albert_config.json
  AlbertEncoder       embeddings + shared transformer + pooler (tf_keras.Model)
  AlbertPretrainer    encoder + masked-LM + sentence-order heads (tf_keras.Model)
  load_tf1_checkpoint / save_tf1_checkpoint   official TF1 checkpoints, both ways
  load_hf_checkpoint / save_hf_checkpoint     HF transformers ALBERT directories, both ways
  init_from_checkpoint                        TF1 official, our TF2 checkpoints or HF directories
  from_pretrained     any ALBERT weights (official tarball, TF1/TF2 checkpoint, HF directory,
                      TF-Hub module) -> model, config, tokenizer, labels; `.predict(texts)`
"""

from albert_tf import lazy_imports
from albert_tf import model_loader

from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError

__version__ = "0.1.0"

# The names below import TensorFlow; they load on first use so that TensorFlow-free tools
# (tokenization, create_pretraining_data workers) start fast and small.
_LAZY = {
    "AlbertEncoder": "albert_tf.networks.encoder",
    "AlbertPretrainer": "albert_tf.models.pretrainer",
    "from_pretrained": "albert_tf.pretrained",
    "init_from_checkpoint": "albert_tf.checkpoints",
    "load_hf_checkpoint": "albert_tf.checkpoints",
    "load_tf1_checkpoint": "albert_tf.checkpoints",
    "save_hf_checkpoint": "albert_tf.checkpoints",
    "save_tf1_checkpoint": "albert_tf.checkpoints",
}

__all__ = ["AlbertConfig", "AlbertError"] + sorted(_LAZY)


__getattr__ = lazy_imports.module_getattr(globals(), _LAZY)


def _model_from_pretrained(model_class, path, **kwargs):
  """`<ModelClass>.from_pretrained(path)` (albert_tf/models/base.py) through the leaf hook."""
  from albert_tf import pretrained  # lazy: it imports TensorFlow, which `import albert_tf` must not
  return pretrained.model_from_pretrained(model_class, path, **kwargs)


def _hub_tokenization_info(handle):
  """FullTokenizer.from_hub_module (albert_tf/text/tokenization.py) through the leaf hook."""
  from albert_tf.checkpoints import hub_module  # lazy: it imports TensorFlow, as above
  module = hub_module.read_hub_module(handle)
  return module.spm_model_file, module.do_lower_case


# Registered here: Python runs this package before any of its modules, the models included.
model_loader.register(_model_from_pretrained)
model_loader.register_hub_tokenization(_hub_tokenization_info)
