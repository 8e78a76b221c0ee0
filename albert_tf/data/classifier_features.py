"""Examples -> fixed-length features -> cached TFRecords -> tf.data, for GLUE and RACE.

The records are the official ones (`classifier_utils.file_based_convert_examples_to_features` and
`race_utils`): int64 input_ids / input_mask / segment_ids of max_seq_length (RACE: the four
choices concatenated, 4 * max_seq_length), label_ids (int64; float32 for STS-B) and
is_real_example. A TFRecord written by the official code is therefore read as is.

Truncation and the [CLS] A [SEP] B [SEP] layout come from `albert_tf.text.packing`, which the
raw-text serving signatures use too.

Cached files get a `.meta.json` sidecar with what produced them (data file, tokenizer,
max_seq_length ...); a cache made with other settings is rebuilt instead of silently reused.
"""

import json
import time

from absl import logging
import tensorflow as tf

from albert_tf import fileio
from albert_tf.errors import AlbertError
from albert_tf.text import packing


def _pad(ids, max_seq_length):
  return ids + [0] * (max_seq_length - len(ids))


def _ids_mask_segments(tokenizer, tokens, segment_ids, max_seq_length):
  input_ids = tokenizer.convert_tokens_to_ids(tokens)
  input_mask = [1] * len(input_ids)
  return (_pad(list(input_ids), max_seq_length), _pad(input_mask, max_seq_length),
          _pad(segment_ids, max_seq_length))


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
  tokens_a = tokenizer.tokenize(example.text_a)
  tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
  tokens_a, tokens_b = packing.fit_classifier_tokens(tokens_a, tokens_b, max_seq_length)
  tokens, segment_ids = packing.pack_tokens(tokens_a, tokens_b, max_seq_length)
  input_ids, input_mask, segment_ids = _ids_mask_segments(tokenizer, tokens, segment_ids,
                                                          max_seq_length)
  if label_list:
    label = list(label_list).index(example.label)
  else:
    label = float(example.label)
  return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
          "label_ids": label, "is_real_example": 1}


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
    ids, mask, segments = _ids_mask_segments(tokenizer, tokens, segment_ids, max_seq_length)
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


def cached_features(path, meta, make_features):
  """Returns `path`, building it from `make_features()` unless a cache with equal `meta` exists.

  meta: JSON-able dict of everything the features depend on (written to `path.meta.json`).
  make_features: zero-arg callable returning an iterable of feature dicts.
  A file without sidecar (e.g. written by the official code) is reused as is; a file whose
  sidecar differs is rebuilt.
  """
  meta_path = path + ".meta.json"
  meta = json.loads(json.dumps(meta))  # normalise tuples etc. for the comparison
  if fileio.exists(path):
    if not fileio.exists(meta_path):
      logging.info("Using existing features %s (no metadata; assuming it matches)", path)
      return path
    old = fileio.read_json(meta_path)
    if old.get("settings") == meta:
      logging.info("Using cached features %s (%d examples)", path, old.get("num_examples", -1))
      return path
    logging.info("Cached features %s were made with other settings; rebuilding", path)
  count = write_tfrecord(make_features(), path)
  fileio.write_json(meta_path, {"settings": meta, "num_examples": count}, indent=2,
                    sort_keys=True)
  logging.info("Wrote %d examples to %s", count, path)
  return path


def decode_record(record, seq_length, num_choices=None, is_regression=False):
  """Parses one serialized record -> (features, labels) with int32 ids.

  features: input_ids / input_mask / segment_ids [seq_length] or [num_choices, seq_length].
  labels: label_ids (int32, or float32 for regression) and is_real_example (float32).
  """
  total = seq_length * (num_choices or 1)
  spec = {
      "input_ids": tf.io.FixedLenFeature([total], tf.int64),
      "input_mask": tf.io.FixedLenFeature([total], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([total], tf.int64),
      "label_ids": tf.io.FixedLenFeature([], tf.float32 if is_regression else tf.int64),
      "is_real_example": tf.io.FixedLenFeature([], tf.int64, default_value=1),
  }
  parsed = tf.io.parse_single_example(record, spec)
  features = {}
  for name in ("input_ids", "input_mask", "segment_ids"):
    value = tf.cast(parsed[name], tf.int32)
    if num_choices:
      value = tf.reshape(value, [num_choices, seq_length])
    features[name] = value
  label = parsed["label_ids"]
  labels = {"label_ids": label if is_regression else tf.cast(label, tf.int32),
            "is_real_example": tf.cast(parsed["is_real_example"], tf.float32)}
  return features, labels


def check_record_length(path, seq_length, num_choices=None):
  """Raises AlbertError if the first record of `path` was written for another sequence length."""
  for raw in tf.data.TFRecordDataset(path).take(1):
    example = tf.train.Example.FromString(raw.numpy())
    found = len(example.features.feature["input_ids"].int64_list.value)
    expected = seq_length * (num_choices or 1)
    if found != expected:
      raise AlbertError(f"{path}: records hold {found} input_ids, expected {expected} "
                        f"(--max_seq_length={seq_length}); delete the cached file or fix the flag")


def make_dataset(path, seq_length, mode, batch_size, num_choices=None, is_regression=False,
                 input_context=None, shuffle_buffer=100, seed=None):
  """tf.data pipeline over a features TFRecord, following the Task conventions.

  mode "train": repeated, shuffled (buffer 100 as the official), full batches only.
  mode "eval"/"predict": one pass, in order, final partial batch kept.
  """
  dataset = tf.data.TFRecordDataset(path)
  if input_context and input_context.num_input_pipelines > 1 and mode == "train":
    dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
  if mode == "train":
    dataset = dataset.repeat().shuffle(shuffle_buffer, seed=seed)
  dataset = dataset.map(
      lambda r: decode_record(r, seq_length, num_choices, is_regression),
      num_parallel_calls=tf.data.AUTOTUNE)
  dataset = dataset.batch(batch_size, drop_remainder=(mode == "train"))
  return dataset.prefetch(tf.data.AUTOTUNE)
