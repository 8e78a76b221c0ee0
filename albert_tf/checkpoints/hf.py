"""Hugging Face transformers ALBERT directories (`config.json` + `model.safetensors`), both ways.

Reading needs no PyTorch: tensors come from `model.safetensors` through `safetensors.numpy`.
A Hugging Face `AlbertForPreTraining` stores PyTorch tensors: `albert.` (the encoder and pooler),
`predictions.` (masked-LM head) and `sop_classifier.` (sentence-order head); each one's name
beside its official TF1 name is in `official_names`. Values are assigned with the same semantics
as `tf1.load_tf1_checkpoint`: every shape is checked before anything is assigned, and the report
lists what was loaded, what the model has that the directory lacks, and what the directory has
that the model does not use.
"""

import json
import math
import os

import numpy as np
from absl import logging

from albert_tf import fileio
from albert_tf.checkpoints import official_names
from albert_tf.checkpoints.tf1 import LoadReport
from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
_OTHER_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5")
LAYER_NORM_EPSILON = 1e-12

# transformers.AlbertConfig defaults, used for keys a config.json leaves out (as HF does).
_HF_DEFAULTS = dict(
    vocab_size=30000, embedding_size=128, hidden_size=4096, num_hidden_layers=12,
    num_hidden_groups=1, num_attention_heads=64, intermediate_size=16384, inner_group_num=1,
    hidden_act="gelu_new", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    max_position_embeddings=512, type_vocab_size=2, initializer_range=0.02)

# HF activation name -> official name. HF "gelu" is the exact (erf) GELU, which official ALBERT
# never used; its "gelu_new" / "gelu_pytorch_tanh" are the official tanh form.
_ACT_FROM_HF = {"gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "relu": "relu",
                "tanh": "tanh", "linear": "linear"}
_ACT_TO_HF = {"gelu": "gelu_new", "gelu_new": "gelu_new", "relu": "relu", "tanh": "tanh",
              "linear": "linear"}

BASE_PREFIX = "albert."

# HF tensors that are tied copies of others (not stored by save_pretrained, but some files have
# them): HF name -> the HF name it must equal.
TIED = {
    "predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
    "predictions.decoder.bias": "predictions.bias",
}

# Buffers older transformers versions stored beside the weights; not model weights.
BUFFER_SUFFIXES = (".position_ids", ".token_type_ids")

# Fields that decide the computation and that config.json and the model must agree on.
_ARCHITECTURE_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                        "num_hidden_groups", "num_attention_heads", "intermediate_size",
                        "inner_group_num", "max_position_embeddings", "type_vocab_size",
                        "hidden_act")


def hf_group_index(layer, num_layers, num_groups):
  """The group HF's AlbertTransformer gives layer `layer`: int(l / (L / G))."""
  return int(layer / (num_layers / num_groups))


def check_group_rule(config, where):
  """Refuses a config whose layers HF would map to other groups than the official code does.

  HF computes int(l / (L / G)), the official code int(l / L * G), both in floating point; they
  differ for some (L, G), e.g. L = G = 22 (layer 15). Such a model cannot move between the two
  and keep its outputs.

  Raises:
    AlbertError: naming `where` and the layers that differ.
  """
  num_layers, num_groups = config.num_hidden_layers, config.num_hidden_groups
  differ = [l for l in range(num_layers)
            if hf_group_index(l, num_layers, num_groups) != config.group_index(l)]
  if differ:
    detail = ", ".join(f"layer {l}: official group {config.group_index(l)}, HF group "
                       f"{hf_group_index(l, num_layers, num_groups)}" for l in differ)
    raise AlbertError(f"{where}: num_hidden_layers={num_layers} with num_hidden_groups="
                      f"{num_groups} maps layers to different groups in HF transformers than in "
                      f"the official model ({detail})")


def check_sharing(config, where):
  """HF ALBERT has only the official sharing (`sharing: all`); refuses the ablations."""
  if config.sharing != "all":
    raise AlbertError(f"{where}: sharing={config.sharing!r} has no HF transformers ALBERT "
                      "layout (HF shares whole groups only: expected sharing 'all')")


def is_hf_directory(path):
  """True when `path` is a directory holding an HF `config.json` (and no TF checkpoint state).

  A directory with `config.json` counts even without weights, so that loading it reports the
  missing `model.safetensors` rather than "no checkpoint".
  """
  path = os.fspath(path)
  if not os.path.isdir(path) or not os.path.isfile(os.path.join(path, CONFIG_NAME)):
    return False
  if any(os.path.exists(os.path.join(path, name))
         for name in (WEIGHTS_NAME, WEIGHTS_INDEX_NAME) + _OTHER_WEIGHTS):
    return True
  return not os.path.exists(os.path.join(path, "checkpoint"))


