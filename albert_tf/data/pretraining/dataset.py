"""Reads official pretraining TFRecords (ours or the official tool's) into batches of int32 tensors.

Mirrors the official `run_pretraining.input_fn_builder`: for training, the file list is repeated
and shuffled, files are interleaved (cycle_length = min(num_cpu_threads, #files)) and records
shuffled in a buffer of 100; for evaluation, files are read once, in order. Additions: files are
sharded per input pipeline (worker) when a tf.distribute.InputContext is given, prefetching,
int64 -> int32 casting, and one-line errors for bad inputs: before the run, every file's
framing and the first record of each file; while it runs, every record of every batch (its
file and index travel with it), see `albert_tf.data.record_checks`.
"""

from google.protobuf import message as protobuf_message
import tensorflow as tf

from albert_tf.common import file_patterns
from albert_tf.data import record_checks
from albert_tf.data.pretraining import record_format
from albert_tf.errors import AlbertError


def _first_record(path):
  try:
    for raw in tf.data.TFRecordDataset(path).take(1):
      return raw.numpy()
  except tf.errors.OpError as e:
    message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    raise AlbertError(f"{path}: not a readable TFRecord file ({message})") from None
  return None


def check_record_format(files, max_seq_length, max_predictions_per_seq):
  """Checks the first record of each file against the official feature spec.

  Raises AlbertError naming the file, the feature, and what was expected (dtype, length), so
  a mismatch with --max_seq_length / --max_predictions_per_seq is reported before training
  instead of as a parse error deep inside a step.
  """
  spec = record_format.name_to_features(max_seq_length, max_predictions_per_seq)
  for path in files:
    raw = _first_record(path)
    if raw is None:
      continue  # an empty shard is harmless
    try:
      example = tf.train.Example.FromString(raw)
    except protobuf_message.DecodeError:
      raise AlbertError(f"{path}: record 0 is not a tf.train.Example (not a pretraining data "
                        "file?)") from None
    feats = example.features.feature
    for name, fixed in spec.items():
      expected_len = fixed.shape[0]
      kind = "int64_list" if fixed.dtype == tf.int64 else "float_list"
      where = f"{path}: record 0: feature {name!r}"
      if name not in feats:
        raise AlbertError(f"{where} is missing (expected {fixed.dtype.name} x {expected_len})")
      actual_kind = feats[name].WhichOneof("kind")
      if actual_kind != kind:
        raise AlbertError(f"{where} has type {actual_kind}, expected {kind}")
      length = len(getattr(feats[name], kind).value)
      if length != expected_len:
        flag = ("--max_seq_length" if name in record_format.INT_FEATURES_SEQ
                else "--max_predictions_per_seq" if name != record_format.LABEL_FEATURE
                else "the format")
        raise AlbertError(f"{where} has length {length}, expected {expected_len} ({flag})")


def _to_int32(parsed):
  return {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
          for name, value in parsed.items()}


def pretraining_dataset(input_file, max_seq_length, max_predictions_per_seq, batch_size,
                        is_training, input_context=None, num_cpu_threads=4, seed=None,
                        check_format=True, vocab_size=None, type_vocab_size=None,
                        check_records=True, shuffle=True, config_source=None):
  """Batches of parsed pretraining records.

  Args:
    input_file: comma-separated globs (the official --input_file, by
      `common.file_patterns`' rule) or a list of paths.
    max_seq_length, max_predictions_per_seq: lengths written in the records.
    batch_size: examples per batch produced by this pipeline.
    is_training: repeat + shuffle + interleave, and drop the final partial batch.
    input_context: tf.distribute.InputContext; files (or, with fewer files than pipelines,
      records) are split between input pipelines.
    seed: shuffle seed (None: nondeterministic order). With a seed and fewer files than
      pipelines, records are split after the shuffle, so a multi-worker run sees step by step
      the same examples as a single-pipeline run.
    check_format: check every file's framing and first record before reading.
    vocab_size, type_vocab_size: the model's; ids at or above them are errors (None: unchecked).
    config_source: the config file they come from, named in those errors.
    check_records: check every record of every batch (lengths and id ranges) as it is read;
      False reads them unchecked (for measuring what the checks cost).
    shuffle: with is_training, shuffle files and records (official); False reads the records
      in file order, files in the order given, repeating (to reproduce a run step for step).
  Returns:
    tf.data.Dataset of dicts: input_ids, input_mask, segment_ids, token_boundary int32
    [batch, max_seq_length]; masked_lm_positions, masked_lm_ids int32 and masked_lm_weights
    float32 [batch, max_predictions_per_seq]; next_sentence_labels int32 [batch, 1].
    A bad record fails iteration with an InvalidArgumentError that
    `record_checks.explain_input_error` turns into a one-line AlbertError.
  """
  files = (list(input_file) if isinstance(input_file, (list, tuple))
           else file_patterns.expand(input_file))
  if check_format:
    record_checks.check_record_files(files)
    check_record_format(files, max_seq_length, max_predictions_per_seq)
  num_pipelines = input_context.num_input_pipelines if input_context else 1
  pipeline_id = input_context.input_pipeline_id if input_context else 0
  shard_records = num_pipelines > 1 and len(files) < num_pipelines
  if num_pipelines > 1 and not shard_records:
    files = files[pipeline_id::num_pipelines]

  if check_records:
    read_file = record_checks.tagged_records
    rules = record_format.feature_rules(max_seq_length, max_predictions_per_seq, vocab_size,
                                        type_vocab_size, config_source)
    decode = lambda batch: _to_int32(record_checks.parse_checked_batch(batch, rules))
  else:
    read_file = tf.data.TFRecordDataset
    spec = record_format.name_to_features(max_seq_length, max_predictions_per_seq)
    decode = lambda batch: _to_int32(tf.io.parse_example(batch, spec))

  ds = tf.data.Dataset.from_tensor_slices(files)
  if is_training and not shuffle:
    ds = ds.repeat().flat_map(read_file)
    if shard_records:
      ds = ds.shard(num_pipelines, pipeline_id)
  elif is_training:
    ds = ds.repeat().shuffle(len(files), seed=seed)
    cycle_length = min(num_cpu_threads, len(files))
    ds = ds.interleave(read_file, cycle_length=cycle_length, num_parallel_calls=cycle_length,
                       deterministic=True)
    if shard_records and seed is None:
      ds = ds.shard(num_pipelines, pipeline_id)
    ds = ds.shuffle(100, seed=seed)
    if shard_records and seed is not None:
      # Every pipeline shuffles the same stream identically, so sharding after the shuffle
      # gives each step exactly the examples a single pipeline would see.
      ds = ds.shard(num_pipelines, pipeline_id)
  else:
    ds = ds.flat_map(read_file)  # the files in order, as TFRecordDataset(files) reads them
    if shard_records:
      ds = ds.shard(num_pipelines, pipeline_id)
  # Batch serialized records first: parsing (and checking) a batch at once is much cheaper.
  ds = ds.batch(batch_size, drop_remainder=is_training)
  ds = ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return ds.prefetch(tf.data.AUTOTUNE)
