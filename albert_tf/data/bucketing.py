"""Length bucketing: fine-tuning batches padded to a bucket length, not to --max_seq_length.

Feature records are written padded to --max_seq_length (as the official scripts write them), and
most GLUE/RACE/SQuAD examples are much shorter. Every position past the longest real token of a
batch is padding that the attention mask hides, so cutting it off changes no output at a real
position. Here a batch's sequence dimension is cut to the smallest *bucket boundary* that holds
its longest example: the shapes a model sees are the few boundaries (XLA compiles one program per
boundary), never arbitrary lengths.

Two steps, both on batches of parsed features:
  * `trim_batch_to_bucket` (evaluation, prediction and training): same batches, same order, the
    same outputs as padding to the maximum (to float rounding).
  * `sort_windows_by_length` (evaluation and prediction): examples sorted by length within
    large windows, batched, then trimmed; the tasks put the outputs back in example order (by
    `example_index`, or SQuAD's unique_ids), so results are those of padding to the maximum.
  * `group_by_length` (training): within each window of `window_batches` consecutive
    batches of the shuffled stream, examples are sorted by length and regrouped, and the
    regrouped batches are shuffled again. A window holds exactly the examples the unbucketed
    stream would give its batches, so every epoch trains on the same examples; only the
    composition of a batch changes (examples of similar length together, so short batches
    really are short).

Bucket boundaries (`parse_bucket_boundaries`) come from the scripts' --bucket_boundaries.
"""

from albert_tf.errors import AlbertError

# Features with a sequence axis (the last one) that trimming cuts; others pass unchanged.
SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids", "p_mask")
# Examples an evaluation window sorts by length (evaluation sets are small: most fit in one).
EVAL_WINDOW_EXAMPLES = 4096
# Batches a training window regroups by length (the larger, the more alike the lengths in a
# batch; the examples still cross the window in shuffled order).
WINDOW_BATCHES = 16


def default_bucket_boundaries(max_seq_length):
  """Boundaries of --bucket_boundaries=auto: every 32 tokens up to 128, every 64 up to 256, then
  every 128, ending at max_seq_length (e.g. 128 -> 32,64,96,128; 512 -> 32,...,128,192,256,384,
  512). Few enough programs for XLA, fine enough that a bucket wastes < 1/3 of its length."""
  boundaries, length = [], 32
  while length < max_seq_length:
    boundaries.append(length)
    length += 32 if length < 128 else 64 if length < 256 else 128
  return tuple(boundaries) + (int(max_seq_length),)


def parse_bucket_boundaries(value, max_seq_length, on_tpu=False):
  """--bucket_boundaries -> an increasing tuple of lengths ending at max_seq_length, or None
  (pad every batch to max_seq_length).

  value: "auto" (the default: `default_bucket_boundaries` on CPU/GPU, None on TPU, whose
  programs need one static shape per input), "none"/"off", or comma-separated lengths
  (max_seq_length is added as the last bucket if missing).
  """
  text = str(value if value is not None else "auto").strip().lower()
  if text in ("none", "off", "false", "0", ""):
    return None
  if text == "auto":
    return None if on_tpu else default_bucket_boundaries(max_seq_length)
  if on_tpu:
    raise AlbertError(f"--bucket_boundaries={value} is not supported on TPU or with "
                      "--xla_whole_step (input shapes must be static): use "
                      "--bucket_boundaries=none")
  try:
    lengths = [int(part) for part in text.split(",") if part.strip()]
  except ValueError:
    raise AlbertError(f"--bucket_boundaries={value} is invalid: expected auto, none or "
                      "comma-separated lengths such as 64,128") from None
  if not lengths or any(b <= 0 for b in lengths) or lengths != sorted(set(lengths)):
    raise AlbertError(f"--bucket_boundaries={value} is invalid: expected increasing positive "
                      "lengths such as 64,128")
  if lengths[-1] > max_seq_length:
    raise AlbertError(f"--bucket_boundaries={value} is invalid: {lengths[-1]} exceeds "
                      f"--max_seq_length={max_seq_length}")
  if lengths[-1] < max_seq_length:
    lengths.append(int(max_seq_length))
  return tuple(lengths)


