"""The official export_checkpoints.py: any ALBERT checkpoint -> a clean official TF1 checkpoint.

The official tool builds the pretraining model (encoder, masked-LM and sentence-order heads),
loads `<albert_directory>/<checkpoint_name>` (default `model.ckpt-best`) and saves every model
variable and `global_step` (no optimizer slots) at --export_path. Here the input may be an
official TF1 checkpoint, one of ours or an HF directory; a checkpoint without both pretraining
heads (a fine-tuned `model.ckpt-best`) exports the encoder alone rather than heads at random
values. The output is self-describing: its albert_config.json (and the input's SentencePiece
model, when it has one) beside it, as the converter leaves them (`conversion.write_beside`).
"""

from albert_tf.common import fileio
from albert_tf.checkpoints import conversion
from albert_tf.checkpoints import formats
from albert_tf.checkpoints import integrity
from albert_tf.checkpoints import tf1
from albert_tf.checkpoints.init import checkpoint_global_step, init_pretrainer
from albert_tf.common import kinds
from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.models.pretrainer import AlbertPretrainer


def read_config(checkpoint, config_file=None):
  """The config to export with: `config_file`, else the checkpoint's own (the albert_config.json
  beside it, an HF directory's config.json)."""
  if config_file:
    return AlbertConfig.from_json_file(config_file)
  return formats.detect(checkpoint, "checkpoint", hub_modules=False).config()


def export_checkpoint(config, checkpoint, export_path):
  """Loads `checkpoint` into the pretraining model and writes it in the official layout, with
  albert_config.json (and the input's SentencePiece model) beside it.

  Returns:
    (prefix written, whether the MLM/SOP heads were included, None or what the checkpoint holds
     that the export leaves out, as one phrase: a fine-tuned task head, early exit's internal
     classifiers; the official tool, building the pretraining model, leaves them out too).
  Raises:
    AlbertError: no checkpoint; the encoder does not match the config.
  """
  if not fileio.isdir(checkpoint) and not integrity.checkpoint_files(checkpoint):
    raise AlbertError(f"{checkpoint}: no checkpoint there (expected {checkpoint}.index)")
  source = formats.detect(checkpoint, "checkpoint", hub_modules=False)
  pretrainer = AlbertPretrainer(config)
  heads, _ = init_pretrainer(pretrainer, checkpoint)
  with_heads = len(heads) == 2  # one head alone is not the official pretraining model
  step = None if source.name == formats.HF else checkpoint_global_step(source.path)
  prefix = tf1.save_tf1_checkpoint(pretrainer if with_heads else pretrainer.encoder, export_path,
                                   global_step=step or 0)
  conversion.write_beside(prefix, formats.TF1, config, source.spm_model_file(),
                          source.vocab_file())
  return prefix, with_heads, _left_out(source)


def _left_out(source):
  """None, or the task head (and early exit's classifiers) of a TF1/TF2 `source`, as a phrase."""
  if source.name == formats.HF:
    return None
  held = source.held_kind()
  if set(held.kinds) <= {kinds.ENCODER, kinds.PRETRAINER}:
    return None
  early = [n for n in source._shapes() if n.startswith(("early_exit/", "model/early_exit_"))]  # pylint: disable=protected-access
  return (f"its {' or '.join(held.kinds)} head ({held.evidence})"
          + (" and early exit's internal classifiers (early_exit/layer_*)" if early else ""))
