"""The official TF1 name and the HF transformers name of every variable of every ALBERT model.

`_TABLE` is the one place these names are declared. A row names one variable or one layer:

  (official TF1 name or scope, where the model keeps it, HF transformers name or module)

* "where" is a path of public attributes from the model; `encoder.` is the model's AlbertEncoder
  (the model itself when it is one). `attention_blocks[]` / `ffn_blocks[]` repeat the row for every
  block the sharing plan owns, with `{scope}` the block's official scope (`group_g/inner_group_k`,
  or `layer_l/inner_group_k` for the sharing ablations) and `{group}` / `{inner}` its HF indices;
  any other `list[]` (a head per layer) repeats it per item, `{index}` counting from 1.
* A row applies to a model when every attribute on its path exists and is not None, so one table
  serves every model: a classifier has no `masked_lm_head`, a SQuAD v1.1 head no `start_dense`,
  an E == H encoder no `embedding_projection`.
* A Dense layer gives `<scope>/kernel` (HF `<module>.weight`, stored transposed: torch Linear
  weights are [out, in]) and `<scope>/bias` when it has one; a LayerNormalization gives
  `<scope>/gamma`, `<scope>/beta` (HF `.weight`, `.bias`); a variable is named as is.
* The HF names are those of transformers' `AlbertForPreTraining` (encoder, pooler, pretraining
  heads) and of its task models: `AlbertForSequenceClassification` and `AlbertForMultipleChoice`
  (`classifier`), `AlbertForTokenClassification` (`classifier`, per piece),
  `AlbertForQuestionAnswering` (`qa_outputs`). None where HF ALBERT has no place
  (the SQuAD v2.0 head, and blocks owned by one layer). The task heads' torch Linear weights are
  [out, in] = [classes, H], the official `output_weights` layout: stored as is, not transposed.
"""

import typing

import tf_keras

from albert_tf.networks.encoder import AlbertEncoder
from albert_tf.networks.sharing import owner_scope

# Checkpoint entries that are training state, not model weights.
OPTIMIZER_SUFFIXES = ("/adam_m", "/adam_v", "/lamb_m", "/lamb_v", "/Momentum")
NON_MODEL_NAMES = ("global_step",)

# Names other modules test for (a checkpoint's kind, a hub module's scope), declared once here.
ENCODER_SCOPE = "bert/"
WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"
MLM_OUTPUT_BIAS = "cls/predictions/output_bias"
HF_EMBEDDING_PROJECTION = "albert.encoder.embedding_hidden_mapping_in"
HF_POOLER = "albert.pooler"
HF_CLASSIFIER = "classifier"  # sequence and token classification, multiple choice
TOKEN_CLASSIFIER_SCOPE = "cls/token_classification/"  # ours: the official code has no tagger
HF_QA_OUTPUTS = "qa_outputs"

_BLOCK = "bert/encoder/transformer/{scope}/"
_HF_BLOCK = "albert.encoder.albert_layer_groups.{group}.albert_layers.{inner}."

