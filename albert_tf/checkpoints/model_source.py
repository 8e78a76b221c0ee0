"""Where a script's model comes from: config, vocabulary and initial weights, from its flags.

The official scripts take either `--albert_config_file` (+ `--spm_model_file`,
`--init_checkpoint`) or `--albert_hub_module_handle`, whose module carries all three (official
`FullTokenizer.from_hub_module`: the tokenization_info signature's SentencePiece model and
do_lower_case). A model given as `--init_checkpoint` supplies what the flags leave out, as its
format says (formats.detect: `config()`, `spm_model_file()`, `vocab_file()`): an untarred
official directory its albert_config.json and 30k-clean.model (the Chinese ones: their
vocab_chinese.txt, a WordPiece vocabulary), an HF transformers directory its config.json and
spiece.model (or vocab.txt), a TF1/TF2 checkpoint the albert_config.json and 30k-clean.model (or
a WordPiece vocabulary) beside it.
"""

import dataclasses
from typing import Optional

from albert_tf import models
from albert_tf.common import kinds
from albert_tf.checkpoints import formats
from albert_tf.checkpoints import hub_module
from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError


@dataclasses.dataclass
class ModelSource:
  """The resolved model: config, tokenizer settings and the checkpoint to initialise from."""
  config: AlbertConfig
  spm_model_file: Optional[str]
  do_lower_case: bool
  init_checkpoint: Optional[str]  # a checkpoint prefix/directory, HF directory or hub module
  vocab_file: Optional[str] = None  # a WordPiece vocabulary (when there is no spm_model_file)


def resolve_model_source(albert_config_file=None, init_checkpoint=None, hub_module_handle=None,
                         spm_model_file=None, do_lower_case=True, vocab_file=None,
                         albert_dropout_prob=None):
  """Resolves the official model flags into a ModelSource.

  Args:
    albert_dropout_prob: the ALBERT dropout of fine-tuning (the paper's DR): replaces the
      config's hidden_dropout_prob and attention_probs_dropout_prob; None keeps the config's.
  Raises:
    AlbertError: neither a config nor a hub module; both a hub module and --init_checkpoint;
      an unreadable config or module; an --init_checkpoint that must supply the config or the
      vocabulary and holds no readable weights, or no config.
  """
  if hub_module_handle:
    if init_checkpoint:
      raise AlbertError("--albert_hub_module_handle and --init_checkpoint both give the initial "
                        "weights: pass one of them")
    module = hub_module.read_hub_module(hub_module_handle)
    if albert_config_file and AlbertConfig.from_json_file(albert_config_file).to_dict() != \
        module.config.to_dict():
      raise AlbertError(f"--albert_config_file={albert_config_file} differs from the config of "
                        f"--albert_hub_module_handle={hub_module_handle}: drop the former")
    # As the official from_hub_module: the module's own SentencePiece model and casing.
    source = ModelSource(config=module.config, spm_model_file=module.spm_model_file,
                         do_lower_case=module.do_lower_case, init_checkpoint=module.path)
    return _with_dropout(source, albert_dropout_prob)
  checkpoint = None
  if init_checkpoint and not (albert_config_file and (spm_model_file or vocab_file)):
    # The model directory supplies the rest (its weights are verified here, before any work).
    checkpoint = formats.detect(init_checkpoint, "--init_checkpoint")
    checkpoint.check_weights()
  if albert_config_file:
    config = AlbertConfig.from_json_file(albert_config_file)
  elif checkpoint is not None:
    config = checkpoint.config()
  else:
    raise AlbertError("one of --albert_config_file or --albert_hub_module_handle is required")
  if not spm_model_file and not vocab_file and checkpoint is not None:
    spm_model_file = checkpoint.spm_model_file()
    vocab_file = None if spm_model_file else checkpoint.vocab_file()
  source = ModelSource(config=config, spm_model_file=spm_model_file, do_lower_case=do_lower_case,
                       init_checkpoint=init_checkpoint, vocab_file=vocab_file or None)
  return _with_dropout(source, albert_dropout_prob)


def _with_dropout(source, albert_dropout_prob):
  """The source with the ALBERT dropout (hidden and attention) set, when one is given."""
  if albert_dropout_prob is None:
    return source
  config = AlbertConfig.from_dict(dict(source.config.to_dict(),
                                       hidden_dropout_prob=albert_dropout_prob,
                                       attention_probs_dropout_prob=albert_dropout_prob),
                                  source="--albert_dropout_prob")
  return dataclasses.replace(source, config=config)


is_saved_model_directory = formats.is_saved_model_directory  # a TF-Hub module / SavedModel


# ------------------------------------------------------------------------ the model's type
# The models a checkpoint can hold (the converter's --model_type, from_pretrained's
# model_type): the kinds of albert_tf/common/kinds.py, under their older names here.
MODEL_TYPES = kinds.KINDS
CLASSIFIER_TYPES = kinds.CLASSIFIER_KINDS
SQUAD_TYPES = kinds.SQUAD_KINDS

model_type_of = kinds.kind_of  # the MODEL_TYPES entry of a built model


def checkpoint_model_type(path, model_type=None):
  """(model type, number of classes or None) of the model a checkpoint holds.

  Args:
    path: a TF1 (official) or TF2 (ours) checkpoint prefix, or an HF transformers directory.
    model_type: the type when the caller knows it (MODEL_TYPES); only the classes are read then.
  Raises:
    AlbertError: an unknown model_type, or a one-row head whose type the weights cannot tell.
  """
  if model_type is not None and model_type not in MODEL_TYPES:
    raise AlbertError(f"--model_type={model_type!r} is invalid: expected one of "
                      f"{', '.join(MODEL_TYPES)}")
  return formats.detect(path, hub_modules=False).kind(model_type)


def build_model(model_type, config, num_labels=None, dropout_rate=0.1):
  """A fresh model of `model_type` (MODEL_TYPES); classifiers need num_labels (1: regression)."""
  if model_type in (kinds.ENCODER, kinds.PRETRAINER):  # no dropout of their own
    return models.build(model_type, config)
  return models.build(model_type, config, num_labels, dropout_rate=dropout_rate)
