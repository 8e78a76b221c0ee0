"""A TF-Hub module's `tokenization_info` (its SentencePiece asset and do_lower_case), read from
the module directory's files without loading the module.

The official `FullTokenizer.from_hub_module` runs the module's `tokenization_info` signature;
here the same two outputs are read from what the directory holds:

* the official TF1 hub format (`export_to_tfhub.py`, `tfhub_module.pb` beside `saved_model.pb`):
  the signature's `vocab_file` output is an asset (the SentencePiece model under `assets/`) and
  its `do_lower_case` output a boolean constant, both found in the graph of `saved_model.pb`;
* our `export_savedmodel.py` output (albert_tf.export.hub_encoder): the asset
  `assets/30k-clean.model` and the do_lower_case its `assets.extra/albert_export.json` records
  (only an export without that record is loaded, to run the signature).

Parsing `saved_model.pb` needs TensorFlow's protos (and `tf.io.gfile` reads gs:// paths), so this
module imports TensorFlow: `FullTokenizer.from_hub_module` imports it when called, and
albert_tf/checkpoints/hub_module.py, which reads the rest of a module, builds on it.
"""

import json
import os
import posixpath

import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow.core.protobuf import saved_model_pb2

from albert_tf.common import fileio
from albert_tf.common.export_format import EXPORT_INFO, SPM_ASSET_NAME
from albert_tf.errors import AlbertError

MODULE_DEF_FILE = "tfhub_module.pb"  # present in the official TF1 hub format only
_ASSETS_KEY = "saved_model_assets"  # tf.compat.v1.saved_model.ASSETS_KEY


def is_remote_handle(handle):
  """True for a handle that needs the network: an http(s) URL or a tfhub.dev handle (gs://, and
  any other filesystem tf.io.gfile reads, e.g. ram://, is read as a directory)."""
  handle = os.fspath(handle)
  if "://" in handle:
    return handle.lower().startswith(("http://", "https://"))
  return handle.startswith(("tfhub.dev/", "www.tfhub.dev/"))


def read_module_directory(handle):
  """(directory, its SavedModel proto) of a local TF-Hub module or SavedModel directory.

  Raises:
    AlbertError (one line, naming the path): a URL, not a directory, no saved_model.pb or an
      unreadable one.
  """
  path = os.fspath(handle)
  if is_remote_handle(path):
    raise AlbertError(f"{path}: TF-Hub module URLs are not fetched (no network at run time); "
                      f"download the module, extract it and pass its local directory")
  path = path.rstrip("/") or path
  if not fileio.isdir(path):
    if fileio.exists(path):
      raise AlbertError(f"{path}: not a directory (expected an extracted TF-Hub module "
                        f"directory with saved_model.pb; extract a .tar.gz first)")
    raise AlbertError(f"{path}: no such directory (expected a TF-Hub module directory)")
  saved_model_file = posixpath.join(path, "saved_model.pb")
  if not fileio.exists(saved_model_file):
    raise AlbertError(f"{path}: no saved_model.pb (expected a TF-Hub module / SavedModel "
                      f"directory)")
  return path, _read_saved_model(saved_model_file)


def is_tf1_hub_module(path):
  """True for the official TF1 hub format (its tfhub_module.pb)."""
  return fileio.exists(posixpath.join(path, MODULE_DEF_FILE))


def read_tokenization_info(handle):
  """(SentencePiece model file, do_lower_case) of a module directory, either format."""
  path, saved_model = read_module_directory(handle)
  if is_tf1_hub_module(path):
    return tf1_tokenization_info(path, saved_model)
  return albert_tf_tokenization_info(path)


