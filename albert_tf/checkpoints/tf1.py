"""Reading and writing checkpoints in the official TF1 (name-based) layout."""

import dataclasses
import os
import re
from typing import List

from google.protobuf import text_format
import numpy as np
import tensorflow as tf
from tensorflow.python.training import checkpoint_state_pb2  # pylint: disable=g-direct-tensorflow-import

from albert_tf.common import fileio
from albert_tf.checkpoints import integrity
from albert_tf.checkpoints import official_names
from albert_tf.errors import AlbertError

_GROUP_RE = re.compile(r"^(bert/encoder/transformer/)group_\d+/")
# The variable scope of a hub.Module in a TF1 graph (official --albert_hub_module_handle runs).
HUB_SCOPE = "module/"


@dataclasses.dataclass
class LoadReport:
  """What a checkpoint load did.

  loaded: official names assigned to the model.
  missing: model variables with an official name the checkpoint lacks (left as they were).
  unexpected: checkpoint model variables the model has no place for (optimizer state excluded).
  """
  checkpoint: str
  loaded: List[str]
  missing: List[str]
  unexpected: List[str]

  def __str__(self):
    lines = [f"{self.checkpoint}: loaded {len(self.loaded)} variables"]
    if self.missing:
      lines.append(f"  missing from checkpoint ({len(self.missing)}): {', '.join(self.missing)}")
    if self.unexpected:
      lines.append(f"  unused from checkpoint ({len(self.unexpected)}): "
                   f"{', '.join(self.unexpected)}")
    return "\n".join(lines)


def resolve_checkpoint_path(path, what="checkpoint"):
  """A verified checkpoint prefix from a prefix or a directory (its latest checkpoint).

  The checkpoint must read whole (`integrity.verify_checkpoint`): a missing index, a truncated
  shard or a bad CRC is a one-line AlbertError naming it and `what` (e.g. "--init_checkpoint").
  """
  path = integrity.latest_prefix(path, what)
  integrity.verify_checkpoint(path, what)
  return path


def is_tf2_checkpoint(path):
  """True for an object-based (tf.train.Checkpoint) checkpoint, False for a TF1 name-based one."""
  reader = integrity.checkpoint_reader(resolve_checkpoint_path(path))
  return "_CHECKPOINTABLE_OBJECT_GRAPH" in reader.get_variable_to_shape_map()


# brightmart/albert_zh's own TF1 layout (its modeling.py: embedding_lookup_factorized,
# transformer_model / prelln_transformer_model with scope `layer_shared`).
BRIGHTMART_PROJECTION = "bert/embeddings/word_embeddings_2"


def refuse_brightmart_layout(path, shapes):
  """One line instead of a model computing something else: brightmart's own checkpoints project
  the word embeddings [V, E] to H with `word_embeddings_2` [E, H] (no bias) BEFORE adding
  position and token-type embeddings that are H wide, and apply LayerNorm over H
  (`bert/encoder/layer_shared/...`, BERT's names). The official ALBERT adds E-wide position and
  token-type embeddings, normalises over E and then projects with a bias
  (embedding_hidden_mapping_in), so no assignment of those variables computes the same function.

  Raises:
    AlbertError: `shapes` (name -> shape) hold brightmart's projection.
  """
  if BRIGHTMART_PROJECTION in shapes:
    raise AlbertError(
        f"{path}: a brightmart/albert_zh checkpoint in its own layout ({BRIGHTMART_PROJECTION} "
        f"{shapes[BRIGHTMART_PROJECTION]}: the projection to hidden_size comes before the "
        "position and token-type embeddings, which are hidden_size wide): no official ALBERT "
        "computes that, so it is not loaded; use brightmart's 'google' versions "
        "(albert_*_zh_google: the official layout, loaded with --albert_config_file, "
        "--init_checkpoint=<dir>/albert_model.ckpt, --vocab_file)")


def load_tf1_checkpoint(model, path, init_from_group0=False):
  """Loads an official TF1 ALBERT checkpoint into a Keras ALBERT model.

  Works for an AlbertEncoder or any model holding one at `.encoder`; the pretraining heads
  (`cls/...`) are loaded when the model has them. Optimizer slots and global_step are ignored.

  Args:
    model: AlbertEncoder, AlbertPretrainer or a task model with `.encoder`.
    path: checkpoint prefix (e.g. `albert_base/model.ckpt-best`) or a directory.
    init_from_group0: read every `group_g` from `group_0` (the official --init_from_group0, to
      start a model with more groups from a one-group checkpoint).
  Returns:
    LoadReport.
  Raises:
    AlbertError: the path holds no checkpoint, or a variable's shape differs (both shapes given).
  """
  path = resolve_checkpoint_path(path)
  reader = integrity.checkpoint_reader(path)
  shapes = reader.get_variable_to_shape_map()
  refuse_brightmart_layout(path, shapes)
  model_vars = official_names.model_variable_map(model)
  loaded, missing, used = [], [], set()
  assignments = []
  for name, variable in model_vars.items():
    source = _GROUP_RE.sub(r"\1group_0/", name) if init_from_group0 else name
    if source not in shapes and HUB_SCOPE + source in shapes:
      # Fine-tuned from a TF-Hub module: the official graph held the encoder under `module/`.
      source = HUB_SCOPE + source
    if source not in shapes:
      missing.append(name)
      continue
    assignments.append((variable, source))
    used.add(source)
    loaded.append(name)
  _assign_checked(reader, path, assignments)
  unexpected = sorted(n for n in shapes
                      if n not in used and not official_names.is_optimizer_state(n))
  return LoadReport(checkpoint=path, loaded=sorted(loaded), missing=sorted(missing),
                    unexpected=unexpected)


