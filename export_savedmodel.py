"""Exports a pretrained ALBERT checkpoint as a TF-Hub style SavedModel (the official
export_to_tfhub.py command line).

  python export_savedmodel.py --albert_directory=albert_base --checkpoint_name=model.ckpt-best \
    --export_path=hub/albert_base
Signatures: tokens, sop, mlm, tokenization_info, and TF Hub's Reusable SavedModel encoder API
(see albert_tf/export/hub_encoder.py); flags: albert_tf/cli/export.py. With --with_preprocessor:
<export_path>/encoder and the text preprocessor <export_path>/preprocessor
(albert_tf/export/hub_preprocessor.py), as tfhub.dev's albert_en_base/3 + albert_en_preprocess/3.
"""

from albert_tf.common import console  # first: quiets TensorFlow before anything imports it
console.quiet_startup()

from albert_tf.cli import export  # pylint: disable=g-import-not-at-top,g-bad-import-order

if __name__ == "__main__":
  from albert_tf.training.preemption import StopSignals  # pylint: disable=g-import-not-at-top
  # SIGTERM/SIGINT: one line and exit 42, as the trainers (the export is written to a temporary
  # folder and renamed into place, so nothing partial appears at --export_path).
  with StopSignals():
    export.run()
