"""A plain NumPy ALBERT written from the official TF1 code's semantics, for holding the Keras model
to it; and a TF1-style writer of "official" checkpoints (graph-mode variables + Saver).

Nothing here imports albert_tf, so a bug in the package cannot hide in its own reference.
"""

import math

import numpy as np
import tensorflow as tf

TRANSFORMER = "bert/encoder/transformer/"


def group_of(layer, num_layers, num_groups):
  # The official formula, in floating point.
  return int(layer / num_layers * num_groups)


def block_scopes(cfg, layer, inner):
  """(attention scope, ffn scope) of one applied inner layer, below bert/encoder/transformer/."""
  sharing = cfg.get("sharing", "all")
  if sharing == "none":
    group = layer
  else:
    group = group_of(layer, cfg["num_hidden_layers"], cfg["num_hidden_groups"])
  shared = f"group_{group}/inner_group_{inner}"
  own = f"layer_{layer}/inner_group_{inner}"
  attention = shared if sharing in ("all", "attention", "none") else own
  ffn = shared if sharing in ("all", "ffn", "none") else own
  return attention, ffn


def make_official_weights(cfg, seed=0, heads=True, scale=0.2):
  """Random weights under the official names for a config dict (only groups actually used)."""
  rng = np.random.RandomState(seed)
  V, E, H = cfg["vocab_size"], cfg["embedding_size"], cfg["hidden_size"]
  I, P, T = cfg["intermediate_size"], cfg["max_position_embeddings"], cfg["type_vocab_size"]

  def rand(*shape):
    return (rng.standard_normal(shape) * scale).astype(np.float32)

  def ln(prefix, width):
    w[prefix + "/gamma"] = (1.0 + rand(width)).astype(np.float32)
    w[prefix + "/beta"] = rand(width)

  w = {
      "bert/embeddings/word_embeddings": rand(V, E),
      "bert/embeddings/position_embeddings": rand(P, E),
      "bert/embeddings/token_type_embeddings": rand(T, E),
  }
  ln("bert/embeddings/LayerNorm", E)
  if E != H:
    w["bert/encoder/embedding_hidden_mapping_in/kernel"] = rand(E, H)
    w["bert/encoder/embedding_hidden_mapping_in/bias"] = rand(H)
  for layer in range(cfg["num_hidden_layers"]):
    for inner in range(cfg["inner_group_num"]):
      attention, ffn = block_scopes(cfg, layer, inner)
      a = TRANSFORMER + attention + "/"
      if a + "LayerNorm/gamma" not in w:
        for part in ("query", "key", "value"):
          w[a + f"attention_1/self/{part}/kernel"] = rand(H, H)
          w[a + f"attention_1/self/{part}/bias"] = rand(H)
        w[a + "attention_1/output/dense/kernel"] = rand(H, H)
        w[a + "attention_1/output/dense/bias"] = rand(H)
        ln(a + "LayerNorm", H)
      f = TRANSFORMER + ffn + "/"
      if f + "LayerNorm_1/gamma" not in w:
        w[f + "ffn_1/intermediate/dense/kernel"] = rand(H, I)
        w[f + "ffn_1/intermediate/dense/bias"] = rand(I)
        w[f + "ffn_1/intermediate/output/dense/kernel"] = rand(I, H)
        w[f + "ffn_1/intermediate/output/dense/bias"] = rand(H)
        ln(f + "LayerNorm_1", H)
  w["bert/pooler/dense/kernel"] = rand(H, H)
  w["bert/pooler/dense/bias"] = rand(H)
  if heads:
    w["cls/predictions/transform/dense/kernel"] = rand(H, E)
    w["cls/predictions/transform/dense/bias"] = rand(E)
    ln("cls/predictions/transform/LayerNorm", E)
    w["cls/predictions/output_bias"] = rand(V)
    w["cls/seq_relationship/output_weights"] = rand(2, H)
    w["cls/seq_relationship/output_bias"] = rand(2)
  return w


def write_official_checkpoint(weights, prefix, optimizer_slots=True, global_step=1234):
  """Writes `weights` the way the official TF1 code does: graph variables and a Saver.

  With optimizer_slots, adds `<name>/adam_m` and `<name>/adam_v` as LAMB/AdamW leave them.
  """
  graph = tf.Graph()
  with graph.as_default():
    for name, value in weights.items():
      tf.compat.v1.Variable(value, name=name)
      if optimizer_slots:
        tf.compat.v1.Variable(np.zeros_like(value), name=name + "/adam_m")
        tf.compat.v1.Variable(np.ones_like(value), name=name + "/adam_v")
    if global_step is not None:
      tf.compat.v1.Variable(np.int64(global_step), name="global_step")
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session(graph=graph) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      return saver.save(sess, prefix)


# ------------------------------------------------------------------ forward pass
def random_array(rng, *shape):
  """float32 N(0, 0.5) values of `shape`, for layer weights and inputs."""
  return rng.normal(0.0, 0.5, size=shape).astype(np.float32)


def gelu(x):
  return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


ACTS = {"gelu": gelu, "gelu_new": gelu, "relu": lambda x: np.maximum(x, 0), "tanh": np.tanh,
        "linear": lambda x: x}


def layer_norm(x, gamma, beta, eps=1e-12):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


def softmax(x, axis=-1):
  x = x - x.max(axis=axis, keepdims=True)
  e = np.exp(x)
  return e / e.sum(axis=axis, keepdims=True)


