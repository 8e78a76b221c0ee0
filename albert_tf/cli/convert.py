"""`python -m albert_tf.cli.convert`, the checkpoint converter's command: its flags (defined only
when it runs) -> one albert_tf.checkpoints.conversion.convert call."""

if __name__ == "__main__":  # run as a command: quiet TensorFlow before anything imports it
  from albert_tf.common import console  # pylint: disable=g-import-not-at-top
  console.quiet_startup()

import os

from absl import flags

from albert_tf.common import fileio
from albert_tf.checkpoints.conversion import FORMATS, convert
from albert_tf.checkpoints.model_source import MODEL_TYPES
from albert_tf.cli.command import DIRECTORY, PREFIX, output_flags, require_flags, run_command


def define_flags():
  """The converter's flags (defined when the command runs, never on import)."""
  flags.DEFINE_string("albert_config_file", None, "albert_config.json (an HF input has its own).")
  flags.DEFINE_string("input_checkpoint", None, "TF1/TF2 prefix or directory, or HF directory.")
  flags.DEFINE_string("output_checkpoint", None, "Prefix to write (a directory for hf).")
  flags.DEFINE_enum("direction", "auto", ["auto", "tf1_to_tf2", "tf2_to_tf1"],
                    "Older flag; auto detects the input.")
  flags.DEFINE_enum("output_format", None, list(FORMATS),
                    "tf1 (official), tf2 (ours) or hf; default tf2 for TF1 input, else tf1.")
  flags.DEFINE_enum("model_type", None, list(MODEL_TYPES),
                    "The model the input holds; default: read from its head (needed for a "
                    "one-row official head: regression or multiple_choice).")
  flags.DEFINE_list("label_list", None,
                    "A classifier's class names in order (comma-separated): an hf output's "
                    "id2label; an hf input's head rows are put in this order.")
  output_flags(output_checkpoint=lambda f: DIRECTORY if f.output_format == "hf" else PREFIX)


def _convert(argv):
  del argv
  f = flags.FLAGS
  require_flags(("input_checkpoint", "output_checkpoint"), f)
  # The albert_config.json written beside a TF output (an HF input): a killed run's temporary.
  fileio.remove_temporaries(os.path.dirname(f.output_checkpoint) or ".", ["albert_config.json"])
  convert(f.albert_config_file, f.input_checkpoint, f.output_checkpoint, f.direction,
          f.output_format, model_type=f.model_type, label_list=f.label_list)


def main():
  """Defines the flags, parses the command line and converts (exit 2 on bad input)."""
  run_command(define_flags, _convert, stop_on_signals=True)


if __name__ == "__main__":
  main()
