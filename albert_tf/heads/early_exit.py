"""Internal classifiers for patience-based early exit (PABEE, Zhou et al. 2020, "BERT Loses
Patience"): one classification head after each layer application but the last.

A classifier with early exit has L heads: the L - 1 internal ones here (layers 1 .. L-1, named
`layer_1` .. `layer_{L-1}`; official-style TF1 names `early_exit/layer_{l}/output_weights`,
`.../output_bias`) and the ordinary classification head, which reads the last layer. Every head
reads the pooled output of its layer: the encoder's one pooler (tanh dense on the first token),
shared by all layers as PABEE does with ALBERT.
"""

import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf.heads.classification import ClassificationHead

# The stopping rules an early-exit classifier knows (PABEE's patience rule).
RULES = ("patience",)


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class EarlyExitClassifiers(tf_keras.layers.Layer):
  """The internal classifiers of layers 1 .. num_layers - 1 (1-based), each dropout + dense.

  Attributes `layer_1` .. `layer_{num_layers-1}` (ClassificationHead: weights [num_classes,
  hidden] as the official `output_weights`); `heads` lists them in layer order.

  Call args:
    pooled_outputs: a list of num_layers - 1 tensors [batch, hidden], layer 1 first.
    training: applies each head's dropout.
  Returns:
    a list of float32 [batch, num_classes], one per internal layer.
  """

  def __init__(self, hidden_size, num_classes, num_layers, dropout_rate=0.1,
               initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.num_classes = num_classes
    self.num_layers = num_layers
    self.dropout_rate = dropout_rate
    self.initializer_range = initializer_range
    for layer in range(1, num_layers):
      setattr(self, f"layer_{layer}", ClassificationHead(
          hidden_size, num_classes, dropout_rate=dropout_rate,
          initializer_range=initializer_range, name=f"layer_{layer}"))

  @property
  def heads(self):
    """The internal heads, layer 1 first (num_layers - 1 of them)."""
    return [getattr(self, f"layer_{layer}") for layer in range(1, self.num_layers)]

  def build(self, input_shape=None):
    for head in self.heads:
      head.build(None)
    super().build(input_shape)

  def call(self, pooled_outputs, training=None):
    return [head(pooled, training=training) for head, pooled in zip(self.heads, pooled_outputs)]

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, num_classes=self.num_classes,
                  num_layers=self.num_layers, dropout_rate=self.dropout_rate,
                  initializer_range=self.initializer_range)
    return config


def layer_loss_weights(num_layers):
  """PABEE's training loss weights: layer l (1-based) weighs l / (1 + 2 + ... + L).

  Returns float32 [num_layers], summing to 1: the loss is the weighted average of the layers'
  losses, deeper layers (which see more) counting more.
  """
  weights = np.arange(1, num_layers + 1, dtype=np.float32)
  return weights / weights.sum()


def weighted_layer_losses(loss_fn, labels, layer_logits):
  """PABEE's per-example training loss: the layers' losses weighted by layer_loss_weights.

  Args:
    loss_fn: per-example loss of [n] labels under [n, num_classes] logits -> float32 [n].
    labels: [batch] (or [batch, 1]) class indices or regression targets.
    layer_logits: float32 [batch, num_layers, num_classes], every layer's logits.
  Returns:
    float32 [batch].
  """
  num_layers = layer_logits.shape[1]
  repeated = tf.repeat(tf.reshape(labels, [-1]), num_layers)  # [batch * L], example-major
  losses = tf.reshape(loss_fn(repeated, tf.reshape(layer_logits, [-1, layer_logits.shape[2]])),
                      [-1, num_layers])
  return tf.reduce_sum(losses * layer_loss_weights(num_layers), axis=1)


def patience_exit_reference(layer_logits, patience, is_regression=False,
                            regression_threshold=0.1):
  """The patience rule on every layer's logits at once (NumPy): what the early-exit loop answers.

  An example exits at the first layer l whose prediction has been unchanged for `patience`
  layers (classification: the same argmax as layers l - patience .. l - 1; regression: each
  step's change below `regression_threshold`), else at the last layer. Used to sweep patience
  from one full-depth pass (bench/speed/early_exit.py) and to check the loop.

  Args:
    layer_logits: [batch, num_layers, num_classes].
    patience: int >= 1.
  Returns:
    (exit_layer int [batch], 1-based; logits [batch, num_classes] of that layer).
  """
  layer_logits = np.asarray(layer_logits)
  batch, num_layers = layer_logits.shape[:2]
  if is_regression:
    values = layer_logits[:, :, 0]
    same = np.abs(np.diff(values, axis=1)) < regression_threshold
  else:
    predictions = layer_logits.argmax(-1)
    same = predictions[:, 1:] == predictions[:, :-1]
  exit_layer = np.full([batch], num_layers, np.int64)
  for b in range(batch):
    count = 0
    for layer in range(1, num_layers):  # 0-based layer index; same[b, layer - 1]: vs the previous
      count = count + 1 if same[b, layer - 1] else 0
      if count >= patience and layer < num_layers - 1:
        exit_layer[b] = layer + 1
        break
  return exit_layer, layer_logits[np.arange(batch), exit_layer - 1]
