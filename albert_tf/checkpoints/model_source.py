"""Where a script's model comes from: config, vocabulary and initial weights, from its flags.

The official scripts take either `--albert_config_file` (+ `--spm_model_file`,
`--init_checkpoint`) or `--albert_hub_module_handle`, whose module carries all three (official
`FullTokenizer.from_hub_module`: the tokenization_info signature's SentencePiece model and
do_lower_case). An HF transformers directory given as `--init_checkpoint` carries its config too.
"""

import dataclasses
import os
from typing import Optional

from albert_tf import kinds
from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError


@dataclasses.dataclass
class ModelSource:
  """The resolved model: config, tokenizer settings and the checkpoint to initialise from."""
  config: AlbertConfig
  spm_model_file: Optional[str]
  do_lower_case: bool
  init_checkpoint: Optional[str]  # a checkpoint prefix/directory, HF directory or hub module


def resolve_model_source(albert_config_file=None, init_checkpoint=None, hub_module_handle=None,
                         spm_model_file=None, do_lower_case=True):
  """Resolves the official model flags into a ModelSource.

  Raises:
    AlbertError: neither a config nor a hub module; both a hub module and --init_checkpoint;
      an unreadable config or module.
  """
  if hub_module_handle:
    from albert_tf.checkpoints import hub_module  # pylint: disable=g-import-not-at-top
    if init_checkpoint:
      raise AlbertError("--albert_hub_module_handle and --init_checkpoint both give the initial "
                        "weights: pass one of them")
    module = hub_module.read_hub_module(hub_module_handle)
    if albert_config_file and AlbertConfig.from_json_file(albert_config_file).to_dict() != \
        module.config.to_dict():
      raise AlbertError(f"--albert_config_file={albert_config_file} differs from the config of "
                        f"--albert_hub_module_handle={hub_module_handle}: drop the former")
    # As the official from_hub_module: the module's own SentencePiece model and casing.
    return ModelSource(config=module.config, spm_model_file=module.spm_model_file,
                       do_lower_case=module.do_lower_case, init_checkpoint=module.path)
  if albert_config_file:
    config = AlbertConfig.from_json_file(albert_config_file)
  elif init_checkpoint and _is_hf_directory(init_checkpoint):
    from albert_tf.checkpoints import hf  # pylint: disable=g-import-not-at-top
    config = hf.config_from_hf(init_checkpoint)
  else:
    raise AlbertError("one of --albert_config_file or --albert_hub_module_handle is required")
  return ModelSource(config=config, spm_model_file=spm_model_file, do_lower_case=do_lower_case,
                     init_checkpoint=init_checkpoint)


def is_saved_model_directory(path):
  """A TF-Hub module or SavedModel directory (weights under variables/)."""
  return os.path.isdir(path) and os.path.exists(os.path.join(path, "saved_model.pb"))


def _is_hf_directory(path):
  from albert_tf.checkpoints import hf  # pylint: disable=g-import-not-at-top
  return hf.is_hf_directory(path)


# ------------------------------------------------------------------------ the model's type
# The models a checkpoint can hold (the converter's --model_type, from_pretrained's
# model_type): the kinds of albert_tf/kinds.py, under their older names here.
MODEL_TYPES = kinds.KINDS
CLASSIFIER_TYPES = kinds.CLASSIFIER_KINDS
SQUAD_TYPES = kinds.SQUAD_KINDS

# (a part of a variable name, the model type), first match wins: official TF1 names, then our
# TF2 object paths. The unscoped official GLUE / RACE `output_weights` is handled apart.
_TYPE_SIGNATURES = (
    ("start_logits/dense", "squad_v2"), ("model/squad_head/start_dense/", "squad_v2"),
    ("cls/squad/output_weights", "squad_v1"), ("model/squad_head/output_weights", "squad_v1"),
    ("model/choice_head/", "multiple_choice"), ("model/classifier_head/", "classifier"),
    ("cls/predictions/", "pretrainer"), ("model/masked_lm_head/", "pretrainer"),
)
_HEAD_ROWS = ("output_weights", "model/classifier_head/output_weights/.ATTRIBUTES/VARIABLE_VALUE",
              "model/choice_head/scorer/output_weights/.ATTRIBUTES/VARIABLE_VALUE")


model_type_of = kinds.kind_of  # the MODEL_TYPES entry of a built model


def checkpoint_model_type(path, model_type=None):
  """(model type, number of classes or None) of the model a checkpoint holds.

  Args:
    path: a TF1 (official) or TF2 (ours) checkpoint prefix, or an HF transformers directory.
    model_type: the type when the caller knows it (MODEL_TYPES); only the classes are read then.
  Raises:
    AlbertError: an unknown model_type, or a one-row head whose type the weights cannot tell.
  """
  from albert_tf.checkpoints import hf  # pylint: disable=g-import-not-at-top
  if model_type is not None and model_type not in MODEL_TYPES:
    raise AlbertError(f"--model_type={model_type!r} is invalid: expected one of "
                      f"{', '.join(MODEL_TYPES)}")
  if hf.is_hf_directory(path):
    return hf.hf_model_type(path, model_type)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  shapes = {name: shape for name, shape in
            tf.train.load_checkpoint(path).get_variable_to_shape_map().items()
            if "OPTIMIZER_SLOT" not in name}
  rows = next((shapes[name][0] for name in _HEAD_ROWS if name in shapes), None)
  if model_type is None:
    model_type = next((kind for part, kind in _TYPE_SIGNATURES
                       if any(part in name for name in shapes)), None)
  if model_type is None and rows is not None:
    if rows == 1:
      raise AlbertError(f"{path}: its one-row head `output_weights` [1, H] is a regression "
                        "classifier (STS-B) or a multiple-choice scorer (RACE): pass "
                        "--model_type=regression or --model_type=multiple_choice")
    model_type = "classifier"
  if model_type == "classifier" and rows == 1:
    model_type = "regression"  # our TF2 classifier head with one row: STS-B
  return model_type or "encoder", rows if model_type in CLASSIFIER_TYPES else None


def build_model(model_type, config, num_labels=None, dropout_rate=0.1):
  """A fresh model of `model_type` (MODEL_TYPES); classifiers need num_labels (1: regression)."""
  # The models import TensorFlow: this module stays importable without it (cli/convert.py
  # reads MODEL_TYPES before TensorFlow's logging is quieted).
  from albert_tf import models  # pylint: disable=g-import-not-at-top
  if model_type in (kinds.ENCODER, kinds.PRETRAINER):  # no dropout of their own
    return models.build(model_type, config)
  return models.build(model_type, config, num_labels, dropout_rate=dropout_rate)
