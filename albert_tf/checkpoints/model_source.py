"""Where a script's model comes from: config, vocabulary and initial weights, from its flags.

The official scripts take either `--albert_config_file` (+ `--spm_model_file`,
`--init_checkpoint`) or `--albert_hub_module_handle`, whose module carries all three (official
`FullTokenizer.from_hub_module`: the tokenization_info signature's SentencePiece model and
do_lower_case). An HF transformers directory given as `--init_checkpoint` carries its config too.
"""

import dataclasses
import os
from typing import Optional

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
