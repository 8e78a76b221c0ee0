"""Exports a pretrained ALBERT checkpoint as a TF-Hub style SavedModel (the official
export_to_tfhub.py command line).

  python export_savedmodel.py --albert_directory=albert_base --checkpoint_name=model.ckpt-best \
    --export_path=hub/albert_base
Signatures: tokens, sop, mlm, tokenization_info (see albert_tf/export/hub_encoder.py); flags:
albert_tf/cli/export.py.
"""

from albert_tf import console  # first: quiets TensorFlow before anything imports it
console.quiet_startup()

from albert_tf.cli import export  # pylint: disable=g-import-not-at-top,g-bad-import-order

if __name__ == "__main__":
  from albert_tf.training.preemption import StopSignals  # pylint: disable=g-import-not-at-top
  # SIGTERM/SIGINT: one line and exit 42, as the trainers (the export is written to a temporary
  # folder and renamed into place, so nothing partial appears at --export_path).
  with StopSignals():
    export.run()
