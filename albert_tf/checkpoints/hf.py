"""Hugging Face transformers ALBERT directories (`config.json` + `model.safetensors`), both ways:
the HF format's public names, gathered from the files that each do one job.

Reading needs no PyTorch: tensors come from `model.safetensors` through `safetensors.numpy`,
else from `pytorch_model.bin` (a pickle read without running it) or `tf_model.h5` (h5py).
An HF ALBERT directory stores PyTorch tensors: `albert.` (the encoder and, except in
`AlbertForQuestionAnswering`, the pooler) and its model's head:

* AlbertForPreTraining: `predictions.` (MLM) and `sop_classifier.` -> AlbertPretrainer.
* AlbertForSequenceClassification: `classifier` Linear(H, num_labels) on the pooled output ->
  AlbertClassifier (one label and problem_type "regression": a regression classifier).
* AlbertForMultipleChoice: `classifier` Linear(H, 1) on each choice's pooled output ->
  AlbertMultipleChoice.
* AlbertForQuestionAnswering: `qa_outputs` Linear(H, 2) on every token, no pooler ->
  AlbertSquadModel (v1.1).
* AlbertModel: no head -> AlbertEncoder.

  hf_config.py   config.json <-> AlbertConfig; the layouts HF can hold (sharing, groups)
  hf_tensors.py  model.safetensors (and shards) <-> {HF name: array}; reads the others:
  hf_torch_bin.py  pytorch_model.bin (zip or legacy pickle) -> arrays, without torch
  hf_tf_h5.py    tf_model.h5 (transformers' Keras weights) -> arrays in PyTorch's names
  hf_heads.py    the architecture of each kind (KIND_ARCHITECTURES), the kind a directory
                 holds, a classifier's class names (id2label) and their order
  hf_load.py     load_hf_checkpoint: every shape checked before anything is assigned
  hf_save.py     save_hf_checkpoint

Each tensor's name beside its official TF1 name is in `official_names`. The checkpoint-format
adapter (`formats.HfFormat`) reads and writes through these names.
"""

import os

from albert_tf.checkpoints.hf_config import (CONFIG_NAME, LAYER_NORM_EPSILON, check_group_rule,
                                             check_sharing, config_from_hf, hf_config_dict,
                                             hf_group_index, read_hf_config_json)
from albert_tf.checkpoints.hf_heads import (ARCHITECTURE_TYPES, KIND_ARCHITECTURES,
                                            head_row_order, hf_head_config, hf_label_names,
                                            hf_model_type, is_generic_labels)
from albert_tf.checkpoints.hf_load import load_hf_checkpoint
from albert_tf.checkpoints.hf_save import save_hf_checkpoint
from albert_tf.checkpoints.hf_tensors import (BASE_PREFIX, BUFFER_SUFFIXES, TIED,
                                              WEIGHTS_INDEX_NAME, WEIGHTS_NAME, has_weights_file,
                                              read_hf_tensors)

__all__ = [
    "ARCHITECTURE_TYPES", "BASE_PREFIX", "BUFFER_SUFFIXES", "CONFIG_NAME", "KIND_ARCHITECTURES",
    "LAYER_NORM_EPSILON", "TIED", "WEIGHTS_INDEX_NAME", "WEIGHTS_NAME", "check_group_rule",
    "check_sharing", "config_from_hf", "head_row_order", "hf_config_dict", "hf_group_index",
    "hf_head_config", "hf_label_names", "hf_model_type", "is_generic_labels", "is_hf_directory",
    "load_hf_checkpoint", "read_hf_config_json", "read_hf_tensors", "save_hf_checkpoint",
]


def is_hf_directory(path):
  """True when `path` is a directory holding an HF `config.json` (and no TF checkpoint state).

  A directory with `config.json` counts even without weights, so that loading it reports the
  missing weights file rather than "no checkpoint".
  """
  path = os.fspath(path)
  if not os.path.isdir(path) or not os.path.isfile(os.path.join(path, CONFIG_NAME)):
    return False
  if has_weights_file(path):
    return True
  return not os.path.exists(os.path.join(path, "checkpoint"))
