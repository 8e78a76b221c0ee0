"""Exports: fine-tuned models for TF Serving, and the pretrained encoder TF-Hub style.

  export_classifier(model, export_dir, ...)        GLUE classifier (run_classifier --export_dir)
  export_multiple_choice(model, export_dir, ...)   RACE model (run_race --export_dir)
  export_token_classifier(model, export_dir, ...)  NER model (run_ner --export_dir)
  export_encoder(pretrainer, export_dir, ...)      TF-Hub style encoder (export_savedmodel.py)
"""

from albert_tf.export.exporters import (export_classifier, export_multiple_choice,
                                        export_token_classifier)
from albert_tf.export.hub_encoder import export_encoder
