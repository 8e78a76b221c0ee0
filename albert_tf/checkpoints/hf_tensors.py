"""The tensors of an HF ALBERT directory: `model.safetensors` (or its shards) read and written
as NumPy arrays, no PyTorch; HF names (`albert.`, `predictions.`, ...) as in
`official_names`."""

import json
import os

import numpy as np
import safetensors
from safetensors import numpy as st_numpy

from albert_tf import fileio
from albert_tf.errors import AlbertError

WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
OTHER_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5")

BASE_PREFIX = "albert."

# HF tensors that are tied copies of others (not stored by save_pretrained, but some files have
# them): HF name -> the HF name it must equal.
TIED = {
    "predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
    "predictions.decoder.bias": "predictions.bias",
}

# Buffers older transformers versions stored beside the weights; not model weights.
BUFFER_SUFFIXES = (".position_ids", ".token_type_ids")


def has_weights_file(path):
  """True when the directory holds any HF weights file (safetensors, its index, or the
  PyTorch / Keras files this package does not read)."""
  return any(os.path.exists(os.path.join(path, name))
             for name in (WEIGHTS_NAME, WEIGHTS_INDEX_NAME) + OTHER_WEIGHTS)


def _load_safetensors_file(weights_file, shapes_only=False):
  try:
    if shapes_only:
      with safetensors.safe_open(weights_file, framework="np") as f:
        return {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}
    return st_numpy.load_file(weights_file)
  except Exception as e:  # pylint: disable=broad-except  (safetensors raises several types)
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    raise AlbertError(f"{weights_file}: cannot read as safetensors ({first})") from None


def read_hf_tensors(path, shapes_only=False):
  """{HF name: np.ndarray} of `<path>/model.safetensors` (or its shards), `albert.` prefixed.

  A bare `AlbertModel` directory stores its names without the `albert.` prefix; they are given
  it here, so every name is as in an `AlbertForPreTraining`. shapes_only: values are the tensors'
  shapes (the tensors are not read).
  """
  path = os.fspath(path)
  weights_file = os.path.join(path, WEIGHTS_NAME)
  index_file = os.path.join(path, WEIGHTS_INDEX_NAME)
  if os.path.isfile(weights_file):
    tensors = _load_safetensors_file(weights_file, shapes_only)
  elif os.path.isfile(index_file):
    try:
      with open(index_file, "r", encoding="utf-8") as f:
        weight_map = json.load(f)["weight_map"]
      shards = sorted(set(weight_map.values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
      raise AlbertError(f"{index_file}: not a safetensors index with a weight_map "
                        f"({type(e).__name__})") from None
    tensors = {}
    for shard in shards:
      tensors.update(_load_safetensors_file(os.path.join(path, shard), shapes_only))
  else:
    others = [n for n in OTHER_WEIGHTS if os.path.exists(os.path.join(path, n))]
    found = f" (found {', '.join(others)}: re-save it with safe_serialization)" if others else ""
    raise AlbertError(f"{path}: HF directory has no {WEIGHTS_NAME}{found}")
  if tensors and not any(name.startswith(BASE_PREFIX) for name in tensors):
    tensors = {BASE_PREFIX + name: value for name, value in tensors.items()}
  return tensors


def write_hf_tensors(tensors, directory):
  """Writes {HF name: float32 array} as `<directory>/model.safetensors`, atomically."""
  with fileio.atomic_path(os.path.join(directory, WEIGHTS_NAME)) as temp:
    # metadata format "pt": transformers refuses safetensors files without a known format.
    st_numpy.save_file(tensors, temp, metadata={"format": "pt"})


def as_float32(name, value, where):
  """The tensor as float32; refuses integer tensors, naming `where` and the tensor."""
  # bfloat16 files read through ml_dtypes (which TensorFlow registers with NumPy).
  if not (np.issubdtype(value.dtype, np.floating) or value.dtype.name == "bfloat16"):
    raise AlbertError(f"{where}: tensor {name} has dtype {value.dtype}, expected a float type")
  return value.astype(np.float32)
