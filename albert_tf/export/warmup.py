"""TF Serving warm-up requests, written into every export we make.

TF Serving replays `<SavedModel>/assets.extra/tf_serving_warmup_requests` when it loads a model
version, before the version takes traffic: a TFRecord file of serialized
`tensorflow.serving.PredictionLog`s, each a `predict_log.request` (a `PredictRequest`: the
signature's name and its inputs as TensorProtos). The first call of a signature is the slow one
(the graph of that signature is pruned and optimised, the executor and oneDNN's kernels are
built for the shapes seen), so without these records the first real request pays for it.

`write_warmup_requests(export_dir, info)` runs where an export is finalised
(`saved_model_writer`, before the rename that publishes it; on an object store, before the
file-by-file publish): it reads the signatures from each
`saved_model.pb` of the export (the version itself and `core_ops/`, which is served on its own),
and writes, for every signature that takes inputs, one request per batch size of
`WARMUP_BATCH_SIZES` with realistic inputs that pass the signature's checks
(`albert_tf.export.input_checks`):
  token ids (input_ids, input_mask, segment_ids, p_mask, TF Hub's names)  padded to the export's
      max_seq_length (the hub encoder: DEFAULT_SEQ_LENGTH), the first row of the batch as long
      as that, the others shorter; ids inside the vocabulary, two segments
  mlm_positions                  NUM_MLM_POSITIONS sorted positions inside each row's real tokens
  examples                       serialized tf.Examples with the official feature names, of
                                 max_seq_length (x num_choices) values
  text_a, text_b, article, question, options, sentences (the TF Hub preprocessor)
                                 English sentences, some past max_seq_length
The batch sizes are the allowed_batch_sizes of configs/serving/batching_parameters.txt (a test
checks that they agree). Signatures without inputs (the hub encoder's tokenization_info)
get no request.
"""

import os

from absl import logging
from google.protobuf import message
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import prediction_log_pb2

from albert_tf.common import fileio
from albert_tf.common.export_format import WARMUP_REQUESTS

# The allowed_batch_sizes of configs/serving/batching_parameters.txt: with TF Serving's batching
# on, the model only ever runs at these sizes (batches are padded up to the next one).
WARMUP_BATCH_SIZES = (1, 2, 4, 8, 16, 32)
# The sequence length of the warm-up requests of an export without a max_seq_length (the
# TF-Hub encoder, which takes any length up to max_position_embeddings): the common one.
DEFAULT_SEQ_LENGTH = 128
NUM_MLM_POSITIONS = 20  # the official max_predictions_per_seq
# The shortest real length of a row (the first row of a batch always fills the sequence).
_MIN_REAL_FRACTION = 0.25

_TOKEN_INPUTS = {"input_ids": "input_ids", "input_word_ids": "input_ids",
                 "input_mask": "input_mask", "segment_ids": "segment_ids",
                 "input_type_ids": "segment_ids", "p_mask": "p_mask"}
_POSITION_INPUTS = ("mlm_positions", "masked_lm_positions")
_TEXT_INPUTS = ("text_a", "text_b", "article", "question", "options", "sentences")

_SENTENCES = (
    "The committee met on Tuesday to discuss the budget for the coming year.",
    "Several members argued that the library should stay open later on weekdays.",
    "A small boat drifted slowly past the harbour as the sun went down.",
    "Researchers found that the new method halves the time needed to train the model.",
    "She had never seen snow before she moved north for her first job.",
    "The museum's oldest painting was restored after water damaged its frame in 1998.",
    "Prices of fresh vegetables rose sharply after the long dry summer.",
    "He asked whether the train to the airport still leaves every twenty minutes.",
)
_QUESTIONS = ("What did the committee discuss?", "The boat drifted past the _ at sunset.",
              "Why did prices of vegetables rise?", "The painting was restored because _.")
_OPTIONS = ("the budget", "the harbour", "a long dry summer", "water damage")


def saved_model_dirs(export_dir):
  """The SavedModels of an export: `export_dir` and its sub-folders holding a saved_model.pb."""
  if not fileio.isdir(export_dir):
    return []
  found = [export_dir] if fileio.exists(os.path.join(export_dir, "saved_model.pb")) else []
  for name in fileio.listdir(export_dir):
    path = os.path.join(export_dir, name)
    if fileio.isfile(os.path.join(path, "saved_model.pb")):
      found.append(path)
  return found


