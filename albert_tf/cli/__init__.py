"""The command-line layer: every absl flag under albert_tf/ and flags -> typed configs.

  flags     the flags the scripts share and one flags -> configs function per top-level script
  convert   `python -m albert_tf.checkpoints.convert` / `python -m albert_tf.convert_checkpoint`
  export    export_savedmodel.py
  tools     `python -m albert_tf.tools.<tool>`
"""
