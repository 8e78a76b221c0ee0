"""`tf_model.h5`, transformers' TensorFlow weights (transformers 4.x and older), read with h5py
(a TensorFlow dependency) as the PyTorch-named tensors the rest of the HF reading uses.

The file is Keras' `save_weights` HDF5 layout: the root attribute `layer_names` lists the top
layers (`albert`, `predictions`, `sop_classifier`, `classifier`, `qa_outputs`, a weightless
`dropout_<n>`), each a group whose attribute `weight_names` lists its weights by their full
Keras names, e.g.
`tf_albert_for_sequence_classification/albert/encoder/albert_layer_groups_._0/albert_layers_._0/
attention/query/kernel:0` (an attribute too long for one HDF5 header is split into
`weight_names0`, `weight_names1`, ...). transformers' own TF -> PyTorch renaming gives the
HF (PyTorch) name: drop `:0` and the model's name, `_._` is a `.`, `kernel` -> `weight`
(transposed: TF kernels are [in, out], PyTorch's [out, in]), `gamma` / `embeddings` -> `weight`,
`beta` -> `bias`. The MLM head keeps two vocabulary biases: `predictions/decoder/bias`, the one
TF adds to the logits (and PyTorch's tied `predictions.decoder.bias`, which its `predictions.bias`
is set to), is read as `predictions.bias`; `predictions/bias`, which TF never reads, is dropped.
"""

import os

import h5py
import numpy as np

from albert_tf.common import fileio
from albert_tf.errors import AlbertError

_RENAMED_LEAVES = {"kernel": "weight", "gamma": "weight", "embeddings": "weight", "beta": "bias"}


_MLM_BIAS_READ, _MLM_BIAS_UNREAD = "predictions.decoder.bias", "predictions.bias"


def hf_name(keras_name):
  """(HF PyTorch name, transpose?) of a Keras weight name in tf_model.h5; None for the MLM
  bias TF never reads."""
  name = keras_name[:-2] if keras_name.endswith(":0") else keras_name
  parts = [p for p in name.replace("_._", "/").split("/") if p]
  if len(parts) > 1:
    parts = parts[1:]  # the model's own name (tf_albert_for_...)
  transpose = parts[-1] == "kernel"
  parts[-1] = _RENAMED_LEAVES.get(parts[-1], parts[-1])
  name = ".".join(parts)
  if name == _MLM_BIAS_UNREAD:
    return None, False
  return (_MLM_BIAS_UNREAD if name == _MLM_BIAS_READ else name), transpose


def _names_attribute(group, name, where):
  """A Keras string-list attribute, joined from its chunks when HDF5 split it."""
  if name in group.attrs:
    values = list(group.attrs[name])
  else:
    values, chunk = [], 0
    while f"{name}{chunk}" in group.attrs:
      values.extend(group.attrs[f"{name}{chunk}"])
      chunk += 1
    if not chunk:
      raise AlbertError(f"{where}: not Keras HDF5 weights (no {name} attribute on "
                        f"{group.name})")
  return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values]


def read_tf_h5(path, shapes_only=False):
  """{HF name: np.ndarray} of transformers' tf_model.h5 (Keras kernels transposed to PyTorch's
  layout). shapes_only: values are the shapes in that layout.

  Raises:
    AlbertError: not an HDF5 file, not Keras weights, or two different weights of one name.
  """
  path = os.fspath(path)
  tensors = {}
  try:
    # h5py opens a local name itself; a URL's bytes come through a file object (tf.io.gfile).
    source = path if fileio.is_local(path) else fileio.open_file(path, "rb")
    with h5py.File(source, "r") as f:
      for layer in _names_attribute(f, "layer_names", path):
        group = f[layer]
        for keras_name in _names_attribute(group, "weight_names", path):
          dataset = group[keras_name]
          if not isinstance(dataset, h5py.Dataset):
            raise AlbertError(f"{path}: {layer}/{keras_name} is not a dataset")
          name, transpose = hf_name(keras_name)
          if name is None:
            continue
          if transpose and len(dataset.shape) != 2:
            raise AlbertError(f"{path}: kernel {keras_name} has shape {list(dataset.shape)}, "
                              "expected 2 dimensions")
          if shapes_only:
            value = tuple(dataset.shape[::-1] if transpose else dataset.shape)
          else:
            value = np.asarray(dataset[()])
            value = np.ascontiguousarray(value.T) if transpose else value
          # A layer sharing another's weights (the MLM head's tied embeddings) stores them
          # again under the same name: the copies must agree.
          if name in tensors and not np.array_equal(tensors[name], value):
            raise AlbertError(f"{path}: {keras_name} in layer {layer} differs from the weight "
                              "of that name in an earlier layer")
          tensors[name] = value
  except AlbertError:
    raise
  except (OSError, KeyError, ValueError, TypeError) as e:
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    raise AlbertError(f"{path}: cannot read as Keras HDF5 weights ({first})") from None
  return tensors
