"""Loading an HF transformers ALBERT directory into one of our models.

Values are assigned with the same semantics as `tf1.load_tf1_checkpoint`: every shape is checked
before anything is assigned, and the report lists what was loaded, what the model has that the
directory lacks, and what the directory has that the model does not use. A classifier's head
rows are put in the task's label order (`hf_heads.fit_classifier_head`).
"""

import os

import numpy as np
from absl import logging

from albert_tf.common import kinds
from albert_tf.checkpoints.hf import config as hf_config
from albert_tf.checkpoints.hf import heads as hf_heads
from albert_tf.checkpoints.hf import tensors as hf_tensors
from albert_tf.checkpoints import official_names
from albert_tf.checkpoints.tf1 import LoadReport
from albert_tf.errors import AlbertError


def _fit_head(model, path, config_json, tensors, label_list, strict):
  """(tensors, HF names not to load) for this model's head.

  The same `classifier` tensors are a sequence classifier in one architecture and a
  multiple-choice scorer in the other: a directory of the other kind keeps its head to itself.
  """
  kind = kinds.kind_of(model)
  theirs, ours = hf_heads.architecture(config_json), hf_heads.KIND_ARCHITECTURES[kind]
  shared = hf_heads.SHARED_HEAD_ARCHITECTURES
  if theirs in shared and ours in shared and theirs != ours:
    return tensors, {n for n in tensors if n.startswith(official_names.HF_CLASSIFIER + ".")}
  if kind in kinds.LABELED_KINDS:
    tensors = hf_heads.fit_classifier_head(model, path, config_json, tensors, label_list, strict)
  return tensors, set()


def _require_head(model, path, config_json, missing):
  """Refuses a directory without this model's head (evaluating a random head is no result)."""
  heads = [name for name in missing if not name.startswith(official_names.ENCODER_SCOPE)]
  if heads:
    kind = kinds.kind_of(model)
    ours = hf_heads.KIND_ARCHITECTURES[kind]
    if ours == hf_heads.KIND_ARCHITECTURES[kinds.ENCODER] and kind != kinds.ENCODER:
      raise AlbertError(f"{path}: HF transformers ALBERT has no {kind} head (lacks {heads[0]}): "
                        f"an HF directory holds only the encoder of a {type(model).__name__}")
    theirs = hf_heads.architecture(config_json) or "ALBERT"
    raise AlbertError(f"{path}: an HF {theirs} directory has no {ours} head for this "
                      f"{type(model).__name__} (lacks {heads[0]}); fine-tune it first "
                      "(--do_train with it as --init_checkpoint)")


def _planned_assignments(model, tensors, skip, weights_where):
  """(loaded, missing, used HF names, [(variable, value)]) with every shape checked."""
  loaded, missing, used, assignments = [], [], set(), []
  for name, variable, source, transpose in official_names.official_variables(model):
    if source is None or source not in tensors or source in skip:
      missing.append(name)
      continue
    value = tensors[source]
    want = variable.shape.as_list()
    got = list(value.shape[::-1]) if transpose else list(value.shape)
    if got != want:
      raise AlbertError(f"{weights_where}: tensor {source} ({name}) has shape "
                        f"{list(value.shape)} but the model expects "
                        f"{want[::-1] if transpose else want} (wrong config.json?)")
    value = hf_tensors.as_float32(source, value, weights_where)
    assignments.append((variable, value.T if transpose else value))
    used.add(source)
    loaded.append(name)
  return loaded, missing, used, assignments


def _checked_projection(encoder, tensors, weights_where):
  """HF always has an E->H projection; the official model has none when E == H, so there it
  must be the identity to be dropped. Returns the HF names so accounted for."""
  mapping = official_names.HF_EMBEDDING_PROJECTION
  if encoder.embedding_projection is not None or mapping + ".weight" not in tensors:
    return set()
  weight = tensors[mapping + ".weight"]
  bias = tensors.get(mapping + ".bias", np.zeros(weight.shape[:1], weight.dtype))
  if weight.shape != (encoder.config.hidden_size,) * 2 or not (
      np.array_equal(weight, np.eye(weight.shape[0])) and not np.any(bias)):
    raise AlbertError(f"{weights_where}: {mapping} is not the identity but "
                      "embedding_size == hidden_size, where the official model has no "
                      "projection")
  return {n for n in (mapping + ".weight", mapping + ".bias") if n in tensors}


