"""AlbertEncoder: factorized embeddings, shared transformer layers and the pooler."""

import contextlib
import threading

import tensorflow as tf
from tensorflow.python.eager import record  # pylint: disable=g-direct-tensorflow-import
import tf_keras

from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.layers import dropout as dropout_lib
from albert_tf.layers import initializers
from albert_tf.layers.attention import AlbertAttentionBlock, attention_mask_adder
from albert_tf.layers.embedding import AlbertEmbeddings
from albert_tf.layers.feedforward import AlbertFeedForwardBlock
from albert_tf.networks.sharing import make_sharing_plan, owner_scope


RECOMPUTE_MODES = ("none", "layer", "attention")

_serving_scope = threading.local()


@contextlib.contextmanager
def shared_layers_in_one_loop():
  """Inside it, inference calls (training falsy) traced by this thread run every run of
  consecutive applied layers that share all their weights (the official layout: all L) as one
  tf.while_loop: each shared weight then feeds one matmul kernel, not L of them.

  Why: with TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 in a serving process, oneDNN keeps each kernel's
  weights reordered into its blocked layout across requests (bench/peers/shared_weights.py:
  0.87-0.89x the time at ALBERT-xxlarge batch 1 x 128, AVX512-BF16). Unrolled, that is one kept
  copy per layer (ALBERT-xxlarge fp32: +9.7 GiB); in the loop, one per weight (+1.8 GiB: the
  loop's and the pooled-only last layer's). Outputs are the same; `encoder_outputs` is left out
  of the result (the loop keeps no per-layer outputs), so only callers that read
  sequence_output / pooled_output use it: the serving exports, for the models
  export/serving.py's rule picks.
  """
  previous = getattr(_serving_scope, "active", False)
  _serving_scope.active = True
  try:
    yield
  finally:
    _serving_scope.active = previous


def layer_runs(schedule, pooled_only):
  """The schedule as [(attention_index, ffn_index, count, first_token_only)]: consecutive equal
  entries merged; the pooled-only last layer (a different shape) always on its own."""
  runs = []
  for i, entry in enumerate(schedule):
    last_alone = pooled_only and i == len(schedule) - 1
    if runs and tuple(runs[-1][:2]) == tuple(entry) and not last_alone:
      runs[-1][2] += 1
    else:
      runs.append([entry[0], entry[1], 1, last_alone])
  return runs


def check_recompute(value):
  """Returns `value` if it is a recompute mode, else raises a one-line AlbertError."""
  if value not in RECOMPUTE_MODES:
    raise AlbertError(f"recompute={value!r} is invalid: expected one of "
                      f"{', '.join(RECOMPUTE_MODES)}")
  return value


def _initial_carry(variable):
  """The first running sum of a shared variable's gradient: a float32 read of it.

  Its value is never used; the gradient the recomputed layers hand down the chain of carries
  arrives here and flows to the variable. A raw read keeps the variable's own dtype under a
  mixed-precision autocast scope (`value()` first marks the variable accessed, so that
  watching tapes record the read).
  """
  variable.value()
  return tf.raw_ops.ReadVariableOp(resource=variable.handle,
                                   dtype=getattr(variable, "true_dtype", variable.dtype))


