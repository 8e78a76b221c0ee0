"""albert_tf: ALBERT (A Lite BERT) in TensorFlow 2 / tf_keras, compatible with the official release.

Public API:
  AlbertConfig        the official albert_config.json
  AlbertEncoder       embeddings + shared transformer + pooler (tf_keras.Model)
  AlbertPretrainer    encoder + masked-LM + sentence-order heads (tf_keras.Model)
  load_tf1_checkpoint / save_tf1_checkpoint   official TF1 checkpoints, both ways
  load_hf_checkpoint / save_hf_checkpoint     HF transformers ALBERT directories, both ways
  init_from_checkpoint                        TF1 official, our TF2 checkpoints or HF directories
  from_pretrained     any ALBERT weights (official tarball, TF1/TF2 checkpoint, HF directory,
                      TF-Hub module) -> model, config, tokenizer, labels; `.predict(texts)`;
                      `model_type=` asks for a kind (a classifier, a SQuAD model, ...)
  TextClassifier      raw text in, Keras compile/fit/evaluate/predict with run_classifier.py's
                      recipe, save_for_serving / save_checkpoint (a training-layer name: it
                      loads, as every name here, only when first used)
  TokenClassifier     pre-split words in, a tag per word (NER) with run_ner.py's windows, recipe,
                      seqeval numbers, export and checkpoint; predict_entities on raw text
  QuestionAnswerer    SQuAD from Python: (question, context) strings in, answers out through
                      run_squad.py's features and post-processing, its export and checkpoint
  AlbertPreprocessor  strings (or pairs) -> input_ids/input_mask/segment_ids, a Keras layer
  MultipleChoice      RACE on raw text (articles, questions, options) as TextClassifier is
"""

import importlib

from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError

__version__ = "0.1.0"

# These names import TensorFlow: each loads from the module that defines it on first use
# (PEP 562), so that TensorFlow-free tools (tokenization, create_pretraining_data workers) start
# fast and small.
_LAZY = {
    "AlbertEncoder": "albert_tf.networks.encoder",
    "AlbertPreprocessor": "albert_tf.text.preprocessor",
    "AlbertPretrainer": "albert_tf.models.pretrainer",
    "from_pretrained": "albert_tf.pretrained",
    "init_from_checkpoint": "albert_tf.checkpoints.init",
    "load_hf_checkpoint": "albert_tf.checkpoints.hf.load",
    "save_hf_checkpoint": "albert_tf.checkpoints.hf.save",
    "load_tf1_checkpoint": "albert_tf.checkpoints.tf1",
    "MultipleChoice": "albert_tf.training.multiple_choice_model",
    "save_tf1_checkpoint": "albert_tf.checkpoints.tf1",
    "QuestionAnswerer": "albert_tf.training.squad_model",
    "TextClassifier": "albert_tf.training.text_models",
    "TokenClassifier": "albert_tf.training.token_model",
}

__all__ = ["AlbertConfig", "AlbertError"] + sorted(_LAZY)


def __getattr__(name):
  if name not in _LAZY:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  value = getattr(importlib.import_module(_LAZY[name]), name)
  globals()[name] = value
  return value
