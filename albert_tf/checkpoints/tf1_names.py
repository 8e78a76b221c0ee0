"""The official TF1 variable names of every Keras variable of an ALBERT model."""

from albert_tf.networks.sharing import owner_scope

# Checkpoint entries that are training state, not model weights.
OPTIMIZER_SUFFIXES = ("/adam_m", "/adam_v", "/lamb_m", "/lamb_v", "/Momentum")
NON_MODEL_NAMES = ("global_step",)


def is_optimizer_state(name):
  """True for global_step and optimizer slots (`<var>/adam_m`, `<var>/adam_v`, ...)."""
  return name in NON_MODEL_NAMES or name.endswith(OPTIMIZER_SUFFIXES)


def _dense(prefix, layer):
  return {prefix + "/kernel": layer.kernel, prefix + "/bias": layer.bias}


def _layer_norm(prefix, layer):
  return {prefix + "/gamma": layer.gamma, prefix + "/beta": layer.beta}


def encoder_of(model):
  """The AlbertEncoder of a model (the model itself, or its `encoder` attribute)."""
  from albert_tf.networks.encoder import AlbertEncoder  # pylint: disable=g-import-not-at-top
  if isinstance(model, AlbertEncoder):
    return model
  encoder = getattr(model, "encoder", None)
  if not isinstance(encoder, AlbertEncoder):
    raise TypeError(f"{type(model).__name__} has no AlbertEncoder at attribute `encoder`")
  return encoder


def encoder_variable_map(encoder):
  """{official name: tf.Variable} for the encoder and pooler (`bert/...`)."""
  names = {}
  emb = encoder.embeddings
  names["bert/embeddings/word_embeddings"] = emb.word_embeddings
  names["bert/embeddings/position_embeddings"] = emb.position_embeddings
  names["bert/embeddings/token_type_embeddings"] = emb.token_type_embeddings
  names.update(_layer_norm("bert/embeddings/LayerNorm", emb.layer_norm))
  if encoder.embedding_projection is not None:
    names.update(_dense("bert/encoder/embedding_hidden_mapping_in", encoder.embedding_projection))
  plan = encoder.sharing_plan
  for owner, block in zip(plan.attention_owners, encoder.attention_blocks):
    prefix = f"bert/encoder/transformer/{owner_scope(owner)}/"
    for part in ("query", "key", "value"):
      names.update(_dense(prefix + "attention_1/self/" + part, getattr(block, part)))
    names.update(_dense(prefix + "attention_1/output/dense", block.output_dense))
    names.update(_layer_norm(prefix + "LayerNorm", block.layer_norm))
  for owner, block in zip(plan.ffn_owners, encoder.ffn_blocks):
    prefix = f"bert/encoder/transformer/{owner_scope(owner)}/"
    names.update(_dense(prefix + "ffn_1/intermediate/dense", block.intermediate))
    names.update(_dense(prefix + "ffn_1/intermediate/output/dense", block.output_dense))
    names.update(_layer_norm(prefix + "LayerNorm_1", block.layer_norm))
  names.update(_dense("bert/pooler/dense", encoder.pooler))
  return names


def head_variable_map(model):
  """{official name: tf.Variable} for the heads the model has.

  The pretraining heads (`cls/predictions`, `cls/seq_relationship`) are named here; any other head
  (a direct sublayer of the model) that knows its official names says so through a
  `tf1_variable_map()` method, e.g. the SQuAD heads' `cls/squad/...`.
  """
  names = {}
  encoder = getattr(model, "encoder", None)
  for layer in getattr(model, "_self_tracked_trackables", []):
    if layer is not encoder and hasattr(layer, "tf1_variable_map"):
      names.update(layer.tf1_variable_map())
  mlm = getattr(model, "masked_lm_head", None)
  if mlm is not None:
    names.update(_dense("cls/predictions/transform/dense", mlm.transform))
    names.update(_layer_norm("cls/predictions/transform/LayerNorm", mlm.layer_norm))
    names["cls/predictions/output_bias"] = mlm.output_bias
  sop = getattr(model, "sentence_order_head", None)
  if sop is not None:
    names["cls/seq_relationship/output_weights"] = sop.output_weights
    names["cls/seq_relationship/output_bias"] = sop.output_bias
  return names


def model_variable_map(model):
  """{official name: tf.Variable} for everything of the model that has an official name."""
  names = encoder_variable_map(encoder_of(model))
  names.update(head_variable_map(model))
  return names


def unnamed_variables(model):
  """The model's variables that have no official name (a TF1 checkpoint cannot fill them)."""
  named = {id(v) for v in model_variable_map(model).values()}
  return [v for v in model.variables if id(v) not in named]
