"""Hugging Face transformers ALBERT directories (`config.json` + `model.safetensors`), both ways.

Reading needs no PyTorch: tensors come from `model.safetensors` through `safetensors.numpy`.
An HF ALBERT directory stores PyTorch tensors: `albert.` (the encoder and, except in
`AlbertForQuestionAnswering`, the pooler) and its model's head:

* AlbertForPreTraining: `predictions.` (MLM) and `sop_classifier.` -> AlbertPretrainer.
* AlbertForSequenceClassification: `classifier` Linear(H, num_labels) on the pooled output ->
  AlbertClassifier (one label and problem_type "regression": a regression classifier).
* AlbertForMultipleChoice: `classifier` Linear(H, 1) on each choice's pooled output ->
  AlbertMultipleChoice.
* AlbertForQuestionAnswering: `qa_outputs` Linear(H, 2) on every token, no pooler ->
  AlbertSquadModel (v1.1).
* AlbertModel: no head -> AlbertEncoder.

Each tensor's name beside its official TF1 name is in `official_names`. Values are assigned with
the same semantics as `tf1.load_tf1_checkpoint`: every shape is checked before anything is
assigned, and the report lists what was loaded, what the model has that the directory lacks, and
what the directory has that the model does not use. A classifier's class names travel as
config.json's `id2label`: loading with the task's label list puts the head's rows in the task's
order (`head_row_order`), saving writes the label list as `id2label` / `label2id`.
"""

import json
import math
import os

import numpy as np
from absl import logging

from albert_tf import fileio, kinds
from albert_tf.checkpoints import official_names
from albert_tf.checkpoints.tf1 import LoadReport
from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError, parse_json_object

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

# config.json `architectures` -> the model type (albert_tf.kinds.KINDS) holding that model.
ARCHITECTURE_TYPES = {
    "AlbertModel": "encoder",
    "AlbertForPreTraining": "pretrainer",
    "AlbertForMaskedLM": "pretrainer",
    "AlbertForSequenceClassification": "classifier",  # "regression" by problem_type
    "AlbertForMultipleChoice": "multiple_choice",
    "AlbertForQuestionAnswering": "squad_v1",
}
# Our model type -> the architecture written. SQuAD v2.0's head has no HF ALBERT counterpart:
# its encoder is written as an AlbertModel (a warning names the head's variables).
_TYPE_ARCHITECTURES = {
    "encoder": "AlbertModel", "pretrainer": "AlbertForPreTraining",
    "classifier": "AlbertForSequenceClassification",
    "regression": "AlbertForSequenceClassification",
    "multiple_choice": "AlbertForMultipleChoice", "squad_v1": "AlbertForQuestionAnswering",
    "squad_v2": "AlbertModel",
}
# HF heads that the same tensor names hold in two architectures: a sequence-classification
# `classifier` must not load as a multiple-choice scorer, nor the reverse.
_HEAD_ARCHITECTURES = ("AlbertForSequenceClassification", "AlbertForMultipleChoice")
# Our models that never read the pooled output: an HF directory without a pooler (transformers
# builds AlbertForQuestionAnswering without one) loads into them whole.
_POOLER_UNREAD = ("squad_v1", "squad_v2")
_GENERIC_LABEL = "LABEL_{}"
REGRESSION = "regression"

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
      text = f.read()
  except OSError as e:
    raise AlbertError(f"{config_file}: cannot read HF config ({e.strerror})") from None
  obj = parse_json_object(text, config_file, "a JSON object (an HF config)")
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


def _load_safetensors_file(weights_file, shapes_only=False):
  import safetensors  # pylint: disable=g-import-not-at-top
  from safetensors import numpy as st_numpy  # pylint: disable=g-import-not-at-top
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


# ------------------------------------------------------------------------ task heads and labels
def _architecture(hf_config):
  """The first of config.json's `architectures`, or None when it names none."""
  architectures = hf_config.get("architectures") or [None]
  return architectures[0] if isinstance(architectures, list) else None


