"""The official export_checkpoints.py: any ALBERT checkpoint -> a clean official TF1 checkpoint.

The official tool builds the pretraining model (encoder, masked-LM and sentence-order heads),
loads `<albert_directory>/<checkpoint_name>` (default `model.ckpt-best`) and saves every model
variable and `global_step` (no optimizer slots) at --export_path. Here the input may be an
official TF1 checkpoint, one of ours or an HF directory; a checkpoint without the pretraining heads
(a fine-tuned `model.ckpt-best`) exports the encoder alone rather than heads at random values.
"""

import os

import tensorflow as tf

from albert_tf.checkpoints import official_names
from albert_tf.checkpoints import tf1
from albert_tf.checkpoints.init import checkpoint_global_step, init_from_checkpoint
from albert_tf.errors import AlbertError
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.networks.encoder import AlbertEncoder


def _has_pretraining_heads(path):
  if os.path.isdir(path) and not tf.io.gfile.exists(os.path.join(path, "checkpoint")):
    return True  # an HF directory: AlbertForPreTraining weights carry both heads
  names = tf.train.load_checkpoint(tf1.resolve_checkpoint_path(path)).get_variable_to_shape_map()
  return any(n.endswith(official_names.MLM_OUTPUT_BIAS) or "masked_lm_head/output_bias" in n
             for n in names)


def export_checkpoint(config, checkpoint, export_path):
  """Loads `checkpoint` into the pretraining model and writes it in the official layout.

  Returns:
    (prefix written, whether the MLM/SOP heads were included).
  Raises:
    AlbertError: no checkpoint; the encoder does not match the config.
  """
  if not os.path.isdir(checkpoint) and not tf.io.gfile.exists(checkpoint + ".index"):
    raise AlbertError(f"{checkpoint}: no checkpoint there (expected {checkpoint}.index)")
  with_heads = _has_pretraining_heads(checkpoint)
  model = AlbertPretrainer(config) if with_heads else AlbertEncoder(config)
  init_from_checkpoint(model, checkpoint)
  step = None
  if not os.path.isdir(checkpoint):
    step = checkpoint_global_step(checkpoint)
  prefix = tf1.save_tf1_checkpoint(model, export_path, global_step=step or 0)
  return prefix, with_heads
