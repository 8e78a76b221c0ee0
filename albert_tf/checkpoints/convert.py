"""`python -m albert_tf.checkpoints.convert`: the checkpoint converter's command (its flags:
albert_tf/cli/convert.py). The library is albert_tf/checkpoints/conversion.py; its names stay
importable from this older path."""

if __name__ == "__main__":  # run as a command: quiet TensorFlow before anything imports it
  from albert_tf.common import console  # pylint: disable=g-import-not-at-top
  console.quiet_startup()

from albert_tf.checkpoints.conversion import (  # pylint: disable=unused-import
    FORMATS, convert, input_format, read_model, write_model)

if __name__ == "__main__":
  from albert_tf.cli import convert as convert_command  # pylint: disable=g-import-not-at-top
  convert_command.run()