def read_signature_defs(saved_model_dir):
  """{name: SignatureDef} of the `serve` MetaGraph of a SavedModel, read from saved_model.pb."""
  saved_model = saved_model_pb2.SavedModel()
  path = os.path.join(saved_model_dir, "saved_model.pb")
  try:
    saved_model.ParseFromString(fileio.read_bytes(path))
  except message.DecodeError:
    # Only the fake exports of the writer's own tests get here: they have no signatures.
    logging.warning("%s is not a SavedModel proto: no warm-up requests for it", path)
    return {}
  for meta_graph in saved_model.meta_graphs:
    if "serve" in meta_graph.meta_info_def.tags:
      return dict(meta_graph.signature_def)
  return {}


def write_warmup_requests(export_dir, info, batch_sizes=WARMUP_BATCH_SIZES):
  """Writes assets.extra/tf_serving_warmup_requests into each SavedModel of the export.

  info: the export's identity (albert_export.json): albert_config, max_seq_length,
    num_choices.
  Returns the paths of the files written.
  """
  written = []
  for directory in saved_model_dirs(export_dir):
    records = warmup_requests(read_signature_defs(directory), info, batch_sizes)
    if not records:
      continue
    path = os.path.join(directory, WARMUP_REQUESTS)
    fileio.makedirs(os.path.dirname(path))
    # Into the export's temporary directory, not yet visible to TF Serving: no atomic write
    # needed (tf.io.TFRecordWriter writes any tf.io.gfile path).
    with tf.io.TFRecordWriter(path) as writer:
      for record in records:
        writer.write(record.SerializeToString())
    written.append(path)
  return written


def warmup_requests(signature_defs, info, batch_sizes=WARMUP_BATCH_SIZES):
  """[PredictionLog]: for each signature with inputs, one predict request per batch size."""
  records = []
  for name in sorted(signature_defs):
    signature = signature_defs[name]
    if not signature.inputs:
      continue
    for batch_size in batch_sizes:
      record = prediction_log_pb2.PredictionLog()
      request = record.predict_log.request
      request.model_spec.signature_name = name
      inputs = signature_inputs(signature, info, batch_size, seed=batch_size)
      for key, value in inputs.items():
        request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
      records.append(record)
  return records


def signature_inputs(signature, info, batch_size, seed=0):
  """{input name: np.ndarray} of one realistic request to `signature` (a SignatureDef)."""
  config = info.get("albert_config") or {}  # None for the TF Hub preprocessor (text only)
  rng = np.random.default_rng(seed)
  specs = {key: (tf.as_dtype(tensor.dtype), [d.size for d in tensor.tensor_shape.dim])
           for key, tensor in signature.inputs.items()}
  token_shape = _token_shape(specs, info, config, batch_size)
  tokens = _token_features(rng, token_shape, config) if token_shape else None
  inputs = {}
  for key, (dtype, _) in specs.items():
    if key in _TOKEN_INPUTS:
      value = tokens[_TOKEN_INPUTS[key]]
    elif key in _POSITION_INPUTS:
      value = _positions(rng, tokens["input_mask"])
    elif key == "examples":
      value = _examples(rng, batch_size, info, config)
    elif key == "text":  # a token classifier's text: one window, so a few words
      value = _words(batch_size, _seq_length(info, config))
    elif key == "words":  # ... and the same pre-split, "" padding the shorter rows
      split = [text.split() for text in _words(batch_size, _seq_length(info, config))]
      width = max(len(row) for row in split)
      value = np.array([row + [""] * (width - len(row)) for row in split], dtype=object)
    elif key in _TEXT_INPUTS:
      value = _texts(rng, key, batch_size, int(info.get("num_choices") or 4))
    else:
      raise ValueError(f"warm-up requests: no inputs known for {key!r} of a signature with "
                       f"inputs {sorted(specs)}")
    inputs[key] = value.astype(dtype.as_numpy_dtype)
  return inputs


