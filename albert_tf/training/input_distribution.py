"""The trainer's input under a tf.distribute strategy, and what its replicas give back.

  * training: every input pipeline's share of the global batch (`DistributedInput.training`);
  * eval/predict: the whole set per pipeline, padded to full batches and, for one client with
    several pipelines (a TPU pod), sharded so that the client's results come in input order
    (`DistributedInput.evaluation`, `pad_batches`, `shard_chunks`, `keep_real`);
  * the sum and the concatenation over this client's replicas, and the barrier between workers.

Padding, as a TPU needs it (the official `PaddingInputExample` with `eval_drop_remainder=True`):
a TPU program has one static shape per input, and every replica takes a batch at every step.
The last batch of an eval or predict set is short, and with several replicas the last step can
leave some replicas without any batch. `pad_batches` makes every batch exactly `batch_size`
rows (padding rows are zeros) and adds whole padding batches so that the number of batches is
a multiple of the replicas the pipeline feeds; each element carries `real`, float32 [batch]:
1 for a real example, 0 for padding. The trainer counts, weights and filters with it (loss,
streaming metrics, `num_examples`, the outputs handed to the task), so that every result is the
one of the real examples alone, in their order.
"""

import contextlib

import numpy as np
import tensorflow as tf

from albert_tf.data import record_checks
from albert_tf.errors import AlbertError
from albert_tf.tasks.base import Task
from albert_tf.training import strategy as strategy_lib


def _empty_like(spec, full_length):
  """A 0-row tensor of `spec` (dimensions left open take `full_length`)."""
  shape = [0] + [full_length if d is None else d for d in spec.shape.as_list()[1:]]
  if spec.dtype == tf.string:
    return tf.constant(np.zeros(shape, object).astype(bytes), tf.string)
  return tf.zeros(shape, spec.dtype)


def pad_batches(dataset, batch_size, num_replicas=1, full_length=1):
  """Pads each batch of `dataset` to `batch_size` rows and the batch count to a multiple of
  `num_replicas`.

  Args:
    dataset: batches of at most `batch_size` rows: a tuple (features, labels) (or
      (features,)), or one structure (then taken as (element,)); every tensor is [rows, ...].
    batch_size: rows per batch (per replica).
    num_replicas: replicas this pipeline feeds (each takes one batch per step).
    full_length: the length given to dimensions the spec leaves open (bucketed sequences),
      for whole padding batches.
  Returns:
    tf.data.Dataset of (*element, real): every tensor [batch_size, ...] (the batch dimension
    static), real float32 [batch_size] (1 real example, 0 padding).
  """
  if not isinstance(dataset.element_spec, tuple):
    dataset = dataset.map(lambda element: (element,))
  if num_replicas > 1:
    # Enough whole padding batches to fill the last step; windows drop what is left over.
    empty = tf.nest.map_structure(lambda s: _empty_like(s, full_length), dataset.element_spec)
    dataset = dataset.concatenate(tf.data.Dataset.from_tensors(empty).repeat(num_replicas - 1))

  def pad(*element):
    rows = tf.shape(tf.nest.flatten(element)[0])[0]

    def fill(t):
      padded = tf.pad(t, [[0, batch_size - rows]] + [[0, 0]] * (t.shape.rank - 1))
      return tf.ensure_shape(padded, [batch_size] + t.shape.as_list()[1:])
    real = tf.ensure_shape(tf.pad(tf.ones([rows], tf.float32), [[0, batch_size - rows]]),
                           [batch_size])
    return tuple(tf.nest.map_structure(fill, element)) + (real,)

  dataset = dataset.map(pad)
  if num_replicas > 1:
    dataset = dataset.window(num_replicas, drop_remainder=True).flat_map(
        lambda *window: tf.data.Dataset.zip(window))
  return dataset


