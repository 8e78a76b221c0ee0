"""Eval/predict batches padded to the full batch, as a TPU needs them (the official
`PaddingInputExample` with `eval_drop_remainder=True`), for any task's dataset.

A TPU program has one static shape per input, and every replica takes a batch at every step.
The last batch of an eval or predict set is short, and with several replicas the last step can
leave some replicas without any batch. `pad_batches` makes every batch exactly `batch_size`
rows (padding rows are zeros) and adds whole padding batches so that the number of batches is
a multiple of the replicas the pipeline feeds; each element carries `real`, float32 [batch]:
1 for a real example, 0 for padding. The trainer counts, weights and filters with it (loss,
streaming metrics, `num_examples`, the outputs handed to the task), so that every result is the
one of the real examples alone, in their order.

`shard_chunks` splits such a padded set between the input pipelines of one client (a TPU pod's
hosts) so that the client's results come back in input order, each example once.
"""

import numpy as np
import tensorflow as tf


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
