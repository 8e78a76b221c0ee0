"""Checkpoint conversion: official TF1 layout and HF transformers directories <-> Keras model,
and initialisation."""

from albert_tf.checkpoints.hf import (config_from_hf, is_hf_directory, load_hf_checkpoint,
                                      save_hf_checkpoint)
from albert_tf.checkpoints.init import init_from_checkpoint, restore_tf2_checkpoint
from albert_tf.checkpoints.official_names import model_variable_map
from albert_tf.checkpoints.tf1 import (LoadReport, is_tf2_checkpoint, load_tf1_checkpoint,
                                       load_tf1_head, resolve_checkpoint_path,
                                       save_tf1_checkpoint)