def _label_names(hf_config, config_file):
  """config.json's id2label names in id order ([] when it has none)."""
  id2label = hf_config.get("id2label")
  if not id2label:
    return []
  try:
    by_id = {int(key): str(name) for key, name in id2label.items()}
  except (AttributeError, TypeError, ValueError):
    raise AlbertError(f"{config_file}: id2label must map the class ids 0..N-1 to names, got "
                      f"{str(id2label)[:80]}") from None
  if sorted(by_id) != list(range(len(by_id))):
    raise AlbertError(f"{config_file}: id2label ids {sorted(by_id)} are not 0..{len(by_id) - 1}")
  return [by_id[i] for i in range(len(by_id))]


def hf_label_names(path):
  """The class names of an HF classifier directory, in id order; None when config.json has none
  or only transformers' generic LABEL_0, LABEL_1, ..."""
  path = os.fspath(path)
  names = _label_names(read_hf_config_json(path), os.path.join(path, CONFIG_NAME))
  return None if not names or is_generic_labels(names) else names


def is_generic_labels(names):
  """True for transformers' placeholder names LABEL_0, LABEL_1, ... in that order."""
  return all(name == _GENERIC_LABEL.format(i) for i, name in enumerate(names))


def head_row_order(names, label_list, where):
  """For each of the task's labels, the row of the HF head that scores it; None: keep the order.

  HF's generic LABEL_<i> keep their order, and so do any names for a task whose labels are the
  class ids themselves ("0", "1", ... as GLUE's binary tasks: HF's id i is label "i"). Otherwise
  the names must be the task's labels, in any order and case ("ENTAILMENT" is "entailment").

  Args:
    names: config.json's id2label names in id order (as many as the head has rows).
    label_list: the task's labels in its order (as many).
    where: config.json, for the error.
  Raises:
    AlbertError: names that are not the task's labels (both lists named).
  """
  ours = [str(label) for label in label_list]
  if names == ours or is_generic_labels(names):
    return None
  folded = {name.lower(): row for row, name in enumerate(names)}
  if len(folded) == len(names) and sorted(folded) == sorted(label.lower() for label in ours):
    return [folded[label.lower()] for label in ours]
  if ours == [str(i) for i in range(len(ours))]:
    logging.info("%s: id2label names %s are read as the class ids %s", where, names, ours)
    return None
  raise AlbertError(f"{where}: id2label names ({', '.join(names)}) are not the task's labels "
                    f"({', '.join(ours)})")


def _is_regression_head(hf_config, rows):
  """transformers' rule: problem_type "regression", or one label and no problem_type."""
  problem_type = hf_config.get("problem_type")
  return problem_type == REGRESSION or (problem_type is None and rows == 1)


def _type_from_names(shapes, path):
  if official_names.HF_QA_OUTPUTS + ".weight" in shapes:
    return "squad_v1"
  head = shapes.get(official_names.HF_CLASSIFIER + ".weight")
  if head is not None:
    if head[0] == 1:
      raise AlbertError(f"{path}: config.json names no architecture and its one-row classifier "
                        "is a regression classifier or a multiple-choice scorer: pass "
                        "--model_type=regression or --model_type=multiple_choice")
    return "classifier"
  return "pretrainer" if "predictions.bias" in shapes else "encoder"


def hf_model_type(path, model_type=None):
  """(model type, number of classes or None) of an HF directory (see checkpoint_model_type):
  its config.json `architectures`, else its head's tensor names; a sequence classifier is a
  "regression" by transformers' problem_type rule."""
  path = os.fspath(path)
  hf_config = read_hf_config_json(path)
  shapes = read_hf_tensors(path, shapes_only=True)
  head = shapes.get(official_names.HF_CLASSIFIER + ".weight")
  rows = head[0] if head else None
  if model_type is None:
    architecture = _architecture(hf_config)
    if architecture is not None and architecture not in ARCHITECTURE_TYPES:
      raise AlbertError(f"{os.path.join(path, CONFIG_NAME)}: architectures names "
                        f"{architecture}, which has no model here (known: "
                        f"{', '.join(ARCHITECTURE_TYPES)}); pass --model_type to read its "
                        "encoder")
    model_type = ARCHITECTURE_TYPES.get(architecture) or _type_from_names(shapes, path)
    if model_type == "classifier" and _is_regression_head(hf_config, rows):
      model_type = REGRESSION
  return model_type, rows if model_type in ("classifier", REGRESSION) else None


def _describe_classes(count, names, regression):
  if regression:
    return "1 regression output"
  return f"{count} labels" + (f" ({', '.join(names)})" if names else "")