def read_hf_config_json(path):
  """The dict of `<path>/config.json`, checked to be an ALBERT config."""
  config_file = os.path.join(os.fspath(path), CONFIG_NAME)
  try:
    with open(config_file, "r", encoding="utf-8") as f:
      obj = json.load(f)
  except OSError as e:
    raise AlbertError(f"{config_file}: cannot read HF config ({e.strerror})") from None
  except json.JSONDecodeError as e:
    raise AlbertError(f"{config_file}: not JSON (line {e.lineno}, column {e.colno}: "
                      f"{e.msg})") from None
  if not isinstance(obj, dict):
    raise AlbertError(f"{config_file}: expected a JSON object, got {type(obj).__name__}")
  if obj.get("model_type") != "albert":
    raise AlbertError(f"{config_file}: model_type={obj.get('model_type')!r} is not an HF "
                      "ALBERT config (expected model_type 'albert')")
  return obj


def config_from_hf(path):
  """The AlbertConfig of an HF ALBERT directory (or of its `config.json`).

  Raises:
    AlbertError: not an ALBERT config, or one the official model cannot compute (erf GELU,
      LayerNorm epsilon other than 1e-12, relative positions, untied MLM decoder).
  """
  path = os.fspath(path)
  if os.path.basename(path) == CONFIG_NAME and os.path.isfile(path):
    path = os.path.dirname(path) or "."
  obj = read_hf_config_json(path)
  config_file = os.path.join(path, CONFIG_NAME)
  act = obj.get("hidden_act", _HF_DEFAULTS["hidden_act"])
  if act not in _ACT_FROM_HF:
    hint = (" (HF 'gelu' is the erf form; ALBERT uses the tanh form, HF 'gelu_new')"
            if act == "gelu" else "")
    raise AlbertError(f"{config_file}: hidden_act={act!r} is not supported: expected one of "
                      f"{', '.join(_ACT_FROM_HF)}{hint}")
  eps = obj.get("layer_norm_eps", LAYER_NORM_EPSILON)
  if (isinstance(eps, bool) or not isinstance(eps, (int, float))
      or not math.isclose(eps, LAYER_NORM_EPSILON, rel_tol=1e-6, abs_tol=0.0)):
    raise AlbertError(f"{config_file}: layer_norm_eps={eps!r} is not supported: the official "
                      f"model uses {LAYER_NORM_EPSILON}")
  position_type = obj.get("position_embedding_type", "absolute")
  if position_type != "absolute":
    raise AlbertError(f"{config_file}: position_embedding_type={position_type!r} is not "
                      "supported: expected 'absolute'")
  if obj.get("tie_word_embeddings", True) is not True:
    raise AlbertError(f"{config_file}: tie_word_embeddings={obj['tie_word_embeddings']!r} is "
                      "not supported: the ALBERT MLM decoder is the word-embedding table")
  fields = {name: obj.get(name, default) for name, default in _HF_DEFAULTS.items()}
  fields["hidden_act"] = _ACT_FROM_HF[act]
  return AlbertConfig(source=config_file, **fields)


def hf_config_dict(config, architectures):
  """The HF `config.json` dict of an AlbertConfig."""
  hidden_act = _ACT_TO_HF.get(str(config.hidden_act).lower())
  out = {
      "architectures": list(architectures),
      "model_type": "albert",
      "vocab_size": config.vocab_size,
      "embedding_size": config.embedding_size,
      "hidden_size": config.hidden_size,
      "num_hidden_layers": config.num_hidden_layers,
      "num_hidden_groups": config.num_hidden_groups,
      "num_attention_heads": config.num_attention_heads,
      "intermediate_size": config.intermediate_size,
      "inner_group_num": config.inner_group_num,
      "hidden_act": hidden_act,
      "hidden_dropout_prob": config.hidden_dropout_prob,
      "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
      "max_position_embeddings": config.max_position_embeddings,
      "type_vocab_size": config.type_vocab_size,
      "initializer_range": config.initializer_range,
      "layer_norm_eps": LAYER_NORM_EPSILON,
      "classifier_dropout_prob": 0.1,
      "position_embedding_type": "absolute",
      "pad_token_id": 0,   # <pad>, [CLS], [SEP] of the official SentencePiece models
      "bos_token_id": 2,
      "eos_token_id": 3,
      "tie_word_embeddings": True,
  }
  return out


