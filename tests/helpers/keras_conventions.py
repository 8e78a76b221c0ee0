"""What every Keras layer and model of the package must do, checked one way for all of them
(as keras-hub's `run_layer_test` / `run_model_saving_test`):

  * `get_config` / `from_config` round trip: the clone has the same config and, given the same
    weights, computes the same outputs;
  * mixed precision (`mixed_bfloat16` and `mixed_float16`): variables stay float32, the floating
    outputs are float32 where the package promises it (logits, probabilities);
  * SavedModel: a `tf.saved_model.save` / `load` round trip computes the same outputs.
"""

import contextlib

import numpy as np
import tensorflow as tf
import tf_keras


@contextlib.contextmanager
def global_policy(name):
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy(name)
  try:
    yield
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)


def _float_outputs(outputs):
  """{path: numpy array} of every floating tensor in a (nested) output structure."""
  if isinstance(outputs, dict):
    found = {}
    for key, value in outputs.items():
      found.update({f"{key}/{path}".rstrip("/"): array
                    for path, array in _float_outputs(value).items()})
    return found
  if isinstance(outputs, (list, tuple)):
    found = {}
    for index, value in enumerate(outputs):
      found.update({f"{index}/{path}".rstrip("/"): array
                    for path, array in _float_outputs(value).items()})
    return found
  if tf.is_tensor(outputs) and outputs.dtype.is_floating:
    return {"": np.asarray(outputs)}
  return {}


def _assert_same_outputs(got, want, atol=1e-5):
  got, want = _float_outputs(got), _float_outputs(want)
  assert got.keys() == want.keys(), (sorted(got), sorted(want))
  for path, value in want.items():
    np.testing.assert_allclose(got[path], value, rtol=1e-5, atol=atol, err_msg=path)


def check_config_round_trip(make, inputs):
  """`make()` builds the layer/model; its from_config clone computes the same outputs."""
  original = make()
  outputs = original(inputs, training=False)
  clone = type(original).from_config(original.get_config())
  clone(inputs, training=False)  # builds the clone's variables
  assert clone.get_config() == original.get_config()
  clone.set_weights(original.get_weights())
  _assert_same_outputs(clone(inputs, training=False), outputs)
  return original


def check_mixed_precision(make, inputs, float32_outputs=()):
  """Under each mixed policy: variables float32, the named outputs float32."""
  for policy in ("mixed_bfloat16", "mixed_float16"):
    with global_policy(policy):
      layer = make()
      outputs = layer(inputs, training=False)
    assert layer.variables, type(layer).__name__
    assert all(v.dtype == tf.float32 for v in layer.variables), policy
    for name in float32_outputs:
      assert outputs[name].dtype == tf.float32, (policy, name, outputs[name].dtype)


def check_saved_model(make, inputs, directory):
  """A SavedModel of the layer/model (traced for `inputs`' shapes) computes the same outputs."""
  layer = make()
  want = layer(inputs, training=False)
  specs = tf.nest.map_structure(lambda t: tf.TensorSpec([None] + t.shape[1:], t.dtype), inputs)
  module = tf.Module()
  module.layer = layer
  module.serve = tf.function(lambda x: layer(x, training=False), input_signature=[specs])
  tf.saved_model.save(module, str(directory))
  loaded = tf.saved_model.load(str(directory))
  _assert_same_outputs(loaded.serve(inputs), want)
