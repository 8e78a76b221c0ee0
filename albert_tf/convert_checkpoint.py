"""Compatibility: `python -m albert_tf.convert_checkpoint` is the older path of the checkpoint
converter, `python -m albert_tf.checkpoints.convert` (same flags: albert_tf/cli/convert.py)."""

if __name__ == "__main__":
  from albert_tf.common import console  # pylint: disable=g-import-not-at-top
  console.quiet_startup()  # before anything imports TensorFlow
  from albert_tf.cli import convert  # pylint: disable=g-import-not-at-top
  convert.run()
