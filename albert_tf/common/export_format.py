"""The on-disk layout of albert_tf's SavedModel exports, described once.

The writers (albert_tf/export/: TF Serving exports and the TF-Hub style encoder) and the reader
(albert_tf/checkpoints/hub_module.py, behind --albert_hub_module_handle) both use these names.
This module imports nothing from albert_tf, so both packages can depend on it and neither on the
other.

  <export>/assets/30k-clean.model            SPM_ASSET_NAME     the SentencePiece model
  <export>/assets/30k-clean.vocab            VOCAB_ASSET_NAME   its vocabulary (hub encoder)
  <export>/assets/vocab.txt                  WORDPIECE_VOCAB_ASSET_NAME  a WordPiece model's
                                                                vocabulary (instead of the .model)
  <export>/assets/albert_config.json         CONFIG_ASSET_NAME  the model's config
  <export>/assets.extra/albert_export.json   EXPORT_INFO        what model the export is (kind,
                                                                task, architecture, vocabulary)
  <export>/assets.extra/tf_serving_warmup_requests   WARMUP_REQUESTS   TF Serving's warm-up
                                                     requests (albert_tf/export/warmup.py)
  <version>/core_ops/                        CORE_OPS_SUBDIR    serving exports: the same weights
                                                                with core-TensorFlow signatures

The asset names are those of the official TF-Hub module (export_to_tfhub.py), so one reader
finds them in both kinds of module.
"""

SPM_ASSET_NAME = "30k-clean.model"
VOCAB_ASSET_NAME = "30k-clean.vocab"
# The name Hugging Face and BERT give a WordPiece vocabulary (the official zh tarballs: vocab_chinese.txt).
WORDPIECE_VOCAB_ASSET_NAME = "vocab.txt"
CONFIG_ASSET_NAME = "albert_config.json"
# A relative path with "/" separators: joined to local paths and to gs:// ones alike.
EXPORT_INFO = "assets.extra/albert_export.json"
# The file TF Serving replays when it loads a version (its name is fixed by TF Serving).
WARMUP_REQUESTS = "assets.extra/tf_serving_warmup_requests"
CORE_OPS_SUBDIR = "core_ops"
