"""The tensors of an HF ALBERT directory read as NumPy arrays, no PyTorch; HF names (`albert.`,
`predictions.`, ...) as in `official_names`. Read, first found wins: `model.safetensors` (or
its shards), `pytorch_model.bin` (or its shards; `torch_bin`, never running the pickle),
`tf_model.h5` (`tf_h5`). Written: `model.safetensors`. `is_hf_directory`: an HF directory, told
by its files."""

import json
import os

import numpy as np
import safetensors
from safetensors import numpy as st_numpy

from albert_tf.common import fileio
from albert_tf.checkpoints.hf import tf_h5, torch_bin
from albert_tf.checkpoints.hf.config import CONFIG_NAME
from albert_tf.errors import AlbertError

WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
TORCH_WEIGHTS_NAME = "pytorch_model.bin"
TORCH_WEIGHTS_INDEX_NAME = "pytorch_model.bin.index.json"
TF_WEIGHTS_NAME = "tf_model.h5"

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
  """True when the directory holds any HF weights file (WEIGHT_FILES)."""
  return weights_file(path) is not None


def is_hf_directory(path):
  """True when `path` is a directory holding an HF `config.json` (and no TF checkpoint state).

  A directory with `config.json` counts even without weights, so that loading it reports the
  missing weights file rather than "no checkpoint".
  """
  path = os.fspath(path)
  if not fileio.isdir(path) or not fileio.isfile(os.path.join(path, CONFIG_NAME)):
    return False
  if has_weights_file(path):
    return True
  return not fileio.exists(os.path.join(path, "checkpoint"))


def _load_safetensors_file(file, shapes_only=False):
  try:
    if not fileio.is_local(file):  # safetensors opens only local names: a URL's bytes
      tensors = st_numpy.load(fileio.read_bytes(file))
      return {name: value.shape for name, value in tensors.items()} if shapes_only else tensors
    if shapes_only:
      with safetensors.safe_open(file, framework="np") as f:
        return {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}
    return st_numpy.load_file(file)
  except Exception as e:  # pylint: disable=broad-except  (safetensors raises several types)
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    raise AlbertError(f"{file}: cannot read as safetensors ({first})") from None


def read_hf_tensors(path, shapes_only=False):
  """{HF name: np.ndarray} of the directory's weights (`weights_file`), `albert.` prefixed.

  A bare `AlbertModel` directory stores its names without the `albert.` prefix; they are given
  it here, so every name is as in an `AlbertForPreTraining`. shapes_only: values are the tensors'
  shapes (the tensors are not read). Every format gives PyTorch's layout ([out, in] weights).
  """
  path = os.fspath(path)
  found = weights_file(path)
  if found is None:
    raise AlbertError(f"{path}: HF directory has no weights file (one of "
                      f"{', '.join(WEIGHT_FILES)})")
  reader = WEIGHT_FILES[os.path.basename(found)]
  if reader is None:  # an index: the shards it names, each read by the index's format
    reader = WEIGHT_FILES[os.path.basename(found)[:-len(INDEX_SUFFIX)]]
    tensors = {}
    for shard in _index_shards(found):
      tensors.update(reader(os.path.join(path, shard), shapes_only))
  else:
    tensors = reader(found, shapes_only)
  if tensors and not any(name.startswith(BASE_PREFIX) for name in tensors):
    tensors = {BASE_PREFIX + name: value for name, value in tensors.items()}
  return tensors


def _index_shards(index_file):
  """The shard files an HF `*.index.json` names, each once, sorted."""
  try:
    weight_map = json.loads(fileio.read_text(index_file))["weight_map"]
    shards = sorted(set(weight_map.values()))
  except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
    raise AlbertError(f"{index_file}: not an HF weights index with a weight_map "
                      f"({type(e).__name__})") from None
  for shard in shards:
    if not isinstance(shard, str) or os.path.basename(shard) != shard:
      raise AlbertError(f"{index_file}: shard {str(shard)[:60]!r} is not a file name beside it")
  return shards


INDEX_SUFFIX = ".index.json"
# The weight files an HF directory may hold, in the order read (first found wins, as in
# transformers' from_pretrained: safetensors before PyTorch's pickle; tf_model.h5, which
# transformers reads only with from_tf=True, last) -> the reader of one file (None: an index).
WEIGHT_FILES = {
    WEIGHTS_NAME: _load_safetensors_file, WEIGHTS_INDEX_NAME: None,
    TORCH_WEIGHTS_NAME: torch_bin.read_torch_file, TORCH_WEIGHTS_INDEX_NAME: None,
    TF_WEIGHTS_NAME: tf_h5.read_tf_h5,
}


def weights_file(path):
  """The weights file (or index) of the HF directory at `path` that is read, or None."""
  for name in WEIGHT_FILES:
    candidate = os.path.join(os.fspath(path), name)
    if fileio.isfile(candidate):
      return candidate
  return None


def write_hf_tensors(tensors, directory):
  """Writes {HF name: float32 array} as `<directory>/model.safetensors`, atomically."""
  # metadata format "pt": transformers refuses safetensors files without a known format.
  # (safetensors writes only local names: the bytes go through fileio, for a URL too.)
  fileio.write_bytes(os.path.join(directory, WEIGHTS_NAME),
                     st_numpy.save(tensors, metadata={"format": "pt"}))


def as_float32(name, value, where):
  """The tensor as float32; refuses integer tensors, naming `where` and the tensor."""
  # bfloat16 files read through ml_dtypes (which TensorFlow registers with NumPy).
  if not (np.issubdtype(value.dtype, np.floating) or value.dtype.name == "bfloat16"):
    raise AlbertError(f"{where}: tensor {name} has dtype {value.dtype}, expected a float type")
  return value.astype(np.float32)
