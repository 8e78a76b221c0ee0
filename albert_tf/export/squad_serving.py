"""The SQuAD SavedModel: the official run_squad_v1 serving signature and export layout."""

import os

import tensorflow as tf

from albert_tf.common import fileio
from albert_tf.export import input_checks
from albert_tf.export import precision as precision_lib
from albert_tf.export import saved_model_writer
from albert_tf.export import serving


class SquadServing(tf.Module):
  """The SavedModel of a SQuAD model: the official run_squad_v1 serving signature.

  serving_default: input_ids, input_mask, segment_ids (v2.0 also p_mask) int32
  [batch, max_seq_length] -> the model's outputs (v1.1 start_logits / end_logits; v2.0 the beam
  outputs and cls_logits). Pre- and post-processing (windows, n-best) stay outside the graph.
  The inputs are checked first (`albert_tf.export.input_checks`): all [batch, max_seq_length],
  ids in the vocabulary, segment ids below type_vocab_size, input_mask and p_mask 0 or 1;
  anything else is an InvalidArgumentError naming the input.
  """

  def __init__(self, model, max_seq_length):
    super().__init__()
    # Track the weights only; the Keras model is reached through the closure (see
    # albert_tf.export.serving for why).
    self.model_variables = list(model.variables)
    names = ["input_ids", "input_mask", "segment_ids"]
    if model.version_2_with_negative:
      names.append("p_mask")
    self.input_names = tuple(names)
    specs = [tf.TensorSpec([None, max_seq_length], tf.int32, name=n) for n in names]

    def serve(*tensors):
      features = input_checks.check_token_inputs(dict(zip(names, tensors)), model.config,
                                                 seq_length=max_seq_length)
      return serving.run_for_serving(model, features)

    self.serve = tf.function(serve, autograph=False, input_signature=specs)


# The official run_squad_v1 export: `<export_dir>/saved_model/<version>/` (+ the TFLite file
# `<export_dir>/albert_model.tflite`).
SAVED_MODEL_SUBDIR = "saved_model"


def export_squad_model(model, export_dir, max_seq_length, spm_model_file=None, precision="fp32"):
  """Writes `model` (weights loaded) as a new version `<export_dir>/saved_model/<version>/`.

  precision: "fp32", "bf16" or "auto" (the faster on this machine, timed at batch 1; see
    albert_tf/export/precision.py).
  Returns the version directory written.
  """
  def probe(module):
    features = precision_lib.probe_features(model.config, [1, max_seq_length],
                                            module.input_names)
    return lambda: module.serve(*features.values())  # positional, in input_names order

  module, measured = precision_lib.choose_serving(
      model, precision, lambda copy: SquadServing(copy, max_seq_length), probe,
      f"serving_default, batch 1 x {max_seq_length} tokens")
  identity = {"kind": "albert_squad", "albert_config": model.config.to_dict(),
              "version_2_with_negative": model.version_2_with_negative,
              "max_seq_length": max_seq_length,
              "spm_model_sha1": fileio.file_sha1(spm_model_file),
              "precision": precision}

  def write(tmp_dir):
    tf.saved_model.save(module, tmp_dir,
                        signatures={"serving_default": module.serve.get_concrete_function()})

  return saved_model_writer.write_new_version(os.path.join(export_dir, SAVED_MODEL_SUBDIR),
                                              identity, write, measured)
