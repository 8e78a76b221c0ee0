"""Compatibility: `python -m albert_tf.convert_checkpoint` is the older path of the checkpoint
converter, `python -m albert_tf.checkpoints.convert` (same flags; see that module)."""

if __name__ == "__main__":
  from albert_tf.checkpoints import convert  # pylint: disable=g-import-not-at-top
  convert.run()
