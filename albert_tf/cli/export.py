"""export_savedmodel.py's command line: a pretrained checkpoint -> TF-Hub style encoder SavedModel
(with --with_preprocessor: <export_path>/encoder and the text preprocessor
<export_path>/preprocessor).

Accepts the official export_to_tfhub.py flags (--albert_directory, --checkpoint_name,
--do_lower_case, --use_einsum, --export_path) and explicit-path extras; the files default to
the official directory layout (albert_config.json, 30k-clean.model, <checkpoint_name>).
"""

import os

from absl import flags

from albert_tf.cli.command import DIRECTORY, output_flags, run_command
from albert_tf.config import AlbertConfig
from albert_tf.common import fileio
from albert_tf.errors import AlbertError
from albert_tf.common.export_format import CONFIG_ASSET_NAME, SPM_ASSET_NAME


def define_flags():
  """The export's flags (defined when the command runs, never on import)."""
  flags.DEFINE_string("albert_directory", None, "Directory with albert_config.json, "
                      "30k-clean.model and the checkpoint (official flag).")
  flags.DEFINE_string("checkpoint_name", "model.ckpt-best",
                      "Checkpoint under --albert_directory to export (official flag).")
  flags.DEFINE_bool("do_lower_case", True, "Whether the model lower-cases its input.")
  flags.DEFINE_bool("use_einsum", True, "Official flag; accepted for compatibility (no effect).")
  flags.DEFINE_string("export_path", None, "Output SavedModel directory (official flag).")
  flags.DEFINE_string("albert_config_file", None, "Extra: config path (default "
                      "<albert_directory>/albert_config.json).")
  flags.DEFINE_string("init_checkpoint", None, "Extra: checkpoint path, official TF1 or ours "
                      "(default <albert_directory>/<checkpoint_name>).")
  flags.DEFINE_string("spm_model_file", None, "Extra: SentencePiece model (default "
                      "<albert_directory>/30k-clean.model).")
  flags.DEFINE_string("vocab_file", None, "Extra: a WordPiece vocabulary, for models without a "
                      "SentencePiece model (default <albert_directory>/vocab_chinese.txt or "
                      "vocab.txt: the official Chinese models).")
  flags.DEFINE_string("export_dir", None, "Extra: alias of --export_path.")
  flags.DEFINE_bool("with_preprocessor", False, "Extra: write the TF Hub pair "
                    "<export_path>/encoder and <export_path>/preprocessor (the text "
                    "preprocessor SavedModel, as albert_en_preprocess/3) instead of the encoder "
                    "alone at <export_path>.")
  flags.DEFINE_integer("preprocessor_seq_length", 128, "Extra: the preprocessor's default "
                       "seq_length (with --with_preprocessor).")
  output_flags(export_path=DIRECTORY, export_dir=DIRECTORY)


def main(argv):
  del argv
  f = flags.FLAGS
  directory = f.albert_directory
  export_dir = f.export_dir or f.export_path
  if not export_dir:
    raise AlbertError("--export_path (or --export_dir) is required")
  config_file = f.albert_config_file or (directory and os.path.join(directory, CONFIG_ASSET_NAME))
  checkpoint = f.init_checkpoint or (directory and os.path.join(directory, f.checkpoint_name))
  spm_model_file = f.spm_model_file or (directory and os.path.join(directory, SPM_ASSET_NAME))
  if not checkpoint:
    raise AlbertError("--albert_directory (or --init_checkpoint) is required")
  if not f.albert_config_file and config_file and not fileio.exists(config_file):
    config_file = None  # then the one beside the checkpoint (as our tools write it), below
  if spm_model_file and not fileio.exists(spm_model_file):
    if f.spm_model_file:
      raise AlbertError(f"--spm_model_file={spm_model_file}: file not found")
    spm_model_file = None  # a WordPiece model directory: export without the SentencePiece asset
  from albert_tf.checkpoints import formats  # lazy: TensorFlow, after the flags are checked
  from albert_tf.checkpoints.init import init_pretrainer  # lazy: TensorFlow, as above
  from albert_tf.export import export_encoder  # lazy: TensorFlow, after the flags are checked
  from albert_tf.models.pretrainer import AlbertPretrainer  # lazy: TensorFlow, as above
  vocab_file = None if spm_model_file else f.vocab_file
  if not spm_model_file and not vocab_file and directory:
    vocab_file = formats.first_existing(directory, formats.WORDPIECE_FILES)
  if config_file:
    config = AlbertConfig.from_json_file(config_file)
  else:  # the albert_config.json beside the checkpoint (or an HF / tarball / module's own)
    config = formats.detect(checkpoint, "--init_checkpoint").config()
  pretrainer = AlbertPretrainer(config)
  heads, held = init_pretrainer(pretrainer, checkpoint)
  _note_left_out(heads, held, checkpoint)
  if not f.with_preprocessor:
    path = export_encoder(pretrainer, export_dir, spm_model_file, do_lower_case=f.do_lower_case,
                          heads=heads, vocab_file=vocab_file)
    print(f"exported {checkpoint} to {path}")
    return
  if not spm_model_file and not vocab_file:
    raise AlbertError("--with_preprocessor needs a SentencePiece model (--spm_model_file or "
                      f"<albert_directory>/{SPM_ASSET_NAME}) or a WordPiece vocabulary "
                      "(--vocab_file)")
  from albert_tf.export import hub_preprocessor  # lazy: TensorFlow, after the flags are checked
  seq_length = f.preprocessor_seq_length
  if seq_length < 3 or seq_length > pretrainer.config.max_position_embeddings:
    raise AlbertError(f"--preprocessor_seq_length={seq_length}: expected 3 to "
                      f"{pretrainer.config.max_position_embeddings} (max_position_embeddings)")
  path = export_encoder(pretrainer, os.path.join(export_dir, "encoder"), spm_model_file,
                        do_lower_case=f.do_lower_case, heads=heads, vocab_file=vocab_file)
  print(f"exported {checkpoint} to {path}")
  path = hub_preprocessor.export_preprocessor(
      os.path.join(export_dir, "preprocessor"), spm_model_file, do_lower_case=f.do_lower_case,
      seq_length=seq_length, config=pretrainer.config, vocab_file=vocab_file)
  print(f"exported the text preprocessor (seq_length {seq_length}) to {path}")


_HEAD_NAMES = {"mlm": "masked-LM", "sop": "sentence-order"}


def _note_left_out(heads, held, checkpoint):
  """One line naming the signatures whose head the checkpoint lacks, and why."""
  left_out = [name for name in _HEAD_NAMES if name not in heads]
  if left_out:
    plural = "s" if len(left_out) > 1 else ""
    print(f"note: signature{plural} {' and '.join(left_out)} left out of the export: "
          f"{checkpoint} holds {held.describe()}, without the "
          f"{' and '.join(_HEAD_NAMES[n] for n in left_out)} head{plural} (a served signature "
          "must not answer with random weights)")


def run():
  """Defines the flags, parses the command line and exports."""
  run_command(define_flags, main)