def _seq_length(info, config):
  length = info.get("max_seq_length") or min(DEFAULT_SEQ_LENGTH, config["max_position_embeddings"])
  return int(length)


def _token_shape(specs, info, config, batch_size):
  """[batch, (choices,) seq_len] of the token inputs: fixed dims from the signature, the
  sequence length of the export otherwise; None if the signature takes no token inputs."""
  shapes = [shape for key, (_, shape) in specs.items() if key in _TOKEN_INPUTS]
  if not shapes:
    return None
  shape = list(shapes[0])
  shape[0] = batch_size
  if shape[-1] < 0:
    shape[-1] = _seq_length(info, config)
  return shape


def _token_features(rng, shape, config):
  """int64 input_ids, input_mask, segment_ids, p_mask of `shape` [batch, ..., seq_len]: two
  segments of real tokens, then padding; row 0 fills the sequence, the others are shorter."""
  seq_len = shape[-1]
  rows = int(np.prod(shape[:-1]))
  shortest = max(3, int(seq_len * _MIN_REAL_FRACTION))
  lengths = np.concatenate([[seq_len], rng.integers(shortest, seq_len + 1, size=rows - 1)])
  positions = np.arange(seq_len)
  mask = (positions[None, :] < lengths[:, None]).astype(np.int64)
  vocab = int(config["vocab_size"])
  ids = rng.integers(min(5, vocab - 1), vocab, size=(rows, seq_len)) * mask
  second = positions[None, :] >= (lengths[:, None] // 3)  # question / first sentence: a third
  segments = (second * mask) if int(config["type_vocab_size"]) > 1 else np.zeros_like(mask)
  p_mask = 1 - segments  # SQuAD: answers only in the context (the second segment)
  features = {"input_ids": ids, "input_mask": mask, "segment_ids": segments, "p_mask": p_mask}
  return {name: value.reshape(shape) for name, value in features.items()}


def _positions(rng, input_mask):
  """[batch, NUM_MLM_POSITIONS] sorted positions inside each row's real tokens."""
  rows = []
  for length in input_mask.sum(axis=-1):
    length = int(length)
    rows.append(np.sort(rng.choice(length, size=NUM_MLM_POSITIONS,
                                   replace=length < NUM_MLM_POSITIONS)))
  return np.stack(rows)


def _examples(rng, batch_size, info, config):
  """[batch] serialized tf.Examples: the official int64 features of max_seq_length values
  (x num_choices for multiple choice)."""
  shape = [batch_size] + ([int(info["num_choices"])] if info.get("num_choices") else []) + [
      _seq_length(info, config)]
  tokens = _token_features(rng, shape, config)
  records = []
  for row in range(batch_size):
    feature = {name: tf.train.Feature(int64_list=tf.train.Int64List(
        value=tokens[name][row].reshape(-1).tolist()))
               for name in ("input_ids", "input_mask", "segment_ids")}
    records.append(tf.train.Example(features=tf.train.Features(feature=feature))
                   .SerializeToString())
  return np.array(records, dtype=object)


def _words(batch_size, seq_len):
  """[batch] strings of the first words of _SENTENCES: about one word per 8 pieces of seq_len,
  so that a text fits one window even in a small vocabulary's many pieces per word."""
  count = max(1, (seq_len - 2) // 8)
  return np.array([" ".join(_SENTENCES[row % len(_SENTENCES)].split()[:count])
                   for row in range(batch_size)], dtype=object)


def _texts(rng, key, batch_size, num_choices):
  """[batch] strings ([batch, num_choices] for `options`); row 0 is the longest."""
  if key == "options":
    return np.array([[_OPTIONS[(row + k) % len(_OPTIONS)] for k in range(num_choices)]
                     for row in range(batch_size)], dtype=object)
  if key == "question":
    return np.array([_QUESTIONS[row % len(_QUESTIONS)] for row in range(batch_size)],
                    dtype=object)
  most = {"text_a": 6, "text_b": 3, "article": 16, "sentences": 6}[key]
  counts = np.concatenate([[most], rng.integers(1, most + 1, size=batch_size - 1)])
  return np.array([" ".join(_SENTENCES[(row + k) % len(_SENTENCES)] for k in range(count))
                   for row, count in enumerate(counts)], dtype=object)