def _recompute(fn, hidden, variables, carries):
  """fn(hidden), keeping only `hidden` for the backward pass, which recomputes fn.

  The gradients of `variables` (the weights fn reads) are not handed to the tape, which would
  keep one weight-sized gradient per layer until the last layer's arrives (the shared weights
  of ALBERT-xxlarge are 0.8 GB: 8.9 GB for 12 layers). Each is added to a running sum instead,
  carried from layer to layer next to the hidden state: `carries` (one per variable, from
  `_initial_carry` or the previous recomputed layer) pass through unchanged in the forward
  pass, and the backward pass returns carry gradient + this layer's gradient.

  Args:
    fn: hidden [batch, seq_len, hidden] -> [batch, seq_len or 1, hidden].
    hidden: fn's input.
    variables: the trainable variables fn reads.
    carries: one float32 tensor per variable.
  Returns:
    (fn(hidden), the carries to hand to the next layer that uses these variables).
  """

  @tf.custom_gradient
  def run(h, *carry_in):
    with record.stop_recording():
      output = fn(h)
    carry_out = [tf.identity(c) for c in carry_in]

    def grad(d_output, *d_carry, variables=None):  # pylint: disable=redefined-outer-name
      h_again = tf.identity(h)
      if not tf.executing_eagerly():
        # A data dependency on the incoming gradient, so that the recomputation runs in the
        # backward pass (XLA ignores control dependencies), as tf.recompute_grad does.
        first = tf.reduce_max(tf.reshape(d_output, [-1])[:1])
        flag = tf.cast(first, tf.bool)
        h_again += tf.cast(tf.where(flag == flag, 0.0, float("nan")), h.dtype)
      with tf.GradientTape() as tape:
        tape.watch(h_again)
        output_again = fn(h_again)
      # Differentiated with the negated incoming gradient and summed with a subtraction:
      # grappler's arithmetic optimizer merges chains of additions into one AddN, which would
      # hold every layer's gradient again. Negation is exact, so the sums are unchanged.
      grads = tape.gradient(output_again, [h_again] + list(variables_read),
                            output_gradients=-d_output,
                            unconnected_gradients=tf.UnconnectedGradients.ZERO)
      sums = [c - tf.cast(g, c.dtype) for c, g in zip(d_carry, grads[1:])]
      return [-grads[0]] + sums, [None] * len(variables or [])

    return [output] + carry_out, grad

  variables_read = list(variables)
  outputs = run(hidden, *carries)
  return outputs[0], list(outputs[1:])


