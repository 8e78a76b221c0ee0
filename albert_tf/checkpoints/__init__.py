"""ALBERT checkpoints in every form, one module per job (import the module that does it):

  official_names  the official TF1 and HF name of every variable of every kind
  formats         detect(path): which format a path is, and its adapter
  tf1 / tf2       the official name-based TF1 layout <-> Keras; our object-based TF2 checkpoints
  hf/             HF transformers directories (config.json + model.safetensors), both ways
  hub_module      TF-Hub module directories as config, vocabulary and weights
  init            init_from_checkpoint and the strict restore of fine-tuned checkpoints
  conversion      the converter's library

The modules import TensorFlow; this package itself imports nothing.
"""
