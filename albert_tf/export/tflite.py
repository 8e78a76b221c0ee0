"""TFLite files of fine-tuned models, for phones and other devices.

  write_tflite(model, "albert_model.tflite", max_seq_length=128, quantize="none"|"dynamic",
               batch_size=1)

One signature, `serving_default`, token ids in (int32; the app tokenizes), batch `batch_size`:
  classifier / SQuAD / token classifier
                       input_ids, input_mask, segment_ids [batch, max_seq_length]
                       (SQuAD v2.0 also p_mask [batch, max_seq_length], 1 = not in an answer)
  multiple choice      input_ids, input_mask, segment_ids [batch, num_choices, max_seq_length]
batch_size=1 (the default) is the on-device file: every shape fixed. batch_size=None gives a
dynamic batch dimension (shape signature -1) for batched CPU serving: the interpreter resizes
to each call's batch (`get_signature_runner()` does so itself), the same ops at any batch.
And the model's outputs, as its SavedModel gives them:
  classifier / multiple choice   logits, probabilities (float32)
  token classifier               logits, probabilities [batch, max_seq_length, tags] (the
                                 app maps words to first pieces: data/token_alignment.py)
  SQuAD v1.1                     start_logits, end_logits [1, max_seq_length]
  SQuAD v2.0                     start_top_log_probs, start_top_index, end_top_log_probs,
                                 end_top_index, cls_logits (the official beam)
Only TFLite builtin ops are used, so the plain interpreter (`ai_edge_litert`) runs the file.
quantize="dynamic" stores the weights as int8 (dynamic-range quantization: about 4x smaller;
activations stay float). The model is converted at float32 whatever precision trained it.
The FFN kernels are traced as [out, in] copies (layers/kernel_layout.py), FULLY_CONNECTED's own
layout: the converter leaves transposes of 2^26+ values unfolded, which kept ALBERT-xxlarge's
FFN float32 behind a per-call TRANSPOSE (597 MiB and 3.7x our fp32 time; now a quarter of the
weights' size).

Bad inputs (what the LiteRT interpreter does; TFLite has no assert op and the converter drops
tf.debugging asserts, so the SavedModel's in-graph checks cannot come along):
  * an id outside [0, vocab_size) or a segment id outside [0, type_vocab_size): the embedding
    GATHER is bounds-checked ("gather index out of bounds ... (GATHER) failed to invoke").
  * an input_mask or p_mask value other than 0 or 1: the masks are looked up in the table
    [0, 1] first (`only_zero_or_one`), so it is the same GATHER error. Without it the model
    answers: a mask of 2 turns the attention bias (1 - mask) * -10000 into +10000.
  * another shape (with a dynamic batch: another shape but the batch): the signature runner
    resizes the input tensors to what it is given, and preparing the fixed-shape graph then
    fails (RESHAPE "num_input_elements !=
    num_output_elements", ADD "not broadcastable", or "XNNPack delegate failed to reshape"): a
    different batch, seq_len or choice count, or one input differing from the others.
    What runs is an input of the right number of values in another layout with the same
    order ([24] for [1, 24], [4, 1, 24] for [1, 4, 24]): read as the fixed shape, same answer.
All are RuntimeErrors naming the failing node, not the input: an app should check its inputs
before calling (the same shapes and ranges as the SavedModel's signatures check).
"""

import os

import tensorflow as tf

from albert_tf.common import fileio
from albert_tf.errors import AlbertError
from albert_tf.export.precision import serving_copy
from albert_tf.layers import kernel_layout
from albert_tf.models import (AlbertClassifier, AlbertMultipleChoice, AlbertSquadModel,
                              AlbertTokenClassifier)

QUANTIZE_MODES = ("none", "dynamic")
_TOKEN_INPUTS = ("input_ids", "input_mask", "segment_ids")
_MASK_INPUTS = ("input_mask", "p_mask")


def input_names(model):
  """The TFLite input names of a model: token ids, plus p_mask for SQuAD v2.0."""
  if getattr(model, "version_2_with_negative", False):
    return _TOKEN_INPUTS + ("p_mask",)
  return _TOKEN_INPUTS