_TABLE = (
    # The encoder and its pooler (`bert/`), in every model.
    (WORD_EMBEDDINGS, "encoder.embeddings.word_embeddings",
     "albert.embeddings.word_embeddings.weight"),
    ("bert/embeddings/position_embeddings", "encoder.embeddings.position_embeddings",
     "albert.embeddings.position_embeddings.weight"),
    ("bert/embeddings/token_type_embeddings", "encoder.embeddings.token_type_embeddings",
     "albert.embeddings.token_type_embeddings.weight"),
    ("bert/embeddings/LayerNorm", "encoder.embeddings.layer_norm", "albert.embeddings.LayerNorm"),
    ("bert/encoder/embedding_hidden_mapping_in", "encoder.embedding_projection",
     HF_EMBEDDING_PROJECTION),
    (_BLOCK + "attention_1/self/query", "encoder.attention_blocks[].query",
     _HF_BLOCK + "attention.query"),
    (_BLOCK + "attention_1/self/key", "encoder.attention_blocks[].key",
     _HF_BLOCK + "attention.key"),
    (_BLOCK + "attention_1/self/value", "encoder.attention_blocks[].value",
     _HF_BLOCK + "attention.value"),
    (_BLOCK + "attention_1/output/dense", "encoder.attention_blocks[].output_dense",
     _HF_BLOCK + "attention.dense"),
    (_BLOCK + "LayerNorm", "encoder.attention_blocks[].layer_norm",
     _HF_BLOCK + "attention.LayerNorm"),
    (_BLOCK + "ffn_1/intermediate/dense", "encoder.ffn_blocks[].intermediate",
     _HF_BLOCK + "ffn"),
    (_BLOCK + "ffn_1/intermediate/output/dense", "encoder.ffn_blocks[].output_dense",
     _HF_BLOCK + "ffn_output"),
    (_BLOCK + "LayerNorm_1", "encoder.ffn_blocks[].layer_norm",
     _HF_BLOCK + "full_layer_layer_norm"),
    ("bert/pooler/dense", "encoder.pooler", HF_POOLER),
    # Pretraining (AlbertPretrainer, official run_pretraining.py). The SOP weights are [2, H] in
    # both layouts.
    ("cls/predictions/transform/dense", "masked_lm_head.transform", "predictions.dense"),
    ("cls/predictions/transform/LayerNorm", "masked_lm_head.layer_norm", "predictions.LayerNorm"),
    (MLM_OUTPUT_BIAS, "masked_lm_head.output_bias", "predictions.bias"),
    ("cls/seq_relationship/output_weights", "sentence_order_head.output_weights",
     "sop_classifier.classifier.weight"),
    ("cls/seq_relationship/output_bias", "sentence_order_head.output_bias",
     "sop_classifier.classifier.bias"),
    # GLUE (AlbertClassifier, official run_classifier.py): no scope, [num_classes, H]; HF
    # AlbertForSequenceClassification's Linear(H, num_labels) on the pooled output.
    ("output_weights", "classifier_head.output_weights", HF_CLASSIFIER + ".weight"),
    ("output_bias", "classifier_head.output_bias", HF_CLASSIFIER + ".bias"),
    # Early exit (AlbertClassifier with early_exit, heads/early_exit.py): the internal
    # classifiers of layers 1 .. L-1, [num_classes, H] each; no official or HF counterpart (an HF
    # export keeps the ordinary classifier and leaves them out).
    ("early_exit/layer_{index}/output_weights", "early_exit_classifiers.heads[].output_weights",
     None),
    ("early_exit/layer_{index}/output_bias", "early_exit_classifiers.heads[].output_bias", None),
    # RACE (AlbertMultipleChoice, official run_race.py): the same names, [1, H]; HF
    # AlbertForMultipleChoice's Linear(H, 1) on each choice's pooled output.
    ("output_weights", "choice_head.scorer.output_weights", HF_CLASSIFIER + ".weight"),
    ("output_bias", "choice_head.scorer.output_bias", HF_CLASSIFIER + ".bias"),
    # SQuAD v1.1 (AlbertSquadModel, official run_squad_v1.py): [2, H], start and end; HF
    # AlbertForQuestionAnswering's Linear(H, 2) on the sequence output (start = row 0).
    ("cls/squad/output_weights", "squad_head.output_weights", HF_QA_OUTPUTS + ".weight"),
    ("cls/squad/output_bias", "squad_head.output_bias", HF_QA_OUTPUTS + ".bias"),
    # SQuAD v2.0 (AlbertSquadModel, official run_squad_v2.py): top-level scopes.
    ("start_logits/dense", "squad_head.start_dense", None),
    ("end_logits/dense_0", "squad_head.end_dense_0", None),
    ("end_logits/LayerNorm", "squad_head.end_layer_norm", None),
    ("end_logits/dense_1", "squad_head.end_dense_1", None),
    ("answer_class/dense_0", "squad_head.answer_dense_0", None),
    ("answer_class/dense_1", "squad_head.answer_dense_1", None),  # no bias
    # Token classification (AlbertTokenClassifier, run_ner.py; no official script): [num_labels,
    # H] as the official classifier's, scoped as the official SQuAD head (`cls/<task>/`); HF
    # AlbertForTokenClassification's Linear(H, num_labels) on the sequence output.
    (TOKEN_CLASSIFIER_SCOPE + "output_weights", "token_classifier_head.output_weights",
     HF_CLASSIFIER + ".weight"),
    (TOKEN_CLASSIFIER_SCOPE + "output_bias", "token_classifier_head.output_bias",
     HF_CLASSIFIER + ".bias"),
)

# The sharing plan's owners of each block list, in the same order as the blocks.
_OWNERS = {"attention_blocks": "attention_owners", "ffn_blocks": "ffn_owners"}


