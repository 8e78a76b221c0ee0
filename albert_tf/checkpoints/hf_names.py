"""Hugging Face transformers ALBERT tensor names <-> the official TF1 names, and the group rule.

A Hugging Face `AlbertForPreTraining` stores PyTorch tensors: `albert.` (the encoder and pooler),
`predictions.` (masked-LM head) and `sop_classifier.` (sentence-order head). Linear weights are
[out, in], the transpose of a TF kernel; the SOP weight is [2, H] in both layouts.
"""

import re

from albert_tf.errors import AlbertError

BASE_PREFIX = "albert."

# Official scope -> HF module, in order (first match wins). `{g}`/`{k}` come from the regex.
_SCOPES = (
    (r"bert/embeddings/(word|position|token_type)_embeddings$",
     r"albert.embeddings.\1_embeddings.weight"),
    (r"bert/embeddings/LayerNorm$", "albert.embeddings.LayerNorm"),
    (r"bert/encoder/embedding_hidden_mapping_in$", "albert.encoder.embedding_hidden_mapping_in"),
    (r"bert/encoder/transformer/group_(\d+)/inner_group_(\d+)/attention_1/self/(query|key|value)$",
     r"albert.encoder.albert_layer_groups.\1.albert_layers.\2.attention.\3"),
    (r"bert/encoder/transformer/group_(\d+)/inner_group_(\d+)/attention_1/output/dense$",
     r"albert.encoder.albert_layer_groups.\1.albert_layers.\2.attention.dense"),
    (r"bert/encoder/transformer/group_(\d+)/inner_group_(\d+)/LayerNorm$",
     r"albert.encoder.albert_layer_groups.\1.albert_layers.\2.attention.LayerNorm"),
    (r"bert/encoder/transformer/group_(\d+)/inner_group_(\d+)/ffn_1/intermediate/dense$",
     r"albert.encoder.albert_layer_groups.\1.albert_layers.\2.ffn"),
    (r"bert/encoder/transformer/group_(\d+)/inner_group_(\d+)/ffn_1/intermediate/output/dense$",
     r"albert.encoder.albert_layer_groups.\1.albert_layers.\2.ffn_output"),
    (r"bert/encoder/transformer/group_(\d+)/inner_group_(\d+)/LayerNorm_1$",
     r"albert.encoder.albert_layer_groups.\1.albert_layers.\2.full_layer_layer_norm"),
    (r"bert/pooler/dense$", "albert.pooler"),
    (r"cls/predictions/transform/dense$", "predictions.dense"),
    (r"cls/predictions/transform/LayerNorm$", "predictions.LayerNorm"),
)
_SCOPES = tuple((re.compile(pattern), replacement) for pattern, replacement in _SCOPES)

# Names that need no scope mapping.
_WHOLE = {
    "cls/predictions/output_bias": "predictions.bias",
    "cls/seq_relationship/output_weights": "sop_classifier.classifier.weight",
    "cls/seq_relationship/output_bias": "sop_classifier.classifier.bias",
}

# HF tensors that are tied copies of others (not stored by save_pretrained, but some files have
# them): HF name -> the HF name it must equal.
TIED = {
    "predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
    "predictions.decoder.bias": "predictions.bias",
}

# Buffers older transformers versions stored beside the weights; not model weights.
BUFFER_SUFFIXES = (".position_ids", ".token_type_ids")


def hf_name(official):
  """(HF name, transpose) for an official TF1 name; None when HF has no place for it.

  None for our sharing-ablation blocks (`layer_{l}/...`) and task heads HF names otherwise.
  """
  if official in _WHOLE:
    return _WHOLE[official], False
  if official.endswith("_embeddings") and official.startswith("bert/embeddings/"):
    scope, leaf = official, None
  else:
    scope, _, leaf = official.rpartition("/")
  for pattern, replacement in _SCOPES:
    match = pattern.match(scope)
    if match is None:
      continue
    module = match.expand(replacement)
    if leaf is None:
      return module, False
    suffix = {"kernel": ("weight", True), "bias": ("bias", False), "gamma": ("weight", False),
              "beta": ("bias", False)}.get(leaf)
    if suffix is None:
      return None
    return f"{module}.{suffix[0]}", suffix[1]
  return None


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
