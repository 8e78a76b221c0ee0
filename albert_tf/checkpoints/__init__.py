"""Checkpoint conversion: official TF1 layout and HF transformers directories <-> Keras model,
and initialisation.

The names load on first use (they import TensorFlow), so that `python -m
albert_tf.checkpoints.convert` can quiet TensorFlow's logs before TensorFlow is imported.
"""

from albert_tf import lazy_imports

_LAZY = {
    "detect": "albert_tf.checkpoints.formats",
    "config_from_hf": "albert_tf.checkpoints.hf",
    "is_hf_directory": "albert_tf.checkpoints.hf",
    "load_hf_checkpoint": "albert_tf.checkpoints.hf",
    "save_hf_checkpoint": "albert_tf.checkpoints.hf",
    "init_from_checkpoint": "albert_tf.checkpoints.init",
    "restore_tf2_checkpoint": "albert_tf.checkpoints.tf2",
    "model_variable_map": "albert_tf.checkpoints.official_names",
    "LoadReport": "albert_tf.checkpoints.tf1",
    "is_tf2_checkpoint": "albert_tf.checkpoints.tf1",
    "load_tf1_checkpoint": "albert_tf.checkpoints.tf1",
    "load_tf1_head": "albert_tf.checkpoints.tf1",
    "resolve_checkpoint_path": "albert_tf.checkpoints.tf1",
    "save_tf1_checkpoint": "albert_tf.checkpoints.tf1",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_imports.module_getattr(globals(), _LAZY)
