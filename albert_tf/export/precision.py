"""The compute precision of a serving export: a copy of the model with float32 or bfloat16 weights.

Training precision and serving precision are separate choices. A model trained under
mixed_bfloat16 keeps float32 variables and casts each one to bfloat16 at every use; with ALBERT's
shared layers that is L casts of the same weights per request (a quarter of the op time of an
ALBERT-base request at batch 1, profiled). A serving copy instead holds its weights in the compute
dtype, so a request casts no weights:

  fp32  float32 weights and math (the default; the reference numerics, on any device).
  bf16  bfloat16 weights and matmuls; LayerNorm keeps float32 scale/offset and statistics and the
        heads return float32 logits and probabilities. On CPUs with AMX or AVX512-BF16 (oneDNN)
        1.2-1.3x faster than fp32 at batch 1 and 1.8x at batch 32 (ALBERT-base, seq 128); slower
        on CPUs without them (emulated bfloat16).
        Probabilities move by 1e-3 to 1e-2; see the README's serving section.
"""

import tensorflow as tf
import tf_keras

from albert_tf.errors import AlbertError

EXPORT_PRECISIONS = {"fp32": "float32", "bf16": "bfloat16"}


def serving_copy(model, precision="fp32"):
  """Returns `model` itself if it already computes in `precision`, else a copy that does.

  Args:
    model: a built albert_tf model (classifier, multiple choice, SQuAD, ...) with `get_config`.
    precision: "fp32" or "bf16" (the names of --precision and --export_precision).
  Returns:
    a model with the same architecture and weights whose variables are in the compute dtype.
  """
  if precision not in EXPORT_PRECISIONS:
    raise AlbertError(f"--export_precision={precision!r}: expected one of "
                      f"{', '.join(EXPORT_PRECISIONS)}")
  policy_name = EXPORT_PRECISIONS[precision]
  if model.dtype_policy.name == policy_name:
    return model
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy(policy_name)
  try:
    copy = model.__class__.from_config(model.get_config())
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)
  sources, targets = model.weights, copy.weights
  if len(sources) != len(targets):
    raise AlbertError(f"serving copy of {model.name} has {len(targets)} weights, the model "
                      f"{len(sources)}; cannot export at {precision}")
  for source, target in zip(sources, targets):
    if source.shape != target.shape:
      raise AlbertError(f"serving copy of {model.name}: weight {target.name} has shape "
                        f"{target.shape}, the model's {source.name} {source.shape}")
    # LayerNorm weights stay float32 in a bfloat16 copy (see layers.initializers.layer_norm).
    target.assign(tf.cast(source, target.dtype))
  return copy
