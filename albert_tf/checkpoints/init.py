"""Initialising a model from any ALBERT checkpoint: official TF1 or ours (TF2 object-based)."""

import tensorflow as tf
from absl import logging

from albert_tf.checkpoints import tf1
from albert_tf.checkpoints import tf1_names
from albert_tf.errors import AlbertError


def restore_tf2_checkpoint(model, path):
  """Restores the encoder (and any heads the two models share) from one of our checkpoints.

  Our checkpoints are `tf.train.Checkpoint(model=model, ...)`; every model keeps its encoder at
  `.encoder`, so a pretraining checkpoint restores into a classifier's encoder.

  Raises:
    AlbertError: the checkpoint has no encoder matching this model's shape.
  """
  encoder = tf1_names.encoder_of(model)
  encoder_only = tf.train.Checkpoint(model=tf.train.Checkpoint(encoder=encoder))
  try:
    # expect_partial: the optimizer state and other heads in the file are meant to stay unread.
    encoder_only.read(path).assert_existing_objects_matched().expect_partial()
  except (AssertionError, ValueError) as e:
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    raise AlbertError(f"{path}: encoder does not match this model's config ({first})") from None
  if encoder is not model:
    # Heads whose object paths line up (e.g. pretrainer -> pretrainer) come along too.
    tf.train.Checkpoint(model=model).read(path).expect_partial()


def init_from_checkpoint(model, path, init_from_group0=False):
  """Loads `path` (TF1 official or TF2 ours; prefix or directory) into a freshly built model.

  Returns:
    A LoadReport for TF1 checkpoints, None for TF2 ones (which fail loudly when incomplete).
  Raises:
    AlbertError: no checkpoint at path; encoder variables missing; shapes differ.
  """
  path = tf1.resolve_checkpoint_path(path)
  if tf1.is_tf2_checkpoint(path):
    if init_from_group0:
      raise AlbertError(f"{path}: --init_from_group0 applies to TF1 (official) checkpoints only")
    restore_tf2_checkpoint(model, path)
    logging.info("Initialised %s from %s (TF2 checkpoint)", model.name, path)
    return None
  report = tf1.load_tf1_checkpoint(model, path, init_from_group0=init_from_group0)
  missing_encoder = [n for n in report.missing if n.startswith("bert/")]
  if missing_encoder:
    raise AlbertError(f"{path}: checkpoint lacks {len(missing_encoder)} encoder variables, e.g. "
                      f"{missing_encoder[0]} (does albert_config match the checkpoint?)")
  logging.info("%s", report)
  return report
