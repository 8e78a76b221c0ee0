"""HF transformers ALBERT `config.json` <-> AlbertConfig, and the layouts HF can hold.

config.json keys a file leaves out take transformers.AlbertConfig's defaults (as HF does). HF
can hold only the official computation: tanh GELU (HF `gelu_new`), LayerNorm epsilon 1e-12,
absolute positions, the MLM decoder tied to the word embeddings, whole-group sharing, and the
layers-to-groups rule of the official code (`check_group_rule`).
"""

import math
import os

from albert_tf.config import AlbertConfig
from albert_tf.common import fileio
from albert_tf.errors import AlbertError, file_error_reason, file_errors, parse_json_object

CONFIG_NAME = "config.json"
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


def read_hf_config_json(path):
  """The dict of `<path>/config.json`, checked to be an ALBERT config."""
  config_file = os.path.join(os.fspath(path), CONFIG_NAME)
  try:
    text = fileio.read_text(config_file)
  except file_errors() as e:
    raise AlbertError(f"{config_file}: cannot read HF config ({file_error_reason(e)})") from None
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
  if os.path.basename(path) == CONFIG_NAME and fileio.isfile(path):
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


def check_same_architecture(hf_config, model_config, config_file):
  """Refuses a model built with another computation than config.json's (`hf_config`, an
  AlbertConfig from `config_from_hf`), naming the first field that differs."""
  for field in _ARCHITECTURE_FIELDS:
    theirs, ours = getattr(hf_config, field), getattr(model_config, field)
    if field == "hidden_act":
      theirs, ours = _canonical_act(theirs), _canonical_act(ours)
    if theirs != ours:
      raise AlbertError(f"{config_file}: {field}={theirs!r} but the model was built with "
                        f"{field}={ours!r} (wrong albert_config?)")