def _fit_classifier_head(model, path, hf_config, tensors, label_list, strict):
  """An HF sequence-classification head checked against our classifier, rows in task order.

  Returns the tensors, the head's rows reordered to label_list's order when id2label names them
  in another. Raises AlbertError: another number of classes; names that are not the task's, or
  real names and no label_list to order them by; a multi-label (sigmoid) head read for
  evaluation by a softmax classifier.
  """
  config_file = os.path.join(path, CONFIG_NAME)
  weight, bias = (f"{official_names.HF_CLASSIFIER}.{leaf}" for leaf in ("weight", "bias"))
  if weight not in tensors:
    return tensors
  rows = tensors[weight].shape[0]
  names = _label_names(hf_config, config_file)
  if names and len(names) != rows:
    raise AlbertError(f"{config_file}: id2label has {len(names)} labels but {weight} has "
                      f"{rows} rows")
  labels = [str(label) for label in label_list] if label_list else None
  if rows != model.num_classes or _is_regression_head(hf_config, rows) != model.is_regression:
    theirs = _describe_classes(rows, names, _is_regression_head(hf_config, rows))
    ours = _describe_classes(model.num_classes, labels, model.is_regression)
    raise AlbertError(f"{path}: the HF head has {theirs} but the task has {ours}")
  if (strict and hf_config.get("problem_type") == "multi_label_classification"
      and not getattr(model, "is_multi_label", False)):
    raise AlbertError(f"{config_file}: problem_type multi_label_classification (a sigmoid per "
                      "label) but this task is single-label (softmax over the labels)")
  if model.is_regression or not names or is_generic_labels(names):
    return tensors
  if labels is None:
    # Without the task's labels the rows' order would be a guess: never silently.
    raise AlbertError(f"{config_file}: id2label names the classes ({', '.join(names)}): give "
                      "the task's label list to put the head's rows in its order")
  order = head_row_order(names, labels, config_file)
  if order is None:
    return tensors
  logging.info("%s: head rows %s (id2label %s) put in the task's label order %s", path, order,
               names, labels)
  tensors = dict(tensors)
  for name in (weight, bias):
    if name in tensors:
      tensors[name] = tensors[name][order]
  return tensors


def _fit_head(model, path, hf_config, tensors, label_list, strict):
  """(tensors, HF names not to load) for this model's head.

  The same `classifier` tensors are a sequence classifier in one architecture and a
  multiple-choice scorer in the other: a directory of the other kind keeps its head to itself.
  """
  kind = kinds.kind_of(model)
  theirs, ours = _architecture(hf_config), _TYPE_ARCHITECTURES[kind]
  if theirs in _HEAD_ARCHITECTURES and ours in _HEAD_ARCHITECTURES and theirs != ours:
    return tensors, {n for n in tensors if n.startswith(official_names.HF_CLASSIFIER + ".")}
  if kind in kinds.CLASSIFIER_KINDS:
    tensors = _fit_classifier_head(model, path, hf_config, tensors, label_list, strict)
  return tensors, set()


def _require_head(model, path, hf_config, missing):
  """Refuses a directory without this model's head (evaluating a random head is no result)."""
  heads = [name for name in missing if not name.startswith(official_names.ENCODER_SCOPE)]
  if heads:
    ours = _TYPE_ARCHITECTURES[kinds.kind_of(model)]
    theirs = _architecture(hf_config) or "ALBERT"
    raise AlbertError(f"{path}: an HF {theirs} directory has no {ours} head for this "
                      f"{type(model).__name__} (lacks {heads[0]}); fine-tune it first "
                      "(--do_train with it as --init_checkpoint)")


# ------------------------------------------------------------------------ loading
def _planned_assignments(model, tensors, skip, weights_where):
  """(loaded, missing, used HF names, [(variable, value)]) with every shape checked."""
  loaded, missing, used, assignments = [], [], set(), []
  for name, variable, source, transpose in official_names.official_variables(model):
    if source is None or source not in tensors or source in skip:
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
  return loaded, missing, used, assignments


