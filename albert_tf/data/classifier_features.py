"""Examples -> fixed-length features -> cached TFRecords -> tf.data, for GLUE and RACE.

The records are the official ones (`classifier_utils.file_based_convert_examples_to_features` and
`race_utils`): int64 input_ids / input_mask / segment_ids of max_seq_length (RACE: the four
choices concatenated, 4 * max_seq_length), label_ids (int64; float32 for STS-B) and
is_real_example. A TFRecord written by the official code is therefore read as is.

Truncation and the [CLS] A [SEP] B [SEP] layout come from `albert_tf.text.packing`, which the
raw-text serving signatures use too.

Cached files get a `.meta.json` sidecar with what produced them (data file, tokenizer,
max_seq_length ...) and what they hold (number of examples, size, sha1); a cache made with other
settings, or cut or changed since it was written, is rebuilt (with a note) instead of silently
reused. Every record read is checked (lengths, ids < vocab_size, segment ids < type_vocab_size,
labels < the number of classes), see `albert_tf.data.record_checks`.
"""

import json
import time

from absl import logging
from google.protobuf import message as protobuf_message
import tensorflow as tf

from albert_tf.common import fileio
from albert_tf.data import bucketing, record_checks
from albert_tf.errors import AlbertError
from albert_tf.text import packing
# One example's text -> ids lives with the packing rules (the top-level loader's predict() uses it).
from albert_tf.text.packing import encode_text_pair


def convert_classifier_example(example, label_list, max_seq_length, tokenizer):
  """One GLUE `InputExample` -> dict of python lists (the official convert_single_example).

  Args:
    example: albert_tf.data.glue.InputExample (text already preprocessed).
    label_list: the task's labels; empty/None for regression (label is then a float).
    max_seq_length: total length incl. [CLS]/[SEP]; must be >= 3 for pairs, 2 for singles.
    tokenizer: has tokenize(text) and convert_tokens_to_ids(tokens).
  Returns:
    {"input_ids", "input_mask", "segment_ids": [max_seq_length] ints, "label_ids": int or
    float, "is_real_example": 1}.
  """
  if label_list:
    label = list(label_list).index(example.label)
  else:
    label = float(example.label)
  return dict(encode_text_pair(example.text_a, example.text_b, max_seq_length, tokenizer),
              label_ids=label, is_real_example=1)


def convert_race_example(example, max_seq_length, max_qa_length, tokenizer):
  """One RaceExample -> dict with [num_choices * max_seq_length] lists (official race_utils).

  Each choice is `[CLS] context [SEP] question+option [SEP]`; the question+option keeps its
  last `max_qa_length` tokens and the context is cut to fit.
  """
  context_tokens = tokenizer.tokenize(example.context)
  all_ids, all_mask, all_segments = [], [], []
  for ending in example.endings:
    context_choice, ending_tokens = packing.fit_choice_tokens(
        context_tokens, tokenizer.tokenize(ending), max_seq_length, max_qa_length)
    tokens, segment_ids = packing.pack_tokens(context_choice, ending_tokens, max_seq_length)
    ids, mask, segments = packing.ids_mask_segments(tokenizer, tokens, segment_ids, max_seq_length)
    all_ids += ids
    all_mask += mask
    all_segments += segments
  return {"input_ids": all_ids, "input_mask": all_mask, "segment_ids": all_segments,
          "label_ids": int(example.label), "is_real_example": 1}