def _canonical_act(act):
  return "gelu" if str(act).lower() in ("gelu", "gelu_new") else str(act).lower()


def _check_same_architecture(hf_config, model_config, config_file):
  for field in _ARCHITECTURE_FIELDS:
    theirs, ours = getattr(hf_config, field), getattr(model_config, field)
    if field == "hidden_act":
      theirs, ours = _canonical_act(theirs), _canonical_act(ours)
    if theirs != ours:
      raise AlbertError(f"{config_file}: {field}={theirs!r} but the model was built with "
                        f"{field}={ours!r} (wrong albert_config?)")


def _load_safetensors_file(weights_file, names_only=False):
  import safetensors  # pylint: disable=g-import-not-at-top
  from safetensors import numpy as st_numpy  # pylint: disable=g-import-not-at-top
  try:
    if names_only:
      with safetensors.safe_open(weights_file, framework="np") as f:
        return dict.fromkeys(f.keys())
    return st_numpy.load_file(weights_file)
  except Exception as e:  # pylint: disable=broad-except  (safetensors raises several types)
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    raise AlbertError(f"{weights_file}: cannot read as safetensors ({first})") from None


def read_hf_tensors(path, names_only=False):
  """{HF name: np.ndarray} of `<path>/model.safetensors` (or its shards), `albert.` prefixed.

  A bare `AlbertModel` directory stores its names without the `albert.` prefix; they are given
  it here, so every name is as in an `AlbertForPreTraining`. names_only: values are None (the
  tensors are not read).
  """
  path = os.fspath(path)
  weights_file = os.path.join(path, WEIGHTS_NAME)
  index_file = os.path.join(path, WEIGHTS_INDEX_NAME)
  if os.path.isfile(weights_file):
    tensors = _load_safetensors_file(weights_file, names_only)
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
      tensors.update(_load_safetensors_file(os.path.join(path, shard), names_only))
  else:
    others = [n for n in _OTHER_WEIGHTS if os.path.exists(os.path.join(path, n))]
    found = f" (found {', '.join(others)}: re-save it with safe_serialization)" if others else ""
    raise AlbertError(f"{path}: HF directory has no {WEIGHTS_NAME}{found}")
  if tensors and not any(name.startswith(BASE_PREFIX) for name in tensors):
    tensors = {BASE_PREFIX + name: value for name, value in tensors.items()}
  return tensors


def _as_float32(name, value, where):
  # bfloat16 files read through ml_dtypes (which TensorFlow registers with NumPy).
  if not (np.issubdtype(value.dtype, np.floating) or value.dtype.name == "bfloat16"):
    raise AlbertError(f"{where}: tensor {name} has dtype {value.dtype}, expected a float type")
  return value.astype(np.float32)


