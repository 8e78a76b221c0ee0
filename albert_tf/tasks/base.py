"""The Task interface: everything one objective needs, and nothing about the loop.

Pretraining (MLM + SOP), GLUE classification/regression, RACE multiple choice and SQuAD each
implement a Task. The one trainer (`albert_tf.training.trainer`) runs any of them for
train / evaluate / predict on any tf.distribute strategy, and the one runner
(`albert_tf.training.runner`) strings those into the official workflow: train -> evaluate every
checkpoint -> keep the best -> predict -> export.

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
  * Whole-set evaluation (Matthews correlation, SQuAD's official F1 after n-best
    post-processing, ...) and prediction files go through `aggregate_outputs` (per batch, numpy)
    and `reduce_outputs` (once), as the model garden's `aggregate_logs` /
    `reduce_aggregated_logs`; `write_predictions` writes what prediction produced.
"""

import abc


class Task(abc.ABC):
  """One objective: model, inputs, loss, metrics, whole-set evaluation, prediction and export."""

  # Human-readable name used in logs and summaries (e.g. "pretraining", "glue/mrpc").
  name = "task"
  # The task's config (a dataclass of the official flags it needs: PretrainingConfig, GlueConfig,
  # RaceConfig, SquadConfig); the task reads it, it copies nothing out of it.
  params = None
  # The class names of a classification task, in the order of the head's rows (None otherwise):
  # checkpoints that name their classes (HF id2label) are mapped onto it.
  label_list = None
  # The evaluation result that picks model.ckpt-best (e.g. "eval_accuracy", "f1"); None: the
  # task evaluates only the latest checkpoint and keeps no best (pretraining).
  best_metric = None
  # The results an evaluation reports and writes to eval_results.txt (None: all it measured).
  eval_result_keys = None
  # How eval_results.txt closes each checkpoint's block, as the task's official script does:
  # "before" writes `best = <the best value before this checkpoint>` (run_classifier, run_race),
  # "after" writes `best <metric> = <the best value so far, this checkpoint included>` (run_squad).
  best_line = "before"
  # Whether training starts from a pretrained model (fine-tuning): trained with no initial
  # checkpoint, the model starts from random weights, which the trainer says in one line.
  fine_tunes = True

  @property
  def init_checkpoint(self):
    """The checkpoint `initialize` loads (--init_checkpoint), or None (trained from scratch)."""
    return self.params.init_checkpoint if self.params is not None else None

  @property
  def max_seq_length(self):
    """The sequence length of the model inputs (for the TFLite export), or None."""
    return self.params.max_seq_length if self.params is not None else None

  # ------------------------------------------------------------------ model and data
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

  def input_files(self, mode):
    """The record files `build_inputs(mode)` reads, in order (for naming a broken file when the
    input pipeline fails mid-run); [] when the task cannot say."""
    return []

  def num_train_examples(self):
    """How many training examples one epoch holds (for --num_train_epochs), if the task knows."""
    raise NotImplementedError(f"{self.name} cannot count its training examples; give the number "
                              "of training steps")

  def initialize(self, model):
    """Loads an initial checkpoint into a freshly built model (e.g. --init_checkpoint): its
    weights only, never an optimizer state."""

  def initial_step(self):
    """The global step a training run from `initialize` starts at: 0, a fresh step counter and
    learning-rate schedule (as the official scripts, which load only the weights)."""
    return 0

  # ------------------------------------------------------------------ loss and metrics
  @abc.abstractmethod
  def build_losses(self, labels, outputs, global_batch_size):
    """Returns (loss, aux): loss a float32 scalar averaged over the global batch; aux a dict of
    float32 scalars worth logging (e.g. {"mlm_loss": ..., "sop_loss": ...})."""

  def replica_batch_labels(self, labels):
    """Labels every accumulation micro-batch's loss takes from its whole replica batch.

    Args:
      labels: the replica's labels for one step, [K, b, ...] (K accumulation micro-batches).
    Returns:
      A dict of tensors added to each micro-batch's labels, so that K micro-batches give
      exactly the loss (and gradient) of one K-times batch; {} when a sum of per-example
      losses over the global batch already does (the default).
    """
    del labels
    return {}

  def build_metrics(self, training=True):
    """Returns a list of streaming tf_keras.metrics.Metric objects (created in strategy scope)."""
    return []

  def update_metrics(self, metrics, labels, outputs):
    """Updates the metrics from `build_metrics` with one batch (runs inside the replica fn)."""

  # ------------------------------------------------------------------ evaluation and prediction
  def aggregate_outputs(self, state, features, labels, outputs):
    """Accumulates one batch (numpy dicts, already gathered from replicas) into `state`.

    Evaluation passes the batch's labels, prediction passes labels=None. `state` is None on the
    first batch; returns the new state.
    """
    return state

  def reduce_outputs(self, state, mode):
    """Turns the aggregated state into (metrics, outputs).

    mode "eval": metrics are the whole-set metrics (Matthews correlation, SQuAD's official F1,
    ...; may be empty), outputs what the best checkpoint's evaluation leaves in output_dir
    through `write_predictions` (SQuAD: its answers), or None.
    mode "predict": metrics {}, outputs what `write_predictions` writes.
    """
    return {}, None

  def write_predictions(self, output_dir, outputs):
    """Writes the task's prediction files from `reduce_outputs`' outputs; returns a summary."""
    raise NotImplementedError(f"{self.name} has no prediction output")

  # ------------------------------------------------------------------ export
  def export(self, model, export_dir, precision="fp32"):
    """Writes `model` (weights loaded) as a new TF Serving version under export_dir; returns the
    version directory."""
    raise NotImplementedError(f"{self.name} has no serving export")