def _checked_projection(encoder, tensors, weights_where):
  """HF always has an E->H projection; the official model has none when E == H, so there it
  must be the identity to be dropped. Returns the HF names so accounted for."""
  mapping = official_names.HF_EMBEDDING_PROJECTION
  if encoder.embedding_projection is not None or mapping + ".weight" not in tensors:
    return set()
  weight = tensors[mapping + ".weight"]
  bias = tensors.get(mapping + ".bias", np.zeros(weight.shape[:1], weight.dtype))
  if weight.shape != (encoder.config.hidden_size,) * 2 or not (
      np.array_equal(weight, np.eye(weight.shape[0])) and not np.any(bias)):
    raise AlbertError(f"{weights_where}: {mapping} is not the identity but "
                      "embedding_size == hidden_size, where the official model has no "
                      "projection")
  return {n for n in (mapping + ".weight", mapping + ".bias") if n in tensors}


def _checked_tied_copies(tensors, weights_where):
  """HF's tied copies must equal what they are tied to. Returns the copies' names."""
  used = set()
  for copy_name, original in TIED.items():
    if copy_name in tensors and original in tensors:
      if not np.array_equal(tensors[copy_name], tensors[original]):
        raise AlbertError(f"{weights_where}: {copy_name} differs from {original}, to which "
                          "ALBERT ties it")
      used.add(copy_name)
  return used


def _unread_pooler(model, missing, path):
  """The pooler names among `missing` that this model never reads (SQuAD: HF's
  AlbertForQuestionAnswering has no pooler); they stay at their initial values."""
  if kinds.kind_of(model) not in _POOLER_UNREAD:
    return set()
  pooler = {n for n in missing if n.startswith("bert/pooler/")}
  if pooler:
    logging.info("%s: no pooler, which %s does not read (kept at its initial value)", path,
                 type(model).__name__)
  return pooler


def load_hf_checkpoint(model, path, label_list=None, require_head=False):
  """Loads an HF transformers ALBERT directory into a Keras ALBERT model.

  Works for an AlbertEncoder or any model holding one at `.encoder`; the heads (pretraining,
  sequence classification, multiple choice, question answering) load when the model has them
  and the directory holds them (the table in the module docstring). HF's tied copies
  (`predictions.decoder.*`) must equal what they are tied to.

  Args:
    model: AlbertEncoder, AlbertPretrainer or a task model with `.encoder`, built with the
      config of the directory (`config_from_hf(path)`); a classifier with the task's classes.
    path: a directory with `config.json` and `model.safetensors`.
    label_list: a classifier's labels in the task's order: id2label's names put the head's rows
      in that order (`head_row_order`). Required when id2label holds names other than
      transformers' generic LABEL_<i> (pass `hf_label_names(path)` to keep the directory's).
    require_head: the directory must hold this model's head (evaluation, prediction, export).
  Returns:
    LoadReport: loaded/missing in official TF1 names, unexpected in HF names.
  Raises:
    AlbertError: not an ALBERT directory, no safetensors, config.json and the model disagree,
      a tensor's shape differs, a classifier head of other classes, no head with require_head,
      or a layout the official model cannot compute. Nothing is assigned then.
  """
  path = os.fspath(path)
  config_file = os.path.join(path, CONFIG_NAME)
  weights_where = os.path.join(path, WEIGHTS_NAME)
  encoder = official_names.encoder_of(model)
  _check_same_architecture(config_from_hf(path), encoder.config, config_file)
  check_sharing(encoder.config, config_file)
  check_group_rule(encoder.config, config_file)
  hf_config = read_hf_config_json(path)
  tensors, skip = _fit_head(model, path, hf_config, read_hf_tensors(path), label_list,
                            require_head)
  loaded, missing, used, assignments = _planned_assignments(model, tensors, skip, weights_where)
  used |= _checked_projection(encoder, tensors, weights_where)
  used |= _checked_tied_copies(tensors, weights_where)
  used.update(n for n in tensors if n.endswith(BUFFER_SUFFIXES))
  missing = sorted(set(missing) - _unread_pooler(model, missing, path))
  if require_head:
    _require_head(model, path, hf_config, missing)
  # Assign only after every check, so a refused directory leaves the model untouched.
  for variable, value in assignments:
    variable.assign(value.astype(variable.dtype.as_numpy_dtype))
  unexpected = sorted(n for n in tensors if n not in used)
  return LoadReport(checkpoint=path, loaded=sorted(loaded), missing=missing,
                    unexpected=unexpected)


