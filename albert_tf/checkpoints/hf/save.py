"""Writing one of our models as an HF transformers ALBERT directory."""

import json
import os

import numpy as np
from absl import logging

from albert_tf.common import fileio, kinds
from albert_tf.checkpoints.hf import config as hf_config
from albert_tf.checkpoints.hf import heads as hf_heads
from albert_tf.checkpoints.hf import tensors as hf_tensors
from albert_tf.checkpoints import official_names


def save_hf_checkpoint(model, directory, label_list=None):
  """Writes the model as an HF transformers ALBERT directory.

  `config.json` (model_type albert, `gelu_new` for the official gelu, layer_norm_eps 1e-12, the
  architecture of the model's head, a classifier's id2label / label2id / problem_type) and
  `model.safetensors` (float32), which transformers' `<architecture>.from_pretrained` loads with
  nothing missing or unexpected: AlbertForPreTraining (the tied decoder is not stored; HF re-ties
  it), AlbertForSequenceClassification, AlbertForMultipleChoice, AlbertForQuestionAnswering and
  AlbertForTokenClassification (without the pooler, which they have not), an encoder alone as
  AlbertModel. The SQuAD v2.0 head has no HF ALBERT counterpart: its encoder is written as an
  AlbertModel and a warning names the head's variables. When embedding_size == hidden_size, HF's mandatory E->H projection is
  written as the identity.

  Args:
    model: AlbertEncoder, AlbertPretrainer or a task model with `.encoder`.
    directory: created if needed; its config.json and model.safetensors are replaced atomically.
    label_list: a classifier's class names in its order (id2label); None: LABEL_0, LABEL_1, ...
  Returns:
    The sorted HF tensor names written.
  Raises:
    AlbertError: the model's sharing or group layout has no HF equivalent; a label list that
      does not name the classes. Nothing is written then.
  """
  directory = os.fspath(directory)
  encoder = official_names.encoder_of(model)
  config = encoder.config
  hf_config.check_sharing(config, directory)
  hf_config.check_group_rule(config, directory)
  kind = kinds.kind_of(model)
  architecture = hf_heads.KIND_ARCHITECTURES[kind]
  config_json = dict(hf_config.hf_config_dict(config, [architecture]),
                     **hf_heads.hf_head_config(model, label_list))
  # HF's AlbertForQuestionAnswering and AlbertForTokenClassification have no pooler.
  no_pooler = architecture in hf_heads.NO_POOLER_ARCHITECTURES
  tensors, skipped = {}, []
  for name, variable, hf_name, transpose in sorted(official_names.official_variables(model),
                                                   key=lambda row: row.name):
    if hf_name is None:
      skipped.append(name)
    elif not (no_pooler and hf_name.startswith(official_names.HF_POOLER + ".")):
      value = variable.numpy().astype(np.float32)
      tensors[hf_name] = np.ascontiguousarray(value.T if transpose else value)
  if encoder.embedding_projection is None:
    size = config.hidden_size
    mapping = official_names.HF_EMBEDDING_PROJECTION
    tensors[mapping + ".weight"] = np.eye(size, dtype=np.float32)
    tensors[mapping + ".bias"] = np.zeros(size, np.float32)
  if skipped:
    logging.warning("Not written to the HF directory (no HF ALBERT name): %s", ", ".join(skipped))
  hf_tensors.write_hf_tensors(tensors, directory)
  text = json.dumps(config_json, indent=2, sort_keys=True) + "\n"
  fileio.write_text(os.path.join(directory, hf_config.CONFIG_NAME), text)
  return sorted(tensors)