class OfficialVariable(typing.NamedTuple):
  """One model variable under its official name.

  name: the official TF1 name. variable: the model's tf.Variable. hf_name: the HF transformers
  tensor name, None where HF ALBERT has none. hf_transposed: HF stores the transpose.
  """
  name: str
  variable: typing.Any
  hf_name: typing.Optional[str]
  hf_transposed: bool


def is_optimizer_state(name):
  """True for global_step and optimizer slots (`<var>/adam_m`, `<var>/adam_v`, ...)."""
  return name in NON_MODEL_NAMES or name.endswith(OPTIMIZER_SUFFIXES)


def encoder_of(model):
  """The AlbertEncoder of a model (the model itself, or its `encoder` attribute)."""
  if isinstance(model, AlbertEncoder):
    return model
  encoder = getattr(model, "encoder", None)
  if not isinstance(encoder, AlbertEncoder):
    raise TypeError(f"{type(model).__name__} has no AlbertEncoder at attribute `encoder`")
  return encoder


def _attribute(obj, path):
  """obj.a.b.c for path "a.b.c"; None when any step is missing or None."""
  for name in path.split(".") if path else ():
    obj = getattr(obj, name, None)
    if obj is None:
      return None
  return obj


def _places(model, where):
  """[(format fields, object)] for a row's path: one place, one per block, or none."""
  root, _, rest = where.partition(".")
  obj = encoder_of(model) if root == "encoder" else getattr(model, root, None)
  blocks, _, rest = rest.rpartition("[].")
  if not blocks:
    found = _attribute(obj, rest)
    return [] if found is None else [({}, found)]
  if blocks not in _OWNERS:  # a list of heads, one per layer: `{index}` from 1
    items = [] if obj is None else getattr(obj, blocks)
    return [({"index": i}, _attribute(item, rest)) for i, item in enumerate(items, start=1)]
  owners = getattr(obj.sharing_plan, _OWNERS[blocks])
  places = []
  for owner, block in zip(owners, getattr(obj, blocks)):
    kind, index, inner = owner
    # HF has groups only: a block owned by one layer (sharing ablations) has no HF name.
    fields = {"scope": owner_scope(owner), "group": index if kind == "group" else None,
              "inner": inner}
    places.append((fields, _attribute(block, rest)))
  return places


def _variables_of(official, obj, hf):
  """[OfficialVariable] of one layer (Dense, LayerNormalization) or variable at `official`."""
  if isinstance(obj, tf_keras.layers.LayerNormalization):
    parts = (("gamma", "weight", False), ("beta", "bias", False))
  elif isinstance(obj, tf_keras.layers.Dense):
    parts = (("kernel", "weight", True), ("bias", "bias", False))
  else:
    return [OfficialVariable(official, obj, hf, False)]
  return [OfficialVariable(f"{official}/{leaf}", getattr(obj, leaf),
                           hf and f"{hf}.{hf_leaf}", transposed)
          for leaf, hf_leaf, transposed in parts if getattr(obj, leaf) is not None]


def official_variables(model, part=None):
  """Every variable of the model that has an official name, as OfficialVariable rows.

  Args:
    model: AlbertEncoder, AlbertPretrainer or a task model holding its encoder at `.encoder`.
    part: None for all; "encoder" for the encoder and pooler (`bert/`); "heads" for the rest.
  Returns:
    list of OfficialVariable in table order (blocks in sharing-plan order).
  """
  rows = []
  for official, where, hf in _TABLE:
    if part is not None and (where.startswith("encoder.") != (part == "encoder")):
      continue
    for fields, obj in _places(model, where):
      if obj is None:
        continue
      hf_name = None if hf is None or None in fields.values() else hf.format(**fields)
      rows.extend(_variables_of(official.format(**fields), obj, hf_name))
  return rows


def model_variable_map(model):
  """{official name: tf.Variable} for everything of the model that has an official name."""
  return {row.name: row.variable for row in official_variables(model)}


def encoder_variable_map(model):
  """{official name: tf.Variable} for the encoder and pooler (`bert/...`)."""
  return {row.name: row.variable for row in official_variables(model, "encoder")}


def head_variable_map(model):
  """{official name: tf.Variable} for the model's heads (everything but the encoder)."""
  return {row.name: row.variable for row in official_variables(model, "heads")}


def unnamed_variables(model):
  """The model's variables that have no official name (a TF1 checkpoint cannot fill them)."""
  named = {id(v) for v in model_variable_map(model).values()}
  return [v for v in model.variables if id(v) not in named]
