"""keras-hub's AlbertTextClassifier.fit, on our TextClassifier's weights and data, as a side of
bench/speed/fit_vs_script.py (--keras_hub).

keras-hub is not a dependency: it runs on Keras 3 with the TensorFlow backend (TF 2.20 and
Keras 3 are in .venv beside tf_keras), imported from a folder it was installed into with
  .venv/bin/pip install --no-deps --target <dir> keras-hub==0.32.0 tokenizers kagglehub
(the two packages it imports that .venv lacks), the folder on PYTHONPATH:
  PYTHONPATH=<dir> .venv/bin/python -m bench.speed.fit_vs_script --keras_hub There is no network for `from_preset`
downloads: our classifier is written as an HF transformers directory (save_hf_checkpoint, plus
the SentencePiece model as spiece.model), which keras-hub's own HF converter loads as a preset;
the classification head (not an HF ALBERT preset's) is copied from the same directory.
"""

import os
import shutil

import numpy as np

# Keras 3's optimizer closest to run_classifier.py's: AdamW with the official betas, epsilon
# and weight decay, LayerNorm scales/offsets and biases excluded, clipping at global norm 1.0.
ADAM_EPSILON, WEIGHT_DECAY, CLIP_NORM = 1e-6, 0.01, 1.0


def build(model, texts_a, texts_b, labels, features, work_dir, learning_rate,
          train_steps, warmup_steps):
  """keras-hub's AlbertTextClassifier on `model`'s weights, compiled, and what it fits on.

  Args:
    model: our TextClassifier (a pair classifier): its weights, sequence length and SPM model.
    texts_a, texts_b, labels: the batch every step trains on (raw strings, class ids).
    features: our preprocessor's ids of the batch: the weights are checked to be the same by
      comparing both models' logits on them.
    work_dir: where the preset directory is written.
    learning_rate, train_steps, warmup_steps: the recipe's (a linear decay over train_steps;
      Keras 3 has no warm-up + decay schedule of its own, and the rate does not change a step's
      cost).
  Returns:
    (classifier, dataset, callback class, note): note says the versions, the preset's making
    and the logits' agreement.
  """
  del warmup_steps  # see Args
  os.environ.setdefault("KERAS_BACKEND", "tensorflow")
  import keras  # pylint: disable=g-import-not-at-top
  import keras_hub  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top
  from albert_tf.checkpoints.hf.save import save_hf_checkpoint  # pylint: disable=g-import-not-at-top
  if keras.backend.backend() != "tensorflow":
    raise RuntimeError(f"keras-hub side: KERAS_BACKEND is {keras.backend.backend()}, "
                       "expected tensorflow (the same TensorFlow as ours)")

  preset = os.path.join(work_dir, "keras_hub_preset")
  save_hf_checkpoint(model.classifier, preset)
  shutil.copy(model.preprocessor.spm_model_file, os.path.join(preset, "spiece.model"))
  preprocessor = keras_hub.models.AlbertTextClassifierPreprocessor.from_preset(
      preset, sequence_length=model.preprocessor.sequence_length)
  classifier = keras_hub.models.AlbertTextClassifier.from_preset(
      preset, num_classes=model.num_classes, preprocessor=preprocessor)
  head = load_file(os.path.join(preset, "model.safetensors"))
  classifier.output_dense.set_weights([head["classifier.weight"].T, head["classifier.bias"]])

  ours = model.classifier(features, training=False)["logits"].numpy()
  theirs = np.asarray(classifier({"token_ids": features["input_ids"],
                                  "segment_ids": features["segment_ids"],
                                  "padding_mask": features["input_mask"]}, training=False))
  gap = float(np.abs(ours - theirs).max())
  if gap > 1e-3:
    raise RuntimeError(f"keras-hub side: its logits differ from ours by {gap} on the same ids; "
                       "the weights were not carried over")

  schedule = keras.optimizers.schedules.PolynomialDecay(learning_rate, train_steps, 0.0)
  optimizer = keras.optimizers.AdamW(schedule, weight_decay=WEIGHT_DECAY, beta_1=0.9,
                                     beta_2=0.999, epsilon=ADAM_EPSILON,
                                     global_clipnorm=CLIP_NORM)
  optimizer.exclude_from_weight_decay(var_names=["gamma", "beta", "bias"])
  classifier.compile(optimizer=optimizer,
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                     metrics=["sparse_categorical_accuracy"], jit_compile=False)
  dataset = tf.data.Dataset.from_tensors(
      ((tf.constant(texts_a), tf.constant(texts_b)), tf.constant(labels))).repeat()
  note = {"keras_hub": keras_hub.__version__, "keras": keras.__version__,
          "backend": keras.backend.backend(),
          "weights": "ours, through an HF directory keras-hub's converter loads as a preset",
          "max_logit_gap_on_the_same_ids": gap,
          "parameters": int(classifier.count_params()),
          "recipe": f"keras.optimizers.AdamW lr {learning_rate} linear decay over {train_steps} "
                    f"steps (no warm-up), weight decay {WEIGHT_DECAY} (not on LayerNorm or "
                    f"biases), clip {CLIP_NORM}, head dropout {classifier.dropout}, no XLA; "
                    "its preprocessor maps the tf.data (keras-hub's own fit), "
                    f"truncation {preprocessor.truncate}"}
  return classifier, dataset, keras.callbacks.Callback, note