def feature_to_tf_example(feature):
  """dict from convert_*_example -> tf.train.Example (official feature names and dtypes)."""
  def ints(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

  label = feature["label_ids"]
  label_feature = (tf.train.Feature(float_list=tf.train.FloatList(value=[label]))
                   if isinstance(label, float) else ints([label]))
  return tf.train.Example(features=tf.train.Features(feature={
      "input_ids": ints(feature["input_ids"]),
      "input_mask": ints(feature["input_mask"]),
      "segment_ids": ints(feature["segment_ids"]),
      "label_ids": label_feature,
      "is_real_example": ints([feature["is_real_example"]]),
  }))


def write_tfrecord(features, path):
  """Writes an iterable of feature dicts; atomic (temp name, then rename). Returns the count."""
  count = 0
  start = time.time()
  with fileio.atomic_path(path) as temp, tf.io.TFRecordWriter(temp) as writer:
    for feature in features:
      writer.write(feature_to_tf_example(feature).SerializeToString())
      count += 1
      if count % 10000 == 0:
        rate = count / max(time.time() - start, 1e-9)
        logging.info("%s: %d examples written (%.0f examples/s)", path, count, rate)
  return count


def cached_features(path, meta, make_features, count_examples=None):
  """Returns `path`, building it from `make_features()` unless a sound cache with equal `meta`
  exists.

  meta: JSON-able dict of everything the features depend on (written to `path.meta.json`).
  make_features: zero-arg callable returning an iterable of feature dicts.
  count_examples: zero-arg callable returning how many examples the source data holds (to
    check a cache that has no sidecar), or None.
  A cache is reused only if its sidecar's settings equal `meta` and its size and sha1 are the
  recorded ones. A file without sidecar (e.g. written by the official code) must be whole
  TFRecords and, when the source can be counted, hold as many real examples (is_real_example)
  as the source. Otherwise it is rebuilt, with a one-line note; if it cannot be rebuilt (no
  source data), that is a one-line AlbertError.
  """
  meta_path = path + ".meta.json"
  meta = json.loads(json.dumps(meta))  # normalise tuples etc. for the comparison
  if fileio.exists(path):
    sidecar = _read_sidecar(meta_path)
    if sidecar is not None and sidecar.get("settings") != meta:
      logging.info("Cached features %s were made with other settings; rebuilding", path)
      problem = f"{path} was made with other settings"
    else:
      recorded_count = sidecar.get("num_examples") if sidecar else None
      problem = record_checks.cached_file_problem(
          path, identity=sidecar, count_feature="is_real_example", counted="real examples",
          expected_count=count_examples if recorded_count is None else recorded_count)
      if problem is None:
        logging.info("Using cached features %s (%s examples)", path,
                     sidecar.get("num_examples", "?") if sidecar else "no metadata")
        return path
      logging.warning("%s; rebuilding it", problem)
    try:
      return _write_cache(path, meta_path, meta, make_features)
    except AlbertError as e:
      raise AlbertError(f"{problem}, and it cannot be rebuilt: {e}") from None
  return _write_cache(path, meta_path, meta, make_features)


def _read_sidecar(meta_path):
  """The sidecar's JSON; None if there is none or it is unreadable (then it vouches for nothing
  and the cache is checked as one of the official code's)."""
  if not fileio.exists(meta_path):
    return None
  try:
    sidecar = fileio.read_json(meta_path)
  except (ValueError, UnicodeDecodeError):
    sidecar = None
  if not isinstance(sidecar, dict):
    logging.warning("%s: unreadable sidecar, ignored", meta_path)
    return None
  return sidecar


def _write_cache(path, meta_path, meta, make_features):
  count = write_tfrecord(make_features(), path)
  fileio.write_json(meta_path, {"settings": meta, "num_examples": count,
                                **record_checks.file_identity(path)},
                    indent=2, sort_keys=True)
  logging.info("Wrote %d examples to %s", count, path)
  return path


def feature_rules(seq_length, num_choices=None, is_regression=False, vocab_size=None,
                  type_vocab_size=None, num_labels=None):
  """What every GLUE/RACE feature record must hold (`record_checks.FeatureRule` per feature).

  vocab_size / type_vocab_size: the model's (ids at or above them are errors); num_labels: the
  task's classes (label_ids must be below it); None leaves that bound unchecked.
  """
  shape = (num_choices, seq_length) if num_choices else (seq_length,)
  length_from = "--max_seq_length" + (f" x {num_choices} choices" if num_choices else "")
  if is_regression:
    label = record_checks.FeatureRule("label_ids", (), tf.float32, finite=True)
  else:
    label = record_checks.FeatureRule("label_ids", (), low=0, high=num_labels,
                                      bound=f"the task's {num_labels} labels" if num_labels
                                      else "")
  return [
      record_checks.FeatureRule(
          "input_ids", shape, low=0, high=vocab_size, length_from=length_from,
          bound=f"vocab_size {vocab_size} of the model config" if vocab_size else ""),
      record_checks.FeatureRule("input_mask", shape, low=0, high=2, length_from=length_from),
      record_checks.FeatureRule(
          "segment_ids", shape, low=0, high=type_vocab_size, length_from=length_from,
          bound=(f"type_vocab_size {type_vocab_size} of the model config" if type_vocab_size
                 else "")),
      label,
      # The official readers default a missing is_real_example to 1.
      record_checks.FeatureRule("is_real_example", (), low=0, high=2, default=1),
  ]


def _features_and_labels(parsed, is_regression):
  """Checked records (int64 / float32) -> (features, labels) with int32 ids, as the tasks
  consume them: labels are label_ids (int32, or float32 for regression) and is_real_example
  (float32)."""
  features = {name: tf.cast(parsed[name], tf.int32)
              for name in ("input_ids", "input_mask", "segment_ids")}
  label = parsed["label_ids"]
  labels = {"label_ids": label if is_regression else tf.cast(label, tf.int32),
            "is_real_example": tf.cast(parsed["is_real_example"], tf.float32)}
  return features, labels


def check_record_length(path, seq_length, num_choices=None):
  """Raises AlbertError if the first record of `path` was written for another sequence length."""
  for raw in tf.data.TFRecordDataset(path).take(1):
    try:
      example = tf.train.Example.FromString(raw.numpy())
    except protobuf_message.DecodeError:
      raise AlbertError(f"{path}: record 0 is not a tf.train.Example (not a features file?); "
                        "delete the cached file to rebuild it") from None
    found = len(example.features.feature["input_ids"].int64_list.value)
    expected = seq_length * (num_choices or 1)
    if found != expected:
      raise AlbertError(f"{path}: records hold {found} input_ids, expected {expected} "
                        f"(--max_seq_length={seq_length}); delete the cached file or fix the flag")


def make_dataset(path, seq_length, mode, batch_size, num_choices=None, is_regression=False,
                 input_context=None, shuffle_buffer=100, seed=None, vocab_size=None,
                 type_vocab_size=None, num_labels=None, bucket_boundaries=None, shuffle=True):
  """tf.data pipeline over a features TFRecord, following the Task conventions.

  mode "train": repeated, shuffled (buffer 100 as the official; shuffle=False: in file order),
  full batches only.
  mode "eval"/"predict": one pass, in order, final partial batch kept.
  Every record is checked against `feature_rules(...)` (vocab_size, type_vocab_size and
  num_labels bound the ids and labels); a bad one fails iteration with an InvalidArgumentError
  that `record_checks.explain_input_error` turns into a one-line AlbertError.
  Yields (features, labels): input_ids / input_mask / segment_ids int32 [batch, seq_length]
  (or [batch, num_choices, seq_length]); label_ids int32 (float32 for regression) and
  is_real_example float32, [batch].
  bucket_boundaries: None, or lengths ending at seq_length (`albert_tf.data.bucketing`): each
  batch's seq_length is cut to the bucket of its longest example; training batches group
  examples of similar length, evaluation/prediction batches come sorted by length and carry
  features["example_index"] (int32 [batch]) to put the outputs back in order.
  """
  rules = feature_rules(seq_length, num_choices, is_regression, vocab_size, type_vocab_size,
                        num_labels)
  dataset = record_checks.tagged_records(path)
  if input_context and input_context.num_input_pipelines > 1 and mode == "train":
    dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
  if mode == "train":
    dataset = dataset.repeat()
    if shuffle:
      dataset = dataset.shuffle(shuffle_buffer, seed=seed)
  sort_for_eval = bool(bucket_boundaries) and mode != "train"

  def parse(batch):
    features, labels = _features_and_labels(record_checks.parse_checked_batch(batch, rules),
                                            is_regression)
    if sort_for_eval:  # which example each row is, to put the outputs back in order
      features["example_index"] = tf.cast(batch["index"], tf.int32)
    return features, labels

  # Batched first: parsing and checking a batch at once is much cheaper than record by record.
  if sort_for_eval:
    dataset = dataset.batch(bucketing.EVAL_WINDOW_EXAMPLES)
  else:
    dataset = dataset.batch(batch_size, drop_remainder=(mode == "train"))
  dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  if bucket_boundaries:
    if mode != "train":
      dataset = bucketing.sort_windows_by_length(dataset, batch_size)
    elif shuffle:  # (in file order, each batch is only cut to its bucket)
      dataset = bucketing.group_by_length(dataset, batch_size, seed=seed)
    dataset = dataset.map(lambda *element: bucketing.trim_element(element, bucket_boundaries))
  return dataset.prefetch(tf.data.AUTOTUNE)