def shard_chunks(dataset, num_pipelines, pipeline_id, local_replicas):
  """Input pipeline `pipeline_id`'s share of `dataset`'s batches: chunks pipeline_id,
  pipeline_id + num_pipelines, ... of `local_replicas` consecutive batches.

  Step k of a distributed loop takes one chunk from each pipeline, in pipeline order, and hands
  its batches to the pipeline's replicas in order: the replicas, in device order, then hold
  batches k * N .. k * N + N - 1 (N = num_pipelines * local_replicas). `dataset` must hold a
  multiple of N batches (`pad_batches` with num_replicas=N), so that every pipeline runs the
  same number of steps.
  """
  def mine(index, element):  # pylint: disable=unused-argument
    return tf.equal((index // local_replicas) % num_pipelines, pipeline_id)
  return dataset.enumerate().filter(mine).map(lambda index, element: element)


def keep_real(structure, real):
  """The rows of a numpy structure (one batch gathered from the replicas) whose `real` is 1;
  values without that many rows (scalars) are left as they are."""
  keep = np.asarray(real) > 0

  def take(value):
    value = np.asarray(value)
    return value[keep] if value.ndim and value.shape[0] == keep.shape[0] else value
  return tf.nest.map_structure(take, structure)


def check_batch_size(flag, batch_size, replicas, micro_batches=1):
  """AlbertError unless `batch_size` splits evenly into `replicas` x `micro_batches`."""
  if batch_size % (replicas * micro_batches):
    extra = f" x --gradient_accumulation_steps ({micro_batches})" if micro_batches > 1 else ""
    raise AlbertError(f"{flag}={batch_size} is invalid: must be a multiple of the replicas "
                      f"({replicas}){extra}")


class DistributedInput:
  """A task's batches for `strategy`'s replicas, and their results gathered back.

  Args:
    strategy: the tf.distribute strategy.
    task: an `albert_tf.tasks.base.Task` (its `build_inputs` makes every pipeline).
    pad_eval_batches: pad eval/predict batches to the full batch (`pad_batches`), the padding
      rows masked out of every result.
  """

  def __init__(self, strategy, task, pad_eval_batches=False):
    self.strategy = strategy
    self.task = task
    self.pad_eval_batches = bool(pad_eval_batches)
    self.num_workers = strategy_lib.num_workers(strategy)
    self._train_pipelines = {}  # (global batch, input pipeline id) -> the task's train dataset

  def training(self, train_batch_size, skip=0):
    """Every input pipeline's training batches, through `distribute_datasets_from_function`.

    Each input pipeline (one per worker, or per host of a TPU pod: `tf.distribute.InputContext`)
    reads its share of the files, or of the records when files are fewer than pipelines (the
    task's `build_inputs`), in batches of its local replicas' share of the global batch:
    parsing and checking big batches is cheaper (bench/speed/input_pipeline.py --per_replica_parsing
    times per-replica batches). Each batch is cut into one element of the
    per-replica batch per local replica (replica r takes the r-th slice), shapes kept static;
    the replica step cuts it into its accumulation micro-batches (`steps.micro_batches`).

    Args:
      train_batch_size: the global batch.
      skip: batches each pipeline skips first (a resume goes on where the saved run stopped).
    Returns:
      (distributed dataset, element spec of a pipeline's batches). A second call (the resume's
      skip) reuses the task's pipelines of the first (its file checks run once).
    """
    specs = []
    built = self._train_pipelines

    def dataset_fn(ctx):
      per_replica = ctx.get_per_replica_batch_size(train_batch_size)
      local_replicas = ctx.num_replicas_in_sync // ctx.num_input_pipelines
      key = (train_batch_size, ctx.input_pipeline_id)
      if key not in built:  # (made on the pipeline's host: dataset_fn runs there)
        built[key] = self.task.build_inputs("train", per_replica * local_replicas, ctx)
      dataset = built[key]
      specs.append(dataset.element_spec)
      if skip:
        dataset = dataset.skip(skip)
      if local_replicas > 1:
        dataset = dataset.rebatch(per_replica, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
      return dataset

    dataset = self.strategy.distribute_datasets_from_function(
        dataset_fn, options=self._train_input_options())
    return dataset, specs[0]

  def _train_input_options(self):
    """Replicas on CPUs (logical devices of one CPU) have nothing to fetch their elements to:
    the per-device prefetch of TensorFlow's MultiDeviceIterator only costs host work there
    (bench/speed/input_pipeline.py, 8 logical devices: 0.70x -> 0.84x the client pipeline's
    examples/s). GPUs and TPUs keep it (it overlaps the copies with the step)."""
    try:
      devices = list(self.strategy.extended.worker_devices)
    except (RuntimeError, NotImplementedError, AttributeError):  # the default strategy
      return None
    if devices and all("device:CPU" in tf.DeviceSpec.from_string(d).to_string()
                       for d in devices):
      return tf.distribute.InputOptions(experimental_fetch_to_device=False)
    return None

  def evaluation(self, mode, global_batch_size):
    """Eval/predict batches through `distribute_datasets_from_function`.

    Every input pipeline reads the whole set in order (the task's `build_inputs` without an
    input context), and then:
      * one client, several pipelines (a TPU pod: one pipeline per host; its client sees every
        core's results): pipeline p keeps chunks p, p + P, p + 2P, ... of R consecutive batches
        (P pipelines, R replicas each). Step k's replicas, in device order, then hold batches
        kN .. kN + N - 1 (N = P * R): the client gets each example once, in input order. Every
        pipeline must run the same number of steps, so the set is padded to a multiple of N
        batches (`pad_batches`), whatever `pad_eval_batches` says;
      * a client per worker (MultiWorkerMirroredStrategy): each worker evaluates and predicts
        the whole set on its own replicas, since its local results are all it can write; the
        sums and counts are its own replicas' (`local_sum`), so nothing counts twice;
      * one pipeline: the whole set, padded to a multiple of its replicas with
        `pad_eval_batches`.
    Args:
      mode: "eval" or "predict".
      global_batch_size: the global batch (--eval_batch_size, --predict_batch_size).
    Returns:
      (distributed dataset, element spec of a pipeline's batches, padded: elements end with
      `real`, float32 [batch]).
    """
    check_batch_size(f"--{mode}_batch_size", global_batch_size,
                     self.strategy.num_replicas_in_sync)
    num_replicas = self.strategy.num_replicas_in_sync
    one_client = self._client_sees_every_replica()
    made = []

    def dataset_fn(ctx):
      batch_size = ctx.get_per_replica_batch_size(global_batch_size)
      local_replicas = num_replicas // ctx.num_input_pipelines
      shard = one_client and ctx.num_input_pipelines > 1
      dataset = self.task.build_inputs(mode, batch_size)
      padded = self.pad_eval_batches or shard
      if padded:
        dataset = pad_batches(
            dataset, batch_size, num_replicas if shard else local_replicas,
            full_length=getattr(self.task, "max_seq_length", None) or 1)
      if shard:
        dataset = shard_chunks(dataset, ctx.num_input_pipelines, ctx.input_pipeline_id,
                               local_replicas)
      made.append((dataset.element_spec, padded))
      return dataset
    dataset = self.strategy.distribute_datasets_from_function(dataset_fn)
    return (dataset,) + made[0]

  def _client_sees_every_replica(self):
    """False when each worker runs its own client (MultiWorkerMirroredStrategy: its local
    results are its own replicas'); True for one device, MirroredStrategy and a TPU (a pod's
    one client sees every host's cores)."""
    try:
      return len(self.strategy.extended.worker_devices) == self.strategy.num_replicas_in_sync
    except (RuntimeError, NotImplementedError, AttributeError):  # the default strategy
      return True

  def local_sum(self, per_replica):
    """The sum over this client's replicas of a per-replica numpy-convertible value."""
    return sum(np.asarray(v) for v in self.strategy.experimental_local_results(per_replica))

  def local_concat(self, per_replica):
    """A per-replica structure as numpy arrays: this client's replicas' rows concatenated in
    replica order (scalars: the first replica's)."""
    def concat(value):
      parts = [np.asarray(p) for p in self.strategy.experimental_local_results(value)]
      if not parts[0].ndim:
        return parts[0]
      # A replica left without examples at the end of an unpadded set holds a 0-row batch
      # (whose bucketed length may differ from the others').
      return np.concatenate([p for p in parts if len(p)] or parts[:1], axis=0)
    return tf.nest.map_structure(concat, per_replica)

  def barrier(self):
    """Returns when every worker has reached it (multi-worker runs; else at once): what the
    chief wrote before it, the others can read after it."""
    if self.num_workers <= 1:
      return
    self.strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(
        tf.distribute.ReduceOp.SUM, tf.constant(1.0)))

  @contextlib.contextmanager
  def errors_explained(self, mode):
    """Turns an input pipeline failure (a truncated or corrupt record file, a record of another
    length, an id outside the vocabulary) into a one-line AlbertError naming the file."""
    try:
      yield
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError,
            tf.errors.OutOfRangeError, UnicodeDecodeError) as e:
      # (UnicodeDecodeError: TensorFlow fails to decode its own message about a record that
      # is no tf.Example at all.)
      explained = record_checks.explain_input_error(e, self.task.input_files(mode))
      if explained is None:
        raise
      raise explained from None

  def run_eval_steps(self, eval_step, dataset, padded, max_steps=None):
    """Runs `eval_step` (`steps.eval_step`) over `dataset` (from `evaluation`; `padded`:
    elements end with `real`). Returns (sums, example count, the task's aggregate_outputs
    state over the real examples), over this client's replicas."""
    wants_outputs = type(self.task).aggregate_outputs is not Task.aggregate_outputs
    totals, examples, state = {}, 0, None
    with self.errors_explained("eval"):
      for i, element in enumerate(dataset):
        if max_steps and i >= max_steps:
          break
        sums, count, outputs = eval_step(*element)
        examples += int(self.local_sum(count))
        for n, v in sums.items():
          totals[n] = totals.get(n, 0.0) + float(self.local_sum(v))
        if wants_outputs:
          batch = self.local_concat((element[0], element[1], outputs))
          if padded:  # the task sees the real examples only
            batch = keep_real(batch, self.local_concat(element[-1]))
          state = self.task.aggregate_outputs(state, *batch)
    return totals, examples, state