def tf1_tokenization_info(path, saved_model):
  """(spm asset path, do_lower_case) behind the `tokenization_info` signature's outputs."""
  meta_graph = _meta_graph_for_inference(path, saved_model)
  signature = meta_graph.signature_def.get("tokenization_info")
  if signature is None or "vocab_file" not in signature.outputs or (
      "do_lower_case" not in signature.outputs):
    raise AlbertError(f"{path}: no tokenization_info signature with vocab_file and "
                      f"do_lower_case outputs (expected the official export_to_tfhub.py module)")
  nodes = {node.name: node for node in meta_graph.graph_def.node}
  # Assets: AssetFileDef {filename, tensor_info.name} in the saved_model_assets collection.
  asset_files = {}
  if _ASSETS_KEY in meta_graph.collection_def:
    for packed in meta_graph.collection_def[_ASSETS_KEY].any_list.value:
      asset = meta_graph_pb2.AssetFileDef()
      packed.Unpack(asset)
      asset_files[_node_name(asset.tensor_info.name)] = asset.filename
  vocab_node = _const_node(nodes, signature.outputs["vocab_file"].name)
  filename = asset_files.get(vocab_node.name) if vocab_node is not None else None
  if filename is None:
    raise AlbertError(f"{path}: the tokenization_info vocab_file is not a module asset "
                      f"(expected the SentencePiece model, 30k-clean.model, in assets/)")
  spm_model_file = posixpath.join(path, "assets", filename)
  if not fileio.exists(spm_model_file):
    raise AlbertError(f"{path}: no SentencePiece asset assets/{filename} (the module's "
                      f"tokenization_info names it)")
  lower_node = _const_node(nodes, signature.outputs["do_lower_case"].name)
  if lower_node is None or not lower_node.attr["value"].tensor.bool_val:
    raise AlbertError(f"{path}: the tokenization_info do_lower_case output is not a boolean "
                      f"constant")
  return spm_model_file, bool(lower_node.attr["value"].tensor.bool_val[0])


def albert_tf_tokenization_info(path):
  """(spm asset path, do_lower_case) of our export: the asset, and what the export recorded."""
  spm_model_file = posixpath.join(path, "assets", SPM_ASSET_NAME)
  if not fileio.exists(spm_model_file):
    raise AlbertError(f"{path}: no SentencePiece asset assets/{SPM_ASSET_NAME} "
                      f"(exported without --spm_model_file?)")
  info = export_info(path)
  if isinstance(info.get("do_lower_case"), bool):
    return spm_model_file, info["do_lower_case"]
  try:  # The recorded identity is missing: ask the signature itself.
    loaded = tf.saved_model.load(path)
    outputs = loaded.signatures["tokenization_info"]()
    return spm_model_file, bool(outputs["do_lower_case"].numpy())
  except (KeyError, ValueError, tf.errors.OpError) as e:
    raise AlbertError(f"{path}: cannot read do_lower_case (no {EXPORT_INFO} and no usable "
                      f"tokenization_info signature: {str(e).splitlines()[0]})") from None


def export_info(path):
  """Our export's assets.extra/albert_export.json as a dict ({} when absent or unreadable)."""
  info_file = posixpath.join(path, EXPORT_INFO)
  if not fileio.exists(info_file):
    return {}
  try:
    info = json.loads(fileio.read_text(info_file))
  except (json.JSONDecodeError, OSError, tf.errors.OpError):
    return {}
  return info if isinstance(info, dict) else {}


def _read_saved_model(saved_model_file):
  proto = saved_model_pb2.SavedModel()
  try:
    proto.ParseFromString(fileio.read_bytes(saved_model_file))
  except Exception as e:  # pylint: disable=broad-except  (DecodeError and I/O errors)
    raise AlbertError(f"{saved_model_file}: not a readable SavedModel proto ({e})") from None
  if not proto.meta_graphs:
    raise AlbertError(f"{saved_model_file}: the SavedModel holds no graph")
  return proto


def _meta_graph_for_inference(path, saved_model):
  """The module's graph for the empty tag set (what hub.Module uses by default)."""
  for meta_graph in saved_model.meta_graphs:
    if not meta_graph.meta_info_def.tags:
      return meta_graph
  for meta_graph in saved_model.meta_graphs:
    if "tokenization_info" in meta_graph.signature_def:
      return meta_graph
  raise AlbertError(f"{path}: saved_model.pb has no graph with a tokenization_info signature "
                    f"(expected the official export_to_tfhub.py module)")


def _node_name(tensor_name):
  return tensor_name.split(":")[0].lstrip("^")


def _const_node(nodes, tensor_name, max_hops=8):
  """The Const node behind a tensor, following Identity-like ops; None if there is none."""
  node = nodes.get(_node_name(tensor_name))
  for _ in range(max_hops):
    if node is None or node.op == "Const":
      return node
    if node.op not in ("Identity", "IdentityN", "StopGradient", "Snapshot") or not node.input:
      return None
    node = nodes.get(_node_name(node.input[0]))
  return None