def _assign_checked(reader, path, assignments):
  """Assigns each (variable, checkpoint name) pair once every shape has been checked.

  Checking all first means a refused checkpoint leaves the model untouched.

  Raises:
    AlbertError: a shape differs (both shapes given).
  """
  shapes = reader.get_variable_to_shape_map()
  for variable, source in assignments:
    want = variable.shape.as_list()
    if list(shapes[source]) != want:
      raise AlbertError(f"{path}: variable {source} has shape {list(shapes[source])} in the "
                        f"checkpoint but the model expects {want} (wrong albert_config?)")
  for variable, source in assignments:
    variable.assign(reader.get_tensor(source).astype(variable.dtype.as_numpy_dtype))


def load_tf1_head(model, path):
  """Loads the model's task head from an official TF1 fine-tuned checkpoint, all or nothing.

  E.g. the SQuAD head of run_squad_v1/v2.py (`cls/squad/...`, `start_logits/...`), the GLUE or
  RACE `output_weights` / `output_bias`: the head variables of `official_names`.

  Args:
    model: a built task model (AlbertSquadModel, AlbertClassifier, ...).
    path: a TF1 checkpoint prefix.
  Returns:
    The official names loaded, sorted: all of the head's, or [] when the checkpoint has none of
    them (a pretraining checkpoint).
  Raises:
    AlbertError: the checkpoint has only part of the head, or a shape differs.
  """
  reader = integrity.checkpoint_reader(path)
  shapes = reader.get_variable_to_shape_map()
  names = official_names.head_variable_map(model)
  present = [n for n in names if n in shapes]
  if not present:
    return []
  if len(present) != len(names):
    missing = sorted(set(names) - set(present))
    raise AlbertError(f"{path}: has part of the {type(model).__name__} head but not "
                      f"{missing[0]} ({len(missing)} missing; a checkpoint of another task, or "
                      "a SQuAD v1.1 checkpoint for a v2.0 model?)")
  _assign_checked(reader, path, [(variable, name) for name, variable in names.items()])
  return sorted(names)


def write_checkpoint_state(prefix, all_prefixes=None):
  """Points the directory's `checkpoint` file at `prefix`, for tf.train.latest_checkpoint.

  The state file names the checkpoints by their basenames, which readers join with the
  directory: it stays right whatever the working directory and wherever the directory is moved.
  (tf.compat.v1.train.update_checkpoint_state rewrites a relative name against a relative
  directory: `out/ckpt` became `../ckpt`.)

  Args:
    prefix: the newest checkpoint, e.g. `out/model.ckpt`.
    all_prefixes: every checkpoint kept in the same directory, oldest first (default: [prefix]).
  """
  directory = os.path.dirname(os.fspath(prefix)) or "."
  names = [os.path.basename(os.fspath(p)) for p in (all_prefixes or [prefix])]
  if names[-1] != os.path.basename(os.fspath(prefix)):
    names.append(os.path.basename(os.fspath(prefix)))
  state = checkpoint_state_pb2.CheckpointState(model_checkpoint_path=names[-1],
                                               all_model_checkpoint_paths=names)
  fileio.write_text(os.path.join(directory, "checkpoint"), text_format.MessageToString(state))


def save_tf1_checkpoint(model, path, global_step=None, update_state=True):
  """Writes the model in the official TF1 layout (names as `bert/...`, `cls/...`).

  Any tool that reads official checkpoints (tf.train.load_checkpoint, TF1
  init_from_checkpoint) reads the result. Values are written bit-exactly.

  Args:
    model: AlbertEncoder, AlbertPretrainer or a model with `.encoder`.
    path: the checkpoint prefix to write, e.g. `out/model.ckpt`.
    global_step: optional int written as `global_step` (int64), as official checkpoints have.
    update_state: point the directory's `checkpoint` file at it (False for `model.ckpt-best`
      written beside a training run's checkpoints, whose resume must not jump to it).
  Returns:
    The prefix written.
  """
  path = os.fspath(path)
  directory = os.path.dirname(path) or "."
  tf.io.gfile.makedirs(directory)
  variables = official_names.model_variable_map(model)
  names = sorted(variables)
  tensors = [tf.convert_to_tensor(variables[n].numpy()) for n in names]
  if global_step is not None:
    names.append("global_step")
    tensors.append(tf.constant(np.int64(global_step)))
  with integrity.atomic_checkpoint_prefix(path) as temp:
    tf.raw_ops.SaveV2(prefix=temp, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=tensors)
  if update_state:
    write_checkpoint_state(path)
  return path