def example_lengths(input_mask):
  """Real tokens per example: input_mask [batch, seq] or [batch, choices, seq] -> [batch]
  (multiple choice: the longest choice)."""
  import tensorflow as tf  # lazy: cli/finetuning_flags.py parses boundaries first
  lengths = tf.reduce_sum(tf.cast(input_mask, tf.int32), axis=-1)
  while lengths.shape.rank > 1:
    lengths = tf.reduce_max(lengths, axis=-1)
  return lengths


def bucket_length(input_mask, boundaries):
  """The smallest boundary that holds the batch's longest example (a scalar int32)."""
  import tensorflow as tf  # lazy: cli/finetuning_flags.py parses boundaries first
  longest = tf.reduce_max(example_lengths(input_mask))
  boundaries = tf.constant(boundaries, tf.int32)
  index = tf.reduce_sum(tf.cast(boundaries < longest, tf.int32))
  return boundaries[tf.minimum(index, tf.size(boundaries) - 1)]


def trim_batch_to_bucket(features, boundaries):
  """features: dict of [batch, (choices,) seq] tensors -> the same with seq cut to the bucket
  length of the batch (`SEQUENCE_FEATURES` only)."""
  length = bucket_length(features["input_mask"], boundaries)
  return {name: value[..., :length] if name in SEQUENCE_FEATURES else value
          for name, value in features.items()}


def trim_element(element, boundaries):
  """`trim_batch_to_bucket` on a dataset element: a features dict or (features, labels)."""
  if isinstance(element, tuple):
    return (trim_batch_to_bucket(element[0], boundaries),) + tuple(element[1:])
  return trim_batch_to_bucket(element, boundaries)


def group_by_length(dataset, batch_size, seed=None, window_batches=WINDOW_BATCHES):
  """Training: regroups a dataset of full parsed batches (features dict, or (features, labels))
  so that each batch holds examples of similar length.

  Reads `window_batches` batches at a time, sorts their examples by length, cuts them into
  batches again and shuffles those. Returns a dataset of batches of `batch_size` (untrimmed:
  `trim_element` follows).
  """
  import tensorflow as tf  # lazy: cli/finetuning_flags.py parses boundaries first

  def sort_window(*element):
    features = element[0]
    order = tf.argsort(example_lengths(features["input_mask"]), stable=True)

    def regroup(value):
      value = tf.gather(value, order)
      return tf.reshape(value, tf.concat([[window_batches, batch_size], tf.shape(value)[1:]],
                                         0))
    regrouped = tf.nest.map_structure(regroup, element)
    return regrouped if len(element) > 1 else regrouped[0]

  windows = dataset.unbatch().batch(batch_size * window_batches, drop_remainder=True)
  return windows.map(sort_window).unbatch().shuffle(window_batches, seed=seed)


def sort_windows_by_length(dataset, batch_size):
  """Evaluation/prediction: a dataset of windows (features dict, or (features, labels), of
  up to EVAL_WINDOW_EXAMPLES examples each) -> batches of `batch_size` examples in order of
  length within each window (untrimmed: `trim_element` follows). The features must say which
  example each row is (`example_index`, or SQuAD's `unique_ids`) for the outputs to be put
  back in order."""
  import tensorflow as tf  # lazy: cli/finetuning_flags.py parses boundaries first

  def sort_window(*element):
    order = tf.argsort(example_lengths(element[0]["input_mask"]), stable=True)
    ordered = tf.nest.map_structure(lambda value: tf.gather(value, order), element)
    return ordered if len(element) > 1 else ordered[0]
  return dataset.map(sort_window).unbatch().batch(batch_size)