def embeddings(input_ids, segment_ids, word, position, token_type, gamma, beta):
  """Official embedding_lookup + embedding_postprocessor (no dropout): [batch, seq, E]."""
  seq_len = input_ids.shape[1]
  x = word[input_ids] + token_type[segment_ids] + position[:seq_len][None]
  return layer_norm(x, gamma, beta)


# Keyword of attention_block -> the official variable under `.../attention_1/`.
_ATTENTION_SCOPES = {"wq": "self/query/kernel", "bq": "self/query/bias",
                     "wk": "self/key/kernel", "bk": "self/key/bias",
                     "wv": "self/value/kernel", "bv": "self/value/bias",
                     "wo": "output/dense/kernel", "bo": "output/dense/bias"}


def attention_block(x, adder, wq, bq, wk, bk, wv, bv, wo, bo, gamma, beta, num_heads):
  """Official attention_layer + output dense + residual + LayerNorm: [batch, seq, H].

  adder: [batch, 1, 1, seq], (1 - mask) * -10000 (keys only).
  """
  batch, seq_len, hidden = x.shape
  size = hidden // num_heads

  def heads(t):
    return t.reshape(batch, seq_len, num_heads, size).transpose(0, 2, 1, 3)

  q, k, v = heads(x @ wq + bq), heads(x @ wk + bk), heads(x @ wv + bv)
  scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + adder
  context = (softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(batch, seq_len, hidden)
  return layer_norm(context @ wo + bo + x, gamma, beta)


def feed_forward_block(x, w_in, b_in, w_out, b_out, gamma, beta, act):
  """Official ffn_1 (intermediate dense + activation, output dense) + residual + LayerNorm_1."""
  return layer_norm(act(x @ w_in + b_in) @ w_out + b_out + x, gamma, beta)


def forward(w, cfg, input_ids, input_mask, segment_ids, masked_lm_positions=None):
  """Float64 forward pass of the official model. Returns the same keys as AlbertPretrainer."""
  w = {k: v.astype(np.float64) for k, v in w.items()}
  act = ACTS[cfg["hidden_act"]]
  N = cfg["num_attention_heads"]
  x = embeddings(input_ids, segment_ids, w["bert/embeddings/word_embeddings"],
                 w["bert/embeddings/position_embeddings"], w["bert/embeddings/token_type_embeddings"],
                 w["bert/embeddings/LayerNorm/gamma"], w["bert/embeddings/LayerNorm/beta"])
  embedding_output = x
  if "bert/encoder/embedding_hidden_mapping_in/kernel" in w:
    x = x @ w["bert/encoder/embedding_hidden_mapping_in/kernel"] + \
        w["bert/encoder/embedding_hidden_mapping_in/bias"]
  adder = (1.0 - input_mask.astype(np.float64))[:, None, None, :] * -10000.0
  all_layers = []
  for layer in range(cfg["num_hidden_layers"]):
    for inner in range(cfg["inner_group_num"]):
      attention, ffn = block_scopes(cfg, layer, inner)
      a = TRANSFORMER + attention + "/attention_1/"
      ln1 = TRANSFORMER + attention + "/LayerNorm/"
      x_att = attention_block(
          x, adder, num_heads=N,
          **{name: w[a + scope] for name, scope in _ATTENTION_SCOPES.items()},
          gamma=w[ln1 + "gamma"], beta=w[ln1 + "beta"])
      f = TRANSFORMER + ffn + "/ffn_1/intermediate/"
      ln2 = TRANSFORMER + ffn + "/LayerNorm_1/"
      x = feed_forward_block(x_att, w[f + "dense/kernel"], w[f + "dense/bias"],
                             w[f + "output/dense/kernel"], w[f + "output/dense/bias"],
                             w[ln2 + "gamma"], w[ln2 + "beta"], act)
      all_layers.append(x)
  pooled = np.tanh(x[:, 0] @ w["bert/pooler/dense/kernel"] + w["bert/pooler/dense/bias"])
  result = dict(sequence_output=x, pooled_output=pooled, encoder_outputs=all_layers,
                embedding_output=embedding_output)
  if "cls/predictions/output_bias" in w:
    h = x if masked_lm_positions is None else np.take_along_axis(
        x, masked_lm_positions[:, :, None], axis=1)
    h = act(h @ w["cls/predictions/transform/dense/kernel"] +
            w["cls/predictions/transform/dense/bias"])
    h = layer_norm(h, w["cls/predictions/transform/LayerNorm/gamma"],
                   w["cls/predictions/transform/LayerNorm/beta"])
    result["mlm_logits"] = (h @ w["bert/embeddings/word_embeddings"].T +
                            w["cls/predictions/output_bias"])
    result["sop_logits"] = (pooled @ w["cls/seq_relationship/output_weights"].T +
                            w["cls/seq_relationship/output_bias"])
  return result


def masked_lm_loss(logits, label_ids, label_weights):
  """The official MLM loss: sum(w * CE) / (sum(w) + 1e-5)."""
  logits = logits.reshape(-1, logits.shape[-1]).astype(np.float64)
  log_probs = logits - logits.max(-1, keepdims=True)
  log_probs = log_probs - np.log(np.exp(log_probs).sum(-1, keepdims=True))
  per_example = -log_probs[np.arange(len(log_probs)), label_ids.reshape(-1)]
  weights = label_weights.reshape(-1)
  return (weights * per_example).sum() / (weights.sum() + 1e-5)