def _checked_tied_copies(tensors, weights_where):
  """HF's tied copies must equal what they are tied to. Returns the copies' names."""
  used = set()
  for copy_name, original in hf_tensors.TIED.items():
    if copy_name in tensors and original in tensors:
      if not np.array_equal(tensors[copy_name], tensors[original]):
        raise AlbertError(f"{weights_where}: {copy_name} differs from {original}, to which "
                          "ALBERT ties it")
      used.add(copy_name)
  return used


def _unread_pooler(model, missing, path):
  """The pooler names among `missing` that this model never reads (SQuAD: HF's
  AlbertForQuestionAnswering has no pooler); they stay at their initial values."""
  if kinds.kind_of(model) not in hf_heads.NO_POOLER_KINDS:
    return set()
  pooler = {n for n in missing if n.startswith("bert/pooler/")}
  if pooler:
    logging.info("%s: no pooler, which %s does not read (kept at its initial value)", path,
                 type(model).__name__)
  return pooler


def load_hf_checkpoint(model, path, label_list=None, require_head=False):
  """Loads an HF transformers ALBERT directory into a Keras ALBERT model.

  Works for an AlbertEncoder or any model holding one at `.encoder`; the heads (pretraining,
  sequence classification, multiple choice, question answering) load when the model has them
  and the directory holds them (the table in albert_tf/checkpoints/hf/__init__.py). HF's tied
  copies (`predictions.decoder.*`) must equal what they are tied to.

  Args:
    model: AlbertEncoder, AlbertPretrainer or a task model with `.encoder`, built with the
      config of the directory (`config_from_hf(path)`); a classifier with the task's classes.
    path: a directory with `config.json` and `model.safetensors`, `pytorch_model.bin` or
      `tf_model.h5` (or their shards; `hf_tensors.weights_file` says which is read).
    label_list: a classifier's labels in the task's order: id2label's names put the head's rows
      in that order (`head_row_order`). Required when id2label holds names other than
      transformers' generic LABEL_<i> (pass `hf_label_names(path)` to keep the directory's).
    require_head: the directory must hold this model's head (evaluation, prediction, export).
  Returns:
    LoadReport: loaded/missing in official TF1 names, unexpected in HF names.
  Raises:
    AlbertError: not an ALBERT directory, no weights file, config.json and the model disagree,
      a tensor's shape differs, a classifier head of other classes, no head with require_head,
      or a layout the official model cannot compute. Nothing is assigned then.
  """
  path = os.fspath(path)
  config_file = os.path.join(path, hf_config.CONFIG_NAME)
  weights_where = hf_tensors.weights_file(path) or os.path.join(path, hf_tensors.WEIGHTS_NAME)
  encoder = official_names.encoder_of(model)
  hf_config.check_same_architecture(hf_config.config_from_hf(path), encoder.config, config_file)
  hf_config.check_sharing(encoder.config, config_file)
  hf_config.check_group_rule(encoder.config, config_file)
  config_json = hf_config.read_hf_config_json(path)
  tensors, skip = _fit_head(model, path, config_json, hf_tensors.read_hf_tensors(path),
                            label_list, require_head)
  loaded, missing, used, assignments = _planned_assignments(model, tensors, skip, weights_where)
  used |= _checked_projection(encoder, tensors, weights_where)
  used |= _checked_tied_copies(tensors, weights_where)
  used.update(n for n in tensors if n.endswith(hf_tensors.BUFFER_SUFFIXES))
  missing = sorted(set(missing) - _unread_pooler(model, missing, path))
  if require_head:
    _require_head(model, path, config_json, missing)
  # Assign only after every check, so a refused directory leaves the model untouched.
  for variable, value in assignments:
    variable.assign(value.astype(variable.dtype.as_numpy_dtype))
  unexpected = sorted(n for n in tensors if n not in used)
  return LoadReport(checkpoint=path, loaded=sorted(loaded), missing=missing,
                    unexpected=unexpected)