def input_shape(model, max_seq_length, batch_size=1):
  """[batch_size, num_choices, max_seq_length] for multiple choice, else [batch_size,
  max_seq_length] (batch_size None: a dynamic batch)."""
  if isinstance(model, AlbertMultipleChoice):
    return [batch_size, model.num_choices, max_seq_length]
  return [batch_size, max_seq_length]


def _check_model(model, max_seq_length, batch_size):
  if not isinstance(model, (AlbertClassifier, AlbertMultipleChoice, AlbertSquadModel,
                            AlbertTokenClassifier)):
    raise AlbertError(f"TFLite export takes an AlbertClassifier, AlbertMultipleChoice, "
                      f"AlbertSquadModel or AlbertTokenClassifier, not {type(model).__name__}")
  limit = model.config.max_position_embeddings
  if isinstance(max_seq_length, bool) or not isinstance(max_seq_length, int) or not (
      1 <= max_seq_length <= limit):
    raise AlbertError(f"max_seq_length={max_seq_length!r} is invalid for TFLite export: "
                      f"expected an integer in [1, {limit}] (max_position_embeddings)")
  if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                 or batch_size < 1):
    raise AlbertError(f"batch_size={batch_size!r} is invalid for TFLite export: expected a "
                      f"positive integer, or None for a dynamic batch")


def only_zero_or_one(mask):
  """`mask` looked up in the table [0, 1]: the same values, and for any other value an error.

  The interpreter's GATHER is bounds-checked, so a mask value of 2 (or -1) fails the call
  instead of changing the answer; TFLite has no assert op to say so in words.
  """
  return tf.gather(tf.constant([0, 1], mask.dtype), mask)


def tflite_bytes(model, max_seq_length, quantize="none", batch_size=1):
  """The .tflite flatbuffer of `model` (see the module docstring)."""
  if quantize not in QUANTIZE_MODES:
    raise AlbertError(f"--tflite_quantize={quantize!r} is invalid: expected one of "
                      f"{', '.join(QUANTIZE_MODES)}")
  _check_model(model, max_seq_length, batch_size)
  model = serving_copy(model, "fp32")
  names = input_names(model)
  shape = input_shape(model, max_seq_length, batch_size)
  specs = [tf.TensorSpec(shape, tf.int32, name=n) for n in names]

  def run(*tensors):
    inputs = {name: only_zero_or_one(value) if name in _MASK_INPUTS else value
              for name, value in zip(names, tensors)}
    outputs = model(inputs, training=False)
    return {k: tf.identity(v, name=k) for k, v in outputs.items()}

  # tf.function needs named parameters to name the signature's inputs.
  if len(names) == 4:
    serve = tf.function(lambda input_ids, input_mask, segment_ids, p_mask: run(
        input_ids, input_mask, segment_ids, p_mask), input_signature=specs)
  else:
    serve = tf.function(lambda input_ids, input_mask, segment_ids: run(
        input_ids, input_mask, segment_ids), input_signature=specs)
  # The FFN kernels as [out, in] copies: FULLY_CONNECTED's layout, so the converter has no
  # transpose to fold (it leaves those of 2^26+ values, xxlarge's FFN, float32; kernel_layout).
  with kernel_layout.transposed_kernels() as copies:
    concrete = serve.get_concrete_function()
  module = tf.Module()
  module.model_variables = list(model.variables) + copies.variables
  converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], module)
  converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
  if quantize == "dynamic":
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
  return converter.convert()


def write_tflite(model, path, max_seq_length, quantize="none", batch_size=1):
  """Writes `model` as a TFLite file at `path`, atomically (a temp file renamed into place).

  Args:
    model: AlbertClassifier, AlbertMultipleChoice, AlbertSquadModel or AlbertTokenClassifier
      (fine-tuned weights).
    path: the .tflite file to write (e.g. <export_dir>/albert_model.tflite); its directory is
      created if needed.
    max_seq_length: the fixed sequence length of the inputs.
    quantize: "none" (float32) or "dynamic" (int8 weights, float activations).
    batch_size: the fixed batch of the inputs, or None for a dynamic batch dimension.
  Returns:
    path.
  Raises:
    AlbertError: another model type, a bad max_seq_length, quantize or batch_size value.
  """
  data = tflite_bytes(model, max_seq_length, quantize, batch_size)
  return fileio.write_bytes(os.fspath(path), data)
