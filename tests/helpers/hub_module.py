"""Test helper: an official ALBERT TF-Hub module (TF1 hub format) written without the network.

tensorflow_hub 0.16 no longer has the TF1 API (`hub.create_module_spec`, `hub.Module`), so
`write_official_tf1_hub_module` writes what the official `export_to_tfhub.py` wrote through it,
step by step as tensorflow_hub 0.15's `native_module` / `saved_model_lib` did:

* one TF1 graph per tag set, in the official order ({"train"}, then {}), each built by a
  `module_fn` that follows the official `modeling.AlbertModel` + `get_mlm_logits` +
  `get_sop_log_probs` with resource variables under the official names (`bert/...`, `cls/...`),
  the placeholders `input_ids`, `input_mask`, `segment_ids`, `mlm_positions`, the string
  constants `config_file`, `vocab_model`, `vocab_file` in the ASSET_FILEPATHS collection, and the
  signatures `tokens`, `sop`, `mlm`, `tokenization_info` (vocab_file = the `vocab_model`
  constant, do_lower_case = a bool constant);
* `export_meta_graph(strip_default_attrs=True)` + tags + signature_defs per graph; the asset
  constants rewritten to "SAVEDMODEL-ASSET" and recorded as AssetFileDefs (by basename) in the
  `saved_model_assets` collection; the files copied into `assets/`;
* the variables saved by a sharded V2 Saver under their names in the module graph (no scope
  prefix) to `variables/variables`;
* `tfhub_module.pb`: a ModuleDef with format FORMAT_V3 (field 1 = 3).
"""

import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from albert_tf.checkpoints import official_names
from albert_tf.config import AlbertConfig

MODULE_DEF_V3 = b"\x08\x03"  # tensorflow_hub ModuleDef{format: FORMAT_V3}
_ASSETS_KEY = "saved_model_assets"
_ASSET_PLACEHOLDER = b"SAVEDMODEL-ASSET"


def _weights_dict(weights, config):
  """{official name: ndarray} from None (a random AlbertPretrainer), a Keras model or a dict."""
  if weights is None:
    from albert_tf.models.pretrainer import AlbertPretrainer  # pylint: disable=g-import-not-at-top
    weights = AlbertPretrainer(config)
  if isinstance(weights, dict):
    return {k: np.asarray(v) for k, v in weights.items()}
  return {k: v.numpy() for k, v in official_names.model_variable_map(weights).items()}