# ------------------------------------------------------------------------ saving
def hf_head_config(model, label_list=None):
  """The config.json fields of the model's head: a classifier's id2label / label2id (from
  label_list, else LABEL_<i>) and problem_type; the dropout before a classifier or scorer.

  Raises:
    AlbertError: label_list is not one distinct name per class.
  """
  kind = kinds.kind_of(model)
  if kind == "multiple_choice":
    return {"classifier_dropout_prob": model.dropout_rate}
  if kind not in kinds.CLASSIFIER_KINDS:
    return {}
  count = model.num_classes
  names = [str(label) for label in label_list] if label_list and kind != REGRESSION else [
      _GENERIC_LABEL.format(i) for i in range(count)]
  if len(names) != count or len(set(names)) != count:
    raise AlbertError(f"label list ({', '.join(names)}) must name each of the {count} classes "
                      "once")
  return {"id2label": {str(i): name for i, name in enumerate(names)},
          "label2id": {name: i for i, name in enumerate(names)},
          "problem_type": REGRESSION if kind == REGRESSION else "single_label_classification",
          "classifier_dropout_prob": model.dropout_rate}


def save_hf_checkpoint(model, directory, label_list=None):
  """Writes the model as an HF transformers ALBERT directory.

  `config.json` (model_type albert, `gelu_new` for the official gelu, layer_norm_eps 1e-12, the
  architecture of the model's head, a classifier's id2label / label2id / problem_type) and
  `model.safetensors` (float32), which transformers' `<architecture>.from_pretrained` loads with
  nothing missing or unexpected: AlbertForPreTraining (the tied decoder is not stored; HF re-ties
  it), AlbertForSequenceClassification, AlbertForMultipleChoice, AlbertForQuestionAnswering
  (without the pooler, which it has not), an encoder alone as AlbertModel. The SQuAD v2.0 head
  has no HF ALBERT counterpart: its encoder is written as an AlbertModel and a warning names the
  head's variables. When embedding_size == hidden_size, HF's mandatory E->H projection is
  written as the identity.

  Args:
    model: AlbertEncoder, AlbertPretrainer or a task model with `.encoder`.
    directory: created if needed; its config.json and model.safetensors are replaced atomically.
    label_list: a classifier's class names in its order (id2label); None: LABEL_0, LABEL_1, ...
  Returns:
    The sorted HF tensor names written.
  Raises:
    AlbertError: the model's sharing or group layout has no HF equivalent; a label list that
      does not name the classes. Nothing is written then.
  """
  from safetensors import numpy as st_numpy  # pylint: disable=g-import-not-at-top
  directory = os.fspath(directory)
  encoder = official_names.encoder_of(model)
  config = encoder.config
  check_sharing(config, directory)
  check_group_rule(config, directory)
  architecture = _TYPE_ARCHITECTURES[kinds.kind_of(model)]
  hf_config = dict(hf_config_dict(config, [architecture]), **hf_head_config(model, label_list))
  tensors, skipped = {}, []
  for name, variable, hf_name, transpose in sorted(official_names.official_variables(model),
                                                   key=lambda row: row.name):
    if hf_name is None:
      skipped.append(name)
    elif not (architecture == "AlbertForQuestionAnswering"
              and hf_name.startswith(official_names.HF_POOLER + ".")):
      value = variable.numpy().astype(np.float32)
      tensors[hf_name] = np.ascontiguousarray(value.T if transpose else value)
  if encoder.embedding_projection is None:
    size = config.hidden_size
    mapping = official_names.HF_EMBEDDING_PROJECTION
    tensors[mapping + ".weight"] = np.eye(size, dtype=np.float32)
    tensors[mapping + ".bias"] = np.zeros(size, np.float32)
  if skipped:
    logging.warning("Not written to the HF directory (no HF ALBERT name): %s", ", ".join(skipped))
  with fileio.atomic_path(os.path.join(directory, WEIGHTS_NAME)) as temp:
    # metadata format "pt": transformers refuses safetensors files without a known format.
    st_numpy.save_file(tensors, temp, metadata={"format": "pt"})
  text = json.dumps(hf_config, indent=2, sort_keys=True) + "\n"
  fileio.write_text(os.path.join(directory, CONFIG_NAME), text)
  return sorted(tensors)
