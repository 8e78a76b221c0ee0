"""Exports a clean ALBERT checkpoint in the official TF1 layout (the official export_checkpoints.py).

  python export_checkpoints.py --albert_directory=out/mrpc --checkpoint_name=model.ckpt-best \
    --export_path=albert_mrpc/model.ckpt

Reads <albert_directory>/albert_config.json and <albert_directory>/<checkpoint_name> (official
TF1, ours, or an HF directory) and writes the model variables and global_step, without optimizer
state, at --export_path, with albert_config.json (and the SentencePiece model, when the input
has one) beside it.
"""

from albert_tf.common import console  # first: quiets TensorFlow before anything imports it
console.quiet_startup()

import os  # pylint: disable=g-import-not-at-top,g-bad-import-order

from absl import flags

from albert_tf.cli import command  # pylint: disable=g-import-not-at-top
from albert_tf.common import fileio
from albert_tf.errors import AlbertError

flags.DEFINE_string("albert_directory", None, "Directory holding albert_config.json and the "
                    "checkpoint.")
flags.DEFINE_string("checkpoint_name", "model.ckpt-best", "Name of the checkpoint under "
                    "albert_directory to be exported.")
flags.DEFINE_bool("do_lower_case", True, "Official flag (the checkpoint does not depend on it).")
flags.DEFINE_string("export_path", None, "Path (prefix) of the exported checkpoint.")
flags.DEFINE_string("albert_config_file", None, "Extra: the config (default "
                    "<albert_directory>/albert_config.json).")

command.output_flags(export_path=command.PREFIX)

FLAGS = flags.FLAGS


def main(_):
  if not FLAGS.export_path:
    raise AlbertError("--export_path is required")
  from albert_tf.checkpoints import clean_checkpoint  # pylint: disable=g-import-not-at-top
  checkpoint = os.path.join(FLAGS.albert_directory, FLAGS.checkpoint_name)
  config_file = FLAGS.albert_config_file or os.path.join(FLAGS.albert_directory,
                                                         "albert_config.json")
  # Without <albert_directory>/albert_config.json: the checkpoint's own (e.g. an HF directory's).
  config = clean_checkpoint.read_config(
      checkpoint, config_file if FLAGS.albert_config_file or fileio.exists(config_file) else None)
  prefix, with_heads, left_out = clean_checkpoint.export_checkpoint(config, checkpoint,
                                                                    FLAGS.export_path)
  print(f"exported {checkpoint} to {prefix} (encoder"
        f"{' + masked-LM and sentence-order heads' if with_heads else ' only: no pretraining heads in the checkpoint'})")
  if left_out:  # as the official tool, which builds the pretraining model only
    print(f"note: left out, as by the official export_checkpoints.py: {left_out}; "
          f"python -m albert_tf.cli.convert keeps a fine-tuned head")


if __name__ == "__main__":
  flags.mark_flag_as_required("albert_directory")
  command.run(main)