def _activation(name):
  if name in ("gelu", "gelu_new"):
    return lambda x: 0.5 * x * (1.0 + tf.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
  if name == "relu":
    return tf.nn.relu
  if name == "tanh":
    return tf.tanh
  if name == "linear":
    return lambda x: x
  raise ValueError(f"unsupported activation {name}")


def _module_fn(cfg, is_training, config_path, spm_path, vocab_path, do_lower_case):
  """The official export_to_tfhub.module_fn, with the official model written in TF1 ops."""
  v1 = tf.compat.v1
  init = v1.truncated_normal_initializer(stddev=cfg.initializer_range)
  act = _activation(cfg.hidden_act)

  def dropout(x, rate):
    return tf.nn.dropout(x, rate=rate) if is_training and rate > 0 else x

  def dense(x, units, scope, activation=None):
    with v1.variable_scope(scope):
      kernel = v1.get_variable("kernel", [x.shape[-1], units], initializer=init)
      bias = v1.get_variable("bias", [units], initializer=v1.zeros_initializer())
    y = tf.einsum("...i,io->...o", x, kernel) + bias
    return activation(y) if activation else y

  def layer_norm(x, scope):
    with v1.variable_scope(scope):
      beta = v1.get_variable("beta", [x.shape[-1]], initializer=v1.zeros_initializer())
      gamma = v1.get_variable("gamma", [x.shape[-1]], initializer=v1.ones_initializer())
    mean, variance = tf.nn.moments(x, [-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(variance + 1e-12) * gamma + beta

  input_ids = v1.placeholder(tf.int32, [None, None], "input_ids")
  input_mask = v1.placeholder(tf.int32, [None, None], "input_mask")
  segment_ids = v1.placeholder(tf.int32, [None, None], "segment_ids")
  mlm_positions = v1.placeholder(tf.int32, [None, None], "mlm_positions")
  hidden, heads = cfg.hidden_size, cfg.num_attention_heads
  head_size = hidden // heads
  batch, length = tf.shape(input_ids)[0], tf.shape(input_ids)[1]

  with v1.variable_scope("bert"):
    with v1.variable_scope("embeddings"):
      word_table = v1.get_variable("word_embeddings", [cfg.vocab_size, cfg.embedding_size],
                                   initializer=init)
      x = tf.gather(word_table, input_ids)
      type_table = v1.get_variable("token_type_embeddings",
                                   [cfg.type_vocab_size, cfg.embedding_size], initializer=init)
      x += tf.einsum("bst,te->bse", tf.one_hot(segment_ids, cfg.type_vocab_size), type_table)
      position_table = v1.get_variable("position_embeddings",
                                       [cfg.max_position_embeddings, cfg.embedding_size],
                                       initializer=init)
      x += position_table[None, :length]
      x = dropout(layer_norm(x, "LayerNorm"), cfg.hidden_dropout_prob)
    with v1.variable_scope("encoder"):
      if cfg.embedding_size != hidden:
        x = dense(x, hidden, "embedding_hidden_mapping_in")
      adder = (1.0 - tf.cast(input_mask, tf.float32))[:, None, None, :] * -10000.0

      def split(t):
        return tf.transpose(tf.reshape(t, [batch, length, heads, head_size]), [0, 2, 1, 3])

      with v1.variable_scope("transformer"):
        for layer in range(cfg.num_hidden_layers):
          group = int(layer / cfg.num_hidden_layers * cfg.num_hidden_groups)
          with v1.variable_scope(f"group_{group}", reuse=v1.AUTO_REUSE):
            for inner in range(cfg.inner_group_num):
              with v1.variable_scope(f"inner_group_{inner}"):
                with v1.variable_scope("attention_1"):
                  with v1.variable_scope("self"):
                    q, k, v = (split(dense(x, hidden, n)) for n in ("query", "key", "value"))
                    scores = tf.matmul(q, k, transpose_b=True) / np.sqrt(head_size) + adder
                    probs = dropout(tf.nn.softmax(scores), cfg.attention_probs_dropout_prob)
                    context = tf.reshape(tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3]),
                                         [batch, length, hidden])
                  with v1.variable_scope("output"):
                    attention = dropout(dense(context, hidden, "dense"),
                                        cfg.hidden_dropout_prob)
                x = layer_norm(attention + x, "LayerNorm")
                with v1.variable_scope("ffn_1"):
                  with v1.variable_scope("intermediate"):
                    h = dense(x, cfg.intermediate_size, "dense", act)
                    with v1.variable_scope("output"):
                      h = dropout(dense(h, hidden, "dense"), cfg.hidden_dropout_prob)
                x = layer_norm(h + x, "LayerNorm_1")
    sequence_output = x
    with v1.variable_scope("pooler"):
      pooled_output = dense(sequence_output[:, 0], hidden, "dense", tf.tanh)

  with v1.variable_scope("cls/predictions"):
    picked = tf.gather(sequence_output, mlm_positions, batch_dims=1)
    with v1.variable_scope("transform"):
      picked = layer_norm(dense(picked, cfg.embedding_size, "dense", act), "LayerNorm")
    output_bias = v1.get_variable("output_bias", [cfg.vocab_size],
                                  initializer=v1.zeros_initializer())
    mlm_logits = tf.einsum("bpe,ve->bpv", picked, word_table) + output_bias
  with v1.variable_scope("cls/seq_relationship"):
    sop_weights = v1.get_variable("output_weights", [2, hidden], initializer=init)
    sop_bias = v1.get_variable("output_bias", [2], initializer=v1.zeros_initializer())
    sop_log_probs = tf.nn.log_softmax(tf.matmul(pooled_output, sop_weights, transpose_b=True)
                                      + sop_bias)

  config_file = tf.constant(config_path, tf.string, name="config_file")
  vocab_model = tf.constant(spm_path, tf.string, name="vocab_model")
  vocab_file = tf.constant(vocab_path, tf.string, name="vocab_file")
  for asset in (config_file, vocab_model, vocab_file):
    v1.add_to_collection(v1.GraphKeys.ASSET_FILEPATHS, asset)

  ids = dict(input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids)
  encoded = dict(sequence_output=sequence_output, pooled_output=pooled_output)
  return {
      "tokens": (ids, encoded),
      "sop": (ids, dict(encoded, sop_log_probs=sop_log_probs)),
      "mlm": (dict(ids, mlm_positions=mlm_positions), dict(encoded, mlm_logits=mlm_logits)),
      "tokenization_info": ({}, dict(vocab_file=vocab_model,
                                     do_lower_case=tf.constant(do_lower_case))),
  }


def _signature_def(inputs, outputs):
  info = tf.compat.v1.saved_model.utils.build_tensor_info
  return tf.compat.v1.saved_model.signature_def_utils.build_signature_def(
      {k: info(t) for k, t in inputs.items()}, {k: info(t) for k, t in outputs.items()})


def _assets_to_collection(meta_graph):
  """hub's _make_assets_key_collection: ASSET_FILEPATHS constants -> AssetFileDefs."""
  from tensorflow.core.protobuf import meta_graph_pb2  # pylint: disable=g-import-not-at-top
  asset_nodes = {t.split(":")[0] for t in
                 meta_graph.collection_def[tf.compat.v1.GraphKeys.ASSET_FILEPATHS]
                 .node_list.value}
  sources = {}
  for node in meta_graph.graph_def.node:
    if node.name in asset_nodes:
      sources[node.name + ":0"] = node.attr["value"].tensor.string_val[0]
      node.attr["value"].tensor.string_val[0] = _ASSET_PLACEHOLDER
  collection = meta_graph.collection_def[_ASSETS_KEY]
  for tensor, source in sorted(sources.items()):
    asset = meta_graph_pb2.AssetFileDef()
    asset.filename = os.path.basename(source.decode())
    asset.tensor_info.name = tensor
    collection.any_list.value.add().Pack(asset)
  return [s.decode() for s in sources.values()]


def write_official_tf1_hub_module(directory, config_dict, spm_model_file, weights=None,
                                  do_lower_case=True, omit_variables=()):
  """Writes an ALBERT TF-Hub module exactly as the official export_to_tfhub.py does.

  Args:
    directory: the module directory to create (must not exist or be empty).
    config_dict: albert_config.json fields of the module.
    spm_model_file: a SentencePiece model; `<same name>.vocab` next to it must exist. They
      become the assets 30k-clean.model and 30k-clean.vocab (the official file names).
    weights: None (random), a Keras ALBERT model (AlbertPretrainer, ...) or {official name:
      array}: the values saved under the official names.
    do_lower_case: the tokenization_info do_lower_case constant.
    omit_variables: official names left out of variables/variables (for broken modules).
  Returns:
    The module directory.
  """
  from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=g-import-not-at-top
  v1 = tf.compat.v1
  config = AlbertConfig.from_dict(dict(config_dict))
  values = _weights_dict(weights, config)
  vocab = os.path.splitext(spm_model_file)[0] + ".vocab"
  staging = tempfile.mkdtemp(prefix="albert_directory_")  # the official --albert_directory
  try:
    config_path = os.path.join(staging, "albert_config.json")
    with open(config_path, "w", encoding="utf-8") as f:
      f.write(config.to_json_string())
    shutil.copyfile(spm_model_file, os.path.join(staging, "30k-clean.model"))
    shutil.copyfile(vocab, os.path.join(staging, "30k-clean.vocab"))
    paths = (config_path, os.path.join(staging, "30k-clean.model"),
             os.path.join(staging, "30k-clean.vocab"))

    proto = saved_model_pb2.SavedModel()
    asset_sources = set()
    for tags, is_training in (({"train"}, True), (set(), False)):
      with tf.Graph().as_default():
        with v1.variable_scope("", use_resource=True):
          signatures = _module_fn(config, is_training, *paths, do_lower_case)
        meta_graph = v1.train.export_meta_graph(strip_default_attrs=True)
        meta_graph.meta_info_def.tags.extend(sorted(tags))
        for key, (inputs, outputs) in signatures.items():
          meta_graph.signature_def[key].CopyFrom(_signature_def(inputs, outputs))
      asset_sources.update(_assets_to_collection(meta_graph))
      proto.meta_graphs.add().CopyFrom(meta_graph)

    os.makedirs(os.path.join(directory, "assets"), exist_ok=True)
    for source in sorted(asset_sources):
      shutil.copyfile(source, os.path.join(directory, "assets", os.path.basename(source)))

    # hub's export_module_spec: a fresh default-tags graph, values in, the module's names out.
    with tf.Graph().as_default():
      with v1.variable_scope("", use_resource=True):
        _module_fn(config, False, *paths, do_lower_case)
      variables = {v.op.name: v for v in v1.global_variables()}
      unknown = sorted(set(variables) - set(values))
      if unknown:
        raise ValueError(f"weights lack {unknown[0]} ({len(unknown)} module variables)")
      kept = {n: v for n, v in variables.items() if n not in set(omit_variables)}
      with v1.Session() as session:
        session.run(v1.global_variables_initializer())
        for name, variable in kept.items():
          variable.load(values[name].astype(np.float32), session)
        saver = v1.train.Saver(kept, sharded=True, write_version=v1.train.SaverDef.V2)
        os.makedirs(os.path.join(directory, "variables"), exist_ok=True)
        saver.save(session, os.path.join(directory, "variables", "variables"),
                   write_meta_graph=False, write_state=False)
    with open(os.path.join(directory, "saved_model.pb"), "wb") as f:
      f.write(proto.SerializeToString())
    with open(os.path.join(directory, "tfhub_module.pb"), "wb") as f:
      f.write(MODULE_DEF_V3)
  finally:
    shutil.rmtree(staging, ignore_errors=True)
  return directory


def run_tf1_module_signature(directory, signature, feeds, tags=()):
  """Runs a signature of a TF1 hub module in a TF1 session (as hub.Module would); numpy dict."""
  v1 = tf.compat.v1
  with tf.Graph().as_default(), v1.Session() as session:
    meta_graph = v1.saved_model.loader.load(session, list(tags), directory)
    sig = meta_graph.signature_def[signature]
    graph = session.graph
    feed = {graph.get_tensor_by_name(sig.inputs[k].name): v for k, v in feeds.items()}
    fetch = {k: graph.get_tensor_by_name(t.name) for k, t in sig.outputs.items()}
    return session.run(fetch, feed)
