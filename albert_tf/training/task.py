"""The Task interface: everything one training objective needs, and nothing about the loop.

Pretraining (MLM + SOP), GLUE classification/regression, RACE multiple choice and SQuAD each
implement a Task; the one trainer in `albert_tf.training.trainer` runs any of them for
train / evaluate / predict on any tf.distribute strategy. The run_* scripts only turn flags into
a Task and call the trainer.

Conventions every Task follows:
  * Datasets yield `(features, labels)`: two dicts of tensors. Features are model inputs
    (`input_ids`, `input_mask`, `segment_ids`, int32 [batch, seq_len], plus task extras);
    labels are what the loss and metrics need. Datasets are already batched (per replica batch)
    and, for training, repeated.
  * The model returned by `build_model` is a tf_keras.Model taking the features dict and returning
    a dict of float32 tensors. It tracks its encoder as the attribute `encoder`, so checkpoints of
    any task can initialise any other (`tf.train.Checkpoint(model=...)` paths line up).
  * `build_losses` returns the loss averaged over the *global* batch (the trainer passes the
    global batch size) as a float32 scalar.
"""

import abc


class Task(abc.ABC):
  """One objective: model, inputs, loss, metrics, and (optionally) whole-set evaluation."""

  # Human-readable name used in logs and summaries (e.g. "pretraining", "glue/mrpc").
  name = "task"
  # The checkpoint `initialize` loads (--init_checkpoint), or None for a model trained from scratch.
  init_checkpoint = None

  @abc.abstractmethod
  def build_model(self):
    """Returns the tf_keras.Model (with an `encoder` attribute). Called inside strategy.scope()."""

  @abc.abstractmethod
  def build_inputs(self, mode, batch_size, input_context=None):
    """Returns a tf.data.Dataset of (features, labels) batches of `batch_size` (per replica).

    Args:
      mode: "train", "eval" or "predict". Train data is shuffled and repeated; eval/predict data
        is read once, in order, and the final partial batch is kept.
      batch_size: per-replica batch size.
      input_context: tf.distribute.InputContext or None; shard files per input pipeline with it.
    """

  @abc.abstractmethod
  def build_losses(self, labels, outputs, global_batch_size):
    """Returns (loss, aux): loss a float32 scalar averaged over the global batch; aux a dict of
    float32 scalars worth logging (e.g. {"mlm_loss": ..., "sop_loss": ...})."""

  def build_metrics(self, training=True):
    """Returns a list of streaming tf_keras.metrics.Metric objects (created in strategy scope)."""
    return []

  def update_metrics(self, metrics, labels, outputs):
    """Updates the metrics from `build_metrics` with one batch (runs inside the replica fn)."""

  # -- Whole-set evaluation for metrics that do not stream (Matthews corr., SQuAD F1, ...).
  def aggregate_outputs(self, state, features, labels, outputs):
    """Accumulates one eval batch (numpy dicts, already gathered from replicas) into `state`.

    Returns the new state. `state` is None on the first batch.
    """
    return state

  def reduce_outputs(self, state):
    """Turns the aggregated state into a dict of final float metrics (may be empty)."""
    return {}

  def initialize(self, model):
    """Loads an initial checkpoint into a freshly built model (e.g. --init_checkpoint)."""