def load_hf_checkpoint(model, path):
  """Loads an HF transformers ALBERT directory into a Keras ALBERT model.

  Works for an AlbertEncoder or any model holding one at `.encoder`; the pretraining heads
  (HF `predictions.`, `sop_classifier.`) are loaded when the model has them. HF's tied copies
  (`predictions.decoder.*`) must equal what they are tied to.

  Args:
    model: AlbertEncoder, AlbertPretrainer or a task model with `.encoder`, built with the
      config of the directory (`config_from_hf(path)`).
    path: a directory with `config.json` and `model.safetensors`.
  Returns:
    LoadReport: loaded/missing in official TF1 names, unexpected in HF names.
  Raises:
    AlbertError: not an ALBERT directory, no safetensors, config.json and the model disagree,
      a tensor's shape differs, or the layout cannot be computed by the official model.
      Nothing is assigned then.
  """
  path = os.fspath(path)
  config_file = os.path.join(path, CONFIG_NAME)
  weights_where = os.path.join(path, WEIGHTS_NAME)
  encoder = official_names.encoder_of(model)
  model_config = encoder.config
  _check_same_architecture(config_from_hf(path), model_config, config_file)
  check_sharing(model_config, config_file)
  check_group_rule(model_config, config_file)
  tensors = read_hf_tensors(path)

  loaded, missing, used, assignments = [], [], set(), []
  for name, variable, source, transpose in official_names.official_variables(model):
    if source is None or source not in tensors:
      missing.append(name)
      continue
    value = tensors[source]
    want = variable.shape.as_list()
    got = list(value.shape[::-1]) if transpose else list(value.shape)
    if got != want:
      raise AlbertError(f"{weights_where}: tensor {source} ({name}) has shape "
                        f"{list(value.shape)} but the model expects "
                        f"{want[::-1] if transpose else want} (wrong config.json?)")
    value = _as_float32(source, value, weights_where)
    assignments.append((variable, value.T if transpose else value))
    used.add(source)
    loaded.append(name)

  # HF always has an E->H projection; the official model has none when E == H, so there it
  # must be the identity to be dropped.
  mapping = official_names.HF_EMBEDDING_PROJECTION
  if encoder.embedding_projection is None and mapping + ".weight" in tensors:
    weight = tensors[mapping + ".weight"]
    bias = tensors.get(mapping + ".bias", np.zeros(weight.shape[:1], weight.dtype))
    if weight.shape != (model_config.hidden_size,) * 2 or not (
        np.array_equal(weight, np.eye(weight.shape[0])) and not np.any(bias)):
      raise AlbertError(f"{weights_where}: {mapping} is not the identity but "
                        "embedding_size == hidden_size, where the official model has no "
                        "projection")
    used.update(n for n in (mapping + ".weight", mapping + ".bias") if n in tensors)

  for copy_name, original in TIED.items():
    if copy_name in tensors and original in tensors:
      if not np.array_equal(tensors[copy_name], tensors[original]):
        raise AlbertError(f"{weights_where}: {copy_name} differs from {original}, to which "
                          "ALBERT ties it")
      used.add(copy_name)
  used.update(n for n in tensors if n.endswith(BUFFER_SUFFIXES))

  # Assign only after every check, so a refused directory leaves the model untouched.
  for variable, value in assignments:
    variable.assign(value.astype(variable.dtype.as_numpy_dtype))
  unexpected = sorted(n for n in tensors if n not in used)
  return LoadReport(checkpoint=path, loaded=sorted(loaded), missing=sorted(missing),
                    unexpected=unexpected)


def save_hf_checkpoint(model, directory):
  """Writes the model as an HF transformers ALBERT directory.

  `config.json` (model_type albert, `gelu_new` for the official gelu, layer_norm_eps 1e-12) and
  `model.safetensors` (float32), which `transformers.AlbertForPreTraining.from_pretrained` loads
  with nothing missing or unexpected when the model has the pretraining heads (the tied decoder
  is not stored; HF re-ties it). An encoder alone is written as an `AlbertModel`. Task heads
  other than the pretraining ones have no HF ALBERT pretraining name and are not written (a
  warning names them). When embedding_size == hidden_size, HF's mandatory E->H projection is
  written as the identity.

  Args:
    model: AlbertEncoder, AlbertPretrainer or a model with `.encoder`.
    directory: created if needed; its config.json and model.safetensors are replaced atomically.
  Returns:
    The sorted HF tensor names written.
  Raises:
    AlbertError: the model's sharing or group layout has no HF equivalent.
  """
  from safetensors import numpy as st_numpy  # pylint: disable=g-import-not-at-top
  directory = os.fspath(directory)
  encoder = official_names.encoder_of(model)
  config = encoder.config
  check_sharing(config, directory)
  check_group_rule(config, directory)
  tensors, skipped = {}, []
  for name, variable, hf_name, transpose in sorted(official_names.official_variables(model),
                                                   key=lambda row: row.name):
    if hf_name is None:
      skipped.append(name)
      continue
    value = variable.numpy().astype(np.float32)
    tensors[hf_name] = np.ascontiguousarray(value.T if transpose else value)
  if encoder.embedding_projection is None:
    size = config.hidden_size
    mapping = official_names.HF_EMBEDDING_PROJECTION
    tensors[mapping + ".weight"] = np.eye(size, dtype=np.float32)
    tensors[mapping + ".bias"] = np.zeros(size, np.float32)
  if skipped:
    logging.warning("Not written to the HF directory (no HF ALBERT name): %s", ", ".join(skipped))
  has_heads = "predictions.bias" in tensors and "sop_classifier.classifier.weight" in tensors
  architectures = ["AlbertForPreTraining"] if has_heads else ["AlbertModel"]
  with fileio.atomic_path(os.path.join(directory, WEIGHTS_NAME)) as temp:
    # metadata format "pt": transformers refuses safetensors files without a known format.
    st_numpy.save_file(tensors, temp, metadata={"format": "pt"})
  text = json.dumps(hf_config_dict(config, architectures), indent=2, sort_keys=True) + "\n"
  fileio.write_text(os.path.join(directory, CONFIG_NAME), text)
  return sorted(tensors)
