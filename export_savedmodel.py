"""Exports a pretrained ALBERT checkpoint as a TF-Hub style SavedModel.

  python export_savedmodel.py --albert_directory=albert_base --checkpoint_name=model.ckpt-best \
    --export_path=hub/albert_base
Signatures: tokens, sop, mlm, tokenization_info (see albert_tf/export/hub_encoder.py).
"""

from albert_tf import console  # first: quiets TensorFlow before anything imports it
console.quiet_startup()

from absl import app

from albert_tf.errors import run_main
from albert_tf.export import cli

if __name__ == "__main__":
  app.run(run_main(cli.main))