def _block_name(kind, owner):
  # Keras layer names cannot hold "/", so the TF1 scope is flattened.
  return owner_scope(owner).replace("/", "_") + "_" + kind


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertEncoder(tf_keras.Model):
  """The ALBERT encoder (`bert/` in official checkpoints), pooler included.

  Inputs: a dict with int tensors [batch, seq_len]:
    input_ids, input_mask (1 = real token), segment_ids (token type).
  Outputs: a dict with
    sequence_output [batch, seq_len, hidden]: the last layer.
    pooled_output [batch, hidden]: tanh(dense(first token of sequence_output)).
    encoder_outputs: list of L * K tensors [batch, seq_len, hidden], one per applied inner layer
      (left out for inference calls under `shared_layers_in_one_loop`).
    embedding_output [batch, seq_len, embedding_size]: after embedding LayerNorm/dropout.
  Tensors are in the compute dtype of the mixed-precision policy.

  `call(..., pooled_only=True)` is for heads that read only the pooled output (classification,
  multiple choice): the last inner layer then runs for the first token alone (its keys and values
  still see every token), which gives the same pooled output for about 1/L less work;
  sequence_output and the last encoder output are then [batch, 1, hidden].

  `recompute` trades compute for activation memory in training (`training=True`):
    "none": the backward pass reads the activations the forward pass stored (L * K layers' worth:
      attention scores and probabilities [batch, heads, seq_len, seq_len], FFN activations
      [batch, seq_len, intermediate], ...).
    "layer": only each transformer layer's input [batch, seq_len, hidden] is kept; the backward
      pass recomputes the layer (attention + FFN) from it, one layer at a time.
    "attention": only the attention block is recomputed (its [batch, heads, seq_len, seq_len]
      tensors are the part that grows with seq_len squared); the FFN keeps its activations.
  In both recompute modes the recomputed blocks' weight gradients are also summed layer by layer
  as the backward pass produces them, instead of one weight-sized gradient per applied layer
  being held until the last arrives (for xxlarge that alone is ~8 GB).
  Outputs and gradients are the same in every mode: in training, every layer's dropout masks
  come from seeds drawn once per call (`tf.random.set_seed` makes them repeatable), outside the
  recomputed part. Set it before the first traced call (a traced step keeps the mode it saw).
  """

  def __init__(self, config, recompute="none", **kwargs):
    kwargs.setdefault("name", "encoder")
    super().__init__(**kwargs)
    if isinstance(config, dict):
      config = AlbertConfig.from_dict(config)
    self.config = config
    self.recompute = recompute
    self.sharing_plan = make_sharing_plan(config)
    init = lambda: initializers.truncated_normal(config.initializer_range)
    self.embeddings = AlbertEmbeddings(
        vocab_size=config.vocab_size, embedding_size=config.embedding_size,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, dropout_rate=config.hidden_dropout_prob,
        initializer_range=config.initializer_range, name="embeddings")
    # The official code projects only when the widths differ, with no activation.
    self.embedding_projection = None
    if config.embedding_size != config.hidden_size:
      self.embedding_projection = tf_keras.layers.Dense(
          config.hidden_size, kernel_initializer=init(), name="embedding_hidden_mapping_in")
    self.attention_blocks = [
        AlbertAttentionBlock(
            hidden_size=config.hidden_size, num_attention_heads=config.num_attention_heads,
            attention_probs_dropout_prob=config.attention_probs_dropout_prob,
            hidden_dropout_prob=config.hidden_dropout_prob,
            initializer_range=config.initializer_range, name=_block_name("attention", owner))
        for owner in self.sharing_plan.attention_owners]
    self.ffn_blocks = [
        AlbertFeedForwardBlock(
            hidden_size=config.hidden_size, intermediate_size=config.intermediate_size,
            hidden_act=config.hidden_act, hidden_dropout_prob=config.hidden_dropout_prob,
            initializer_range=config.initializer_range, name=_block_name("ffn", owner))
        for owner in self.sharing_plan.ffn_owners]
    self.pooler = tf_keras.layers.Dense(config.hidden_size, activation="tanh",
                                        kernel_initializer=init(), name="pooler")
    self._build_all()

  def _build_all(self):
    """Creates every variable now, so checkpoints load before the first call."""
    self.embeddings.build(None)
    if self.embedding_projection is not None:
      self.embedding_projection.build([None, self.config.embedding_size])
    for block in self.attention_blocks + self.ffn_blocks:
      block.build(None)
    self.pooler.build([None, self.config.hidden_size])
    self.built = True

  @property
  def recompute(self):
    """The recompute mode: "none", "layer" or "attention" (settable)."""
    return self._recompute

  @recompute.setter
  def recompute(self, value):
    self._recompute = check_recompute(value)

  def _transformer_layer(self, hidden, mask_adder, attention_index, ffn_index, seeds, training,
                         first_token_only, carries):
    """One applied inner layer (attention then FFN), recomputed as `self.recompute` says.

    hidden: [batch, seq_len, hidden]; seeds: int32 [SEEDS_PER_LAYER, 2] or None; carries: a
    dict {(kind, block index, variable index): running gradient sum}, updated in place.
    Returns [batch, seq_len, hidden] ([batch, 1, hidden] with first_token_only).
    """
    attention_block = self.attention_blocks[attention_index]
    ffn_block = self.ffn_blocks[ffn_index]

    def attention(h):
      return attention_block(h, mask_adder, training=training, first_token_only=first_token_only,
                             dropout_seeds=None if seeds is None else seeds[:2])

    def ffn(h):
      return ffn_block(h, training=training, dropout_seed=None if seeds is None else seeds[2])

    mode = self._recompute if training else "none"
    if mode == "none":
      return ffn(attention(hidden))
    blocks = [("attention", attention_index, attention_block)]
    if mode == "layer":
      blocks.append(("ffn", ffn_index, ffn_block))
    keys, variables = [], []
    for kind, index, block in blocks:
      for j, variable in enumerate(block.trainable_variables):
        key = (kind, index, j)
        if key not in carries:
          carries[key] = _initial_carry(variable)
        keys.append(key)
        variables.append(variable)
    # Only `hidden` is kept for the backward pass; the mask and seeds are captured tensors.
    fn = (lambda h: ffn(attention(h))) if mode == "layer" else attention
    hidden, new_carries = _recompute(fn, hidden, variables, [carries[k] for k in keys])
    carries.update(zip(keys, new_carries))
    return hidden if mode == "layer" else ffn(hidden)

  def embed(self, inputs, training=None):
    """The encoder's input side: embeddings, projection and the attention mask.

    inputs: dict of int [batch, seq_len] input_ids and optionally input_mask, segment_ids.
    Returns (embedding_output [batch, seq_len, embedding_size], hidden [batch, seq_len, hidden]
    (the first layer's input), mask_adder [batch, 1, 1, seq_len]).
    """
    input_ids = inputs["input_ids"]
    input_mask = inputs.get("input_mask")
    segment_ids = inputs.get("segment_ids")
    if input_mask is None:
      input_mask = tf.ones_like(input_ids)
    if segment_ids is None:
      segment_ids = tf.zeros_like(input_ids)
    embedding_output = self.embeddings(input_ids, segment_ids, training=training)
    hidden = embedding_output
    if self.embedding_projection is not None:
      hidden = self.embedding_projection(hidden)
    return embedding_output, hidden, attention_mask_adder(input_mask, hidden.dtype)

  def layer_blocks(self, layer):
    """The (attention_index, ffn_index) of each of layer `layer`'s K inner layers (0-based
    layer of num_hidden_layers), a tuple: layers with equal tuples compute the same function."""
    k = self.config.inner_group_num
    return tuple(self.sharing_plan.schedule[layer * k:(layer + 1) * k])

  def run_layer(self, hidden, mask_adder, blocks, first_token_only=False):
    """One layer for inference (no dropout): its inner layers `blocks` (from layer_blocks) in
    turn, exactly as call() runs them. hidden: [batch, seq_len, hidden]; mask_adder from embed.
    Returns [batch, seq_len, hidden] ([batch, 1, hidden] with first_token_only: the last inner
    layer for the first token alone, as call(pooled_only=True))."""
    for j, (attention_index, ffn_index) in enumerate(blocks):
      hidden = self._transformer_layer(
          hidden, mask_adder, attention_index, ffn_index, None, False,
          first_token_only=first_token_only and j == len(blocks) - 1, carries={})
    return hidden

  def call(self, inputs, training=None, pooled_only=False):
    embedding_output, hidden, mask_adder = self.embed(inputs, training=training)
    encoder_outputs = []
    schedule = self.sharing_plan.schedule
    seeds = None
    if training and (self.config.hidden_dropout_prob or self.config.attention_probs_dropout_prob):
      seeds = dropout_lib.draw_layer_seeds(len(schedule))
    if not training and getattr(_serving_scope, "active", False):
      return self._call_looped(embedding_output, hidden, mask_adder, pooled_only)
    carries = {}
    for i, (attention_index, ffn_index) in enumerate(schedule):
      hidden = self._transformer_layer(
          hidden, mask_adder, attention_index, ffn_index,
          None if seeds is None else seeds[i], training,
          first_token_only=pooled_only and i == len(schedule) - 1, carries=carries)
      encoder_outputs.append(hidden)
    pooled_output = self.pooler(hidden[:, 0, :])
    return dict(sequence_output=hidden, pooled_output=pooled_output,
                encoder_outputs=encoder_outputs, embedding_output=embedding_output)

  def _call_looped(self, embedding_output, hidden, mask_adder, pooled_only):
    """call() for inference under `shared_layers_in_one_loop`: runs of layers sharing their
    weights as tf.while_loops. hidden: [batch, seq_len, hidden] after the projection."""
    width = hidden.shape[-1]
    for attention_index, ffn_index, count, first_token_only in layer_runs(
        self.sharing_plan.schedule, pooled_only):
      layer = lambda h, a=attention_index, f=ffn_index, first=first_token_only: (
          self._transformer_layer(h, mask_adder, a, f, None, False, first_token_only=first,
                                  carries={}))
      if count == 1:
        hidden = layer(hidden)
        continue
      # parallel_iterations=1: iterations depend on each other anyway; no copies in flight.
      _, hidden = tf.while_loop(
          lambda i, h, n=count: i < n, lambda i, h: (i + 1, layer(h)), (tf.constant(0), hidden),
          shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, None, width])),
          parallel_iterations=1)
    pooled_output = self.pooler(hidden[:, 0, :])
    return dict(sequence_output=hidden, pooled_output=pooled_output,
                embedding_output=embedding_output)

  def get_config(self):
    return {"config": self.config.to_dict(), "recompute": self.recompute, "name": self.name}

  @classmethod
  def from_config(cls, config, custom_objects=None):
    return cls(AlbertConfig.from_dict(config["config"]), recompute=config.get("recompute", "none"),
               name=config.get("name", "encoder"))


def set_recompute(model, recompute):
  """Sets `recompute` on a model's AlbertEncoder: the model itself, or its `.encoder`.

  "none" is accepted (and ignored) for models without an AlbertEncoder; other modes raise
  a one-line AlbertError there.
  """
  check_recompute(recompute)
  target = model if isinstance(model, AlbertEncoder) else getattr(model, "encoder", None)
  if isinstance(target, AlbertEncoder):
    target.recompute = recompute
  elif recompute != "none":
    raise AlbertError(f"recompute={recompute!r} needs a model whose encoder is an AlbertEncoder "
                      f"(model.encoder); {type(model).__name__} has none")
