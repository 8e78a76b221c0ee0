"""Our TF2 checkpoints: `tf.train.Checkpoint(model=model, ...)`, object-based (the trainer's
`ckpt-N`, the converter's tf2 output). Every model keeps its encoder at `.encoder`, so the
encoder of any of our checkpoints restores into any model of the same config."""

import os
import re

import tensorflow as tf

from albert_tf.checkpoints import integrity
from albert_tf.checkpoints import official_names
from albert_tf.checkpoints import tf1
from albert_tf.errors import AlbertError
from albert_tf.networks.encoder import AlbertEncoder


def restore_tf2_checkpoint(model, path):
  """Restores the encoder (and any heads the two models share) from one of our checkpoints.

  Our checkpoints are `tf.train.Checkpoint(model=model, ...)`; every model keeps its encoder at
  `.encoder`, so a pretraining checkpoint restores into a classifier's encoder.

  Raises:
    AlbertError: the checkpoint has no encoder matching this model's shape.
  """
  encoder = official_names.encoder_of(model)
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


# Where our TF2 checkpoints keep early exit's internal classifiers (models/classifier.py).
EARLY_EXIT_PREFIX = "model/early_exit_classifiers/"


def early_exit_variables(path):
  """Sorted names of the internal classifiers' variables in the TF2 checkpoint `path`."""
  names = tf.compat.v1.train.NewCheckpointReader(path).get_variable_to_shape_map()
  return sorted(name for name in names if name.startswith(EARLY_EXIT_PREFIX))


def early_exit_difference(model, path):
  """None when the TF2 checkpoint `path` and `model` agree on early exit (both with internal
  classifiers, or both without); else one clause saying how they differ, naming the variable."""
  held = bool(early_exit_variables(path))
  wanted = bool(getattr(model, "early_exit", None))
  first = f"{EARLY_EXIT_PREFIX}layer_1/output_weights (TF1: early_exit/layer_1/output_weights)"
  if wanted and not held:
    return f"it was trained without early exit: it lacks the internal classifiers, e.g. {first}"
  if held and not wanted:
    return (f"it was trained with --early_exit=patience: it holds internal classifiers, e.g. "
            f"{first}, that a model without early exit has no place for")
  return None


def restore_tf2_model(model, path):
  """Restores every weight of `model` (encoder and head) from one of our checkpoints.

  Raises:
    AlbertError: the checkpoint lacks a weight of the model (naming it).
  """
  status = tf.train.Checkpoint(model=model).read(path)
  try:
    status.assert_existing_objects_matched()
  except AssertionError as e:
    status.expect_partial()
    difference = early_exit_difference(model, path)
    if difference:
      raise AlbertError(f"{path}: {difference}; without --early_exit it answers as the full "
                        f"model") from None
    raise AlbertError(f"{path}: checkpoint lacks weights of this model, e.g. "
                      f"{_first_unmatched(e)} (a pretraining checkpoint, or another task's?)"
                      ) from None
  status.expect_partial()  # The optimizer state in the file is meant to stay unread.


def save_tf2_checkpoint(model, path):
  """Writes `model` as one of our checkpoints at prefix `path` (an AlbertEncoder alone under
  `model/encoder`, as inside our models), with its `checkpoint` state file."""
  root = tf.train.Checkpoint(encoder=model) if isinstance(model, AlbertEncoder) else model
  tf.io.gfile.makedirs(os.path.dirname(path) or ".")
  # Written under a temporary prefix of this process (TensorFlow's own `<prefix>_temp/` too),
  # then renamed: a run killed half-way leaves no checkpoint that mixes old and new files.
  with integrity.atomic_checkpoint_prefix(path) as temp:
    tf.train.Checkpoint(model=root).write(temp)
  tf1.write_checkpoint_state(path)


def checkpoint_global_step(path):
  """The `global_step` a checkpoint records (TF1 `global_step`, or ours), else None."""
  reader = integrity.checkpoint_reader(tf1.resolve_checkpoint_path(path))
  for key in ("global_step", "global_step/.ATTRIBUTES/VARIABLE_VALUE"):
    if reader.has_tensor(key):
      return int(reader.get_tensor(key))
  return None


def _first_unmatched(error):
  """The first variable named in a tf.train.Checkpoint assertion message."""
  match = re.search(r"<tf\.Variable '([^':]+)", str(error))
  if match:
    return match.group(1)
  text = str(error).strip()
  return text.splitlines()[0][:120] if text else type(error).__name__
