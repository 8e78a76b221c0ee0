"""SQuAD v1.1 / v2.0: JSON reading, examples -> features, and the official feature TFRecords.

Features follow the official ALBERT `squad_utils`: the question and passage are tokenized with
SentencePiece (or WordPiece: the Chinese models, CMRC 2018); the passage is cut into windows of
at most max_seq_length - len(question) - 3 pieces, each starting `doc_stride` pieces after the
previous one; each window is packed as `[CLS] question [SEP] passage-window [SEP]` with p_mask 1
on every position that cannot be part of an answer (question, separators, padding; [CLS] stays 0
so "no answer" can point at it).

The answer's character span is mapped to pieces through `FullTokenizer.tokenize_with_offsets`
(each piece's span in the original text), so accent stripping, lower-casing and the digit-comma
re-split cannot shift it, and text without spaces between words maps as well; predictions map
back the same way.

Feature files: the official TFRecord names (unique_ids, input_ids, input_mask, segment_ids, p_mask,
and for training start_positions, end_positions, is_impossible), and for prediction the
"left" file of what the model does not see (token -> character maps, max-context flags), which
`squad_postprocess` needs. Both are cached: a second run with the same files skips conversion.
A cached TFRecord is reused only while it is the file that was written (size and sha1, kept in
`<train file>.settings.json` / the left file; files of the official code: whole TFRecords and,
for prediction, as many records as the left file has features); else it is rebuilt, with a
note. Every record read is checked (lengths, ids < vocab_size, segment ids < type_vocab_size,
positions < max_seq_length), see `albert_tf.data.record_checks`.
"""

import dataclasses
import hashlib
import json
import os
import time
from typing import Dict, List

from absl import logging
from google.protobuf import message as protobuf_message
import tensorflow as tf

from albert_tf.common import fileio
from albert_tf.common import utf8
from albert_tf.data import bucketing, record_checks
from albert_tf.errors import AlbertError

# The official first unique id.
FIRST_UNIQUE_ID = 1000000000

# Version of the predict "left" file layout; bump when SquadFeature changes.
_LEFT_FILE_FORMAT = "albert_tf.squad_features.v1"


@dataclasses.dataclass
class SquadExample:
  """One question on one passage.

  Attributes:
    qas_id: the question id from the JSON.
    question_text, paragraph_text: as in the JSON.
    orig_answer_text: the training answer ("" when impossible or when predicting).
    start_position: character offset of the training answer in paragraph_text (-1 if none).
    is_impossible: SQuAD v2 unanswerable question.
  """
  qas_id: str
  question_text: str
  paragraph_text: str
  orig_answer_text: str = ""
  start_position: int = -1
  is_impossible: bool = False


@dataclasses.dataclass
class SquadFeature:
  """One window of one example, as the model sees it plus what post-processing needs.

  tok_start_to_orig_index / tok_end_to_orig_index give, for each passage piece in the window,
  the first / last (inclusive) character in the original paragraph text. token_is_max_context maps
  a position in input_ids to whether this window is the best context for that piece.
  """
  unique_id: int
  example_index: int
  doc_span_index: int
  tok_start_to_orig_index: List[int]
  tok_end_to_orig_index: List[int]
  token_is_max_context: Dict[int, bool]
  tokens: List[str]
  input_ids: List[int]
  input_mask: List[int]
  segment_ids: List[int]
  p_mask: List[int]
  paragraph_len: int
  doc_offset: int
  start_position: int = 0
  end_position: int = 0
  is_impossible: bool = False


# ----------------------------------------------------------------------------- JSON reading


def _require(obj, key, where, expected_type, source):
  if not isinstance(obj, dict):
    raise AlbertError(f"{source}: {where} should be a JSON object, got {type(obj).__name__}")
  if key not in obj:
    raise AlbertError(f"{source}: {where} has no \"{key}\" (not a SQuAD file?)")
  value = obj[key]
  if not isinstance(value, expected_type):
    names = (expected_type.__name__ if isinstance(expected_type, type)
             else "/".join(t.__name__ for t in expected_type))
    raise AlbertError(f"{source}: {where}.{key} should be {names}, got {type(value).__name__}")
  return value


def load_squad_json(input_file, with_version=False):
  """Returns the "data" list of a SQuAD JSON file; AlbertError if unreadable or not SQuAD.

  With with_version, returns (data, version): version is True for SQuAD v2.0 (top-level
  "version" "v2.0", or any question carrying "is_impossible"), else False.
  """
  try:
    with tf.io.gfile.GFile(input_file, "rb") as f:
      data = f.read()
  except tf.errors.NotFoundError:
    raise AlbertError(f"cannot read SQuAD file {input_file}: no such file")
  except (tf.errors.OpError, OSError) as e:
    reason = getattr(e, "message", None) or str(e)
    raise AlbertError(f"cannot read SQuAD file {input_file}: {reason.splitlines()[0]}")
  text = utf8.decode(data, input_file, bom=True)
  try:
    data = json.loads(text)
  except json.JSONDecodeError as e:
    raise AlbertError(f"{input_file}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})")
  articles = _require(data, "data", "the top-level object", list, input_file)
  if not with_version:
    return articles
  is_v2 = str(data.get("version", "")).lstrip("v").startswith("2") or any(
      "is_impossible" in qa
      for article in articles if isinstance(article, dict)
      for paragraph in article.get("paragraphs", []) if isinstance(paragraph, dict)
      for qa in paragraph.get("qas", []) if isinstance(qa, dict))
  return articles, is_v2


def parse_squad_examples(data, is_training, source="<squad>"):
  """SQuAD "data" list -> (examples, num_skipped).

  Training reads the one answer of each answerable question (v2 `is_impossible` questions get no
  answer). An answer whose text does not occur at its answer_start is skipped and counted (as the
  official tools do) instead of training on a wrong span. Questions without answers are kept for
  prediction.
  """
  examples = []
  num_skipped = 0
  for a, article in enumerate(data):
    paragraphs = _require(article, "paragraphs", f"data[{a}]", list, source)
    for p, paragraph in enumerate(paragraphs):
      where = f"data[{a}].paragraphs[{p}]"
      context = _require(paragraph, "context", where, str, source)
      qas = _require(paragraph, "qas", where, list, source)
      for q, qa in enumerate(qas):
        qa_where = f"{where}.qas[{q}]"
        qas_id = _require(qa, "id", qa_where, (str, int), source)
        question = _require(qa, "question", qa_where, str, source)
        is_impossible = bool(qa.get("is_impossible", False))
        example = SquadExample(qas_id=str(qas_id), question_text=question,
                               paragraph_text=context, is_impossible=is_impossible)
        if is_training and not is_impossible:
          answers = _require(qa, "answers", qa_where, list, source)
          if len(answers) != 1:
            raise AlbertError(
                f"{source}: {qa_where} (id {qas_id}) has {len(answers)} answers; for training "
                "each answerable question needs exactly 1 (or \"is_impossible\": true)")
          answer_where = f"{qa_where}.answers[0]"
          text = _require(answers[0], "text", answer_where, str, source)
          start = _require(answers[0], "answer_start", answer_where, int, source)
          found = context[start:start + len(text)]
          if start < 0 or not text.strip() or " ".join(found.split()) != " ".join(text.split()):
            num_skipped += 1
            logging.warning("%s: skipping %s (id %s): answer %r is not at answer_start %d",
                            source, qa_where, qas_id, text, start)
            continue
          example.orig_answer_text = text
          example.start_position = start
        examples.append(example)
  return examples, num_skipped


def read_squad_examples(input_file, is_training):
  """Reads a SQuAD v1.1/v2.0 JSON file into a list of SquadExample (see parse_squad_examples)."""
  examples, num_skipped = parse_squad_examples(load_squad_json(input_file), is_training,
                                               source=input_file)
  if num_skipped:
    logging.warning("%s: skipped %d question(s) whose answer text is not at answer_start",
                    input_file, num_skipped)
  if not examples:
    raise AlbertError(f"{input_file}: no usable questions")
  return examples


# ----------------------------------------------------------------------------- features


def _check_is_max_context(doc_spans, cur_span_index, position):
  """Whether window `cur_span_index` gives piece `position` its most context (official rule).

  Score = min(left context, right context) + 0.01 * window length; the best window wins.
  """
  best_score, best_span_index = None, None
  for span_index, (start, length) in enumerate(doc_spans):
    end = start + length - 1
    if position < start or position > end:
      continue
    score = min(position - start, end - position) + 0.01 * length
    if best_score is None or score > best_score:
      best_score, best_span_index = score, span_index
  return cur_span_index == best_span_index


def _doc_spans(num_tokens, max_tokens_for_doc, doc_stride):
  """Sliding windows (start, length) over num_tokens pieces, as the official code makes them."""
  spans = []
  start = 0
  while start < num_tokens:
    length = min(num_tokens - start, max_tokens_for_doc)
    spans.append((start, length))
    if start + length == num_tokens:
      break
    start += min(length, doc_stride)
  return spans


def answer_token_span(offsets, char_start, char_end):
  """Pieces covering characters [char_start, char_end) of the original text.

  Args:
    offsets: per-piece (start, end) character spans from `tokenize_with_offsets`.
  Returns:
    (first, last) piece indices (inclusive) overlapping the span, or None if no piece does.
  """
  first = last = None
  for i, (start, end) in enumerate(offsets):
    if end <= start:  # a bare "▁" piece covers no character
      continue
    if start < char_end and end > char_start:
      if first is None:
        first = i
      last = i
  if first is None:
    return None
  return first, last


def check_window_lengths(max_seq_length, max_query_length, doc_stride):
  """Raises AlbertError unless a question and a passage window fit in max_seq_length."""
  if max_seq_length <= max_query_length + 3:
    raise AlbertError(f"--max_seq_length ({max_seq_length}) must be greater than "
                      f"--max_query_length ({max_query_length}) + 3")
  if doc_stride < 1:
    raise AlbertError(f"--doc_stride={doc_stride} is invalid: expected > 0")


@dataclasses.dataclass
class _EncodedExample:
  """One question's ids and its passage's pieces, ids and piece-to-character maps."""
  query_ids: list
  doc_pieces: list
  doc_ids: list
  tok_start_to_orig: list  # first character of each piece
  tok_end_to_orig: list  # last character of each piece (inclusive)
  answer_span: tuple  # (first piece, last piece) of the answer; (0, 0) when none


def _encode_example(example, tokenizer, max_query_length, is_training):
  query_ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(example.question_text))
  doc_pieces, offsets = tokenizer.tokenize_with_offsets(example.paragraph_text)
  answer_span = (0, 0)
  if is_training and not example.is_impossible:
    answer_span = answer_token_span(offsets, example.start_position,
                                    example.start_position + len(example.orig_answer_text))
    if answer_span is None:  # unreachable for answers validated by parse_squad_examples
      raise AlbertError(f"question {example.qas_id}: answer maps to no passage piece")
  return _EncodedExample(
      query_ids=query_ids[:max_query_length], doc_pieces=doc_pieces,
      doc_ids=tokenizer.convert_tokens_to_ids(doc_pieces),
      tok_start_to_orig=[start for start, _ in offsets],
      # Inclusive last character; a bare "▁" (empty span) ends just before where it starts.
      tok_end_to_orig=[end - 1 for _, end in offsets], answer_span=answer_span)


def _window_feature(encoded, example, doc_spans, doc_span_index, tokenizer, max_seq_length,
                    is_training):
  """The SquadFeature fields of one window `[CLS] question [SEP] passage span [SEP]`, padded
  (without unique_id and example_index)."""
  span_start, span_length = doc_spans[doc_span_index]
  query_ids = encoded.query_ids
  cls_id, sep_id = tokenizer.cls_id, tokenizer.sep_id
  cls_piece, sep_piece = tokenizer.convert_ids_to_tokens([cls_id, sep_id])
  doc_offset = len(query_ids) + 2
  input_ids = [cls_id] + query_ids + [sep_id]
  segment_ids = [0] * len(input_ids)
  p_mask = [0] + [1] * (len(query_ids) + 1)
  token_is_max_context = {}
  for i in range(span_start, span_start + span_length):
    token_is_max_context[len(input_ids)] = _check_is_max_context(doc_spans, doc_span_index, i)
    input_ids.append(encoded.doc_ids[i])
    segment_ids.append(1)
    p_mask.append(0)
  input_ids.append(sep_id)
  segment_ids.append(1)
  p_mask.append(1)
  paragraph_len = len(input_ids)
  tokens = ([cls_piece] + tokenizer.convert_ids_to_tokens(query_ids) + [sep_piece] +
            encoded.doc_pieces[span_start:span_start + span_length] + [sep_piece])
  input_mask = [1] * len(input_ids)
  padding = max_seq_length - len(input_ids)

  is_impossible = example.is_impossible
  start_position = end_position = 0
  if is_training and not is_impossible:
    tok_start, tok_end = encoded.answer_span
    if tok_start >= span_start and tok_end <= span_start + span_length - 1:
      start_position = tok_start - span_start + doc_offset
      end_position = tok_end - span_start + doc_offset
    else:  # this window misses the answer: train it to point at [CLS]
      is_impossible = True
  return dict(
      doc_span_index=doc_span_index,
      tok_start_to_orig_index=encoded.tok_start_to_orig[span_start:span_start + span_length],
      tok_end_to_orig_index=encoded.tok_end_to_orig[span_start:span_start + span_length],
      token_is_max_context=token_is_max_context, tokens=tokens,
      input_ids=input_ids + [0] * padding, input_mask=input_mask + [0] * padding,
      segment_ids=segment_ids + [0] * padding, p_mask=p_mask + [1] * padding,
      paragraph_len=paragraph_len, doc_offset=doc_offset, start_position=start_position,
      end_position=end_position, is_impossible=is_impossible)


def convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride,
                                 max_query_length, is_training, log_every=1000):
  """Yields SquadFeature for each window of each example (official ALBERT rules).

  Args:
    examples: list of SquadExample.
    tokenizer: `albert_tf.text.tokenization.FullTokenizer`, SentencePiece or WordPiece.
    max_seq_length, doc_stride, max_query_length: as the official flags.
    is_training: label windows (windows that miss the answer become "impossible": start = end = 0
      on [CLS], as the official code does, also for v1.1).
  """
  check_window_lengths(max_seq_length, max_query_length, doc_stride)
  unique_id = FIRST_UNIQUE_ID
  num_pos = num_neg = 0
  started = time.time()
  for example_index, example in enumerate(examples):
    if log_every and example_index and example_index % log_every == 0:
      rate = example_index / max(time.time() - started, 1e-9)
      logging.info("SQuAD features: %d/%d examples (%.0f examples/s, ETA %.0fs), pos %d neg %d",
                   example_index, len(examples), rate,
                   (len(examples) - example_index) / max(rate, 1e-9), num_pos, num_neg)
    encoded = _encode_example(example, tokenizer, max_query_length, is_training)
    max_tokens_for_doc = max_seq_length - len(encoded.query_ids) - 3  # [CLS], [SEP], [SEP]
    doc_spans = _doc_spans(len(encoded.doc_ids), max_tokens_for_doc, doc_stride)
    for doc_span_index in range(len(doc_spans)):
      fields = _window_feature(encoded, example, doc_spans, doc_span_index, tokenizer,
                               max_seq_length, is_training)
      if fields["is_impossible"]:
        num_neg += 1
      else:
        num_pos += 1
      yield SquadFeature(unique_id=unique_id, example_index=example_index, **fields)
      unique_id += 1
  logging.info("SQuAD features: %d examples -> %d features (pos %d, neg %d) in %.1fs",
               len(examples), num_pos + num_neg, num_pos, num_neg, time.time() - started)


# ----------------------------------------------------------------------------- feature files


def _int_feature(values):
  return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def feature_to_tf_example(feature, is_training):
  """The official tf.train.Example of one feature."""
  features = {
      "unique_ids": _int_feature([feature.unique_id]),
      "input_ids": _int_feature(feature.input_ids),
      "input_mask": _int_feature(feature.input_mask),
      "segment_ids": _int_feature(feature.segment_ids),
      "p_mask": _int_feature(feature.p_mask),
  }
  if is_training:
    features["start_positions"] = _int_feature([feature.start_position])
    features["end_positions"] = _int_feature([feature.end_position])
    features["is_impossible"] = _int_feature([int(feature.is_impossible)])
  return tf.train.Example(features=tf.train.Features(feature=features))


def write_features(features, filename, is_training, keep=False):
  """Writes an iterable of SquadFeature to `filename` as official TFRecords, atomically (a temp
  name renamed when all are written). Returns the list if keep, else the count."""
  kept = []
  count = 0
  with fileio.atomic_path(filename) as temp, tf.io.TFRecordWriter(temp) as writer:
    for feature in features:
      writer.write(feature_to_tf_example(feature, is_training).SerializeToString())
      count += 1
      if keep:
        kept.append(feature)
  return kept if keep else count


def feature_spec(seq_length, is_training):
  """The official parsing spec of the SQuAD feature TFRecords."""
  spec = {
      "unique_ids": tf.io.FixedLenFeature([], tf.int64),
      "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
      "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
      "p_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
  }
  if is_training:
    spec["start_positions"] = tf.io.FixedLenFeature([], tf.int64)
    spec["end_positions"] = tf.io.FixedLenFeature([], tf.int64)
    spec["is_impossible"] = tf.io.FixedLenFeature([], tf.int64)
  return spec


def feature_rules(seq_length, is_training, vocab_size=None, type_vocab_size=None):
  """What every feature record must hold (`record_checks.FeatureRule` per feature of
  `feature_spec`); vocab_size / type_vocab_size None leave those ids unbounded."""
  seq, flag = (seq_length,), "--max_seq_length"
  rule = record_checks.FeatureRule
  rules = [
      rule("unique_ids", ()),
      rule("input_ids", seq, low=0, high=vocab_size, length_from=flag,
           bound=f"vocab_size {vocab_size} of the model config" if vocab_size else ""),
      rule("input_mask", seq, low=0, high=2, length_from=flag),
      rule("segment_ids", seq, low=0, high=type_vocab_size, length_from=flag,
           bound=(f"type_vocab_size {type_vocab_size} of the model config" if type_vocab_size
                  else "")),
      rule("p_mask", seq, low=0, high=2, length_from=flag),
  ]
  if is_training:
    rules += [rule(name, (), low=0, high=seq_length, bound=f"{flag}={seq_length}")
              for name in ("start_positions", "end_positions")]
    rules.append(rule("is_impossible", (), low=0, high=2))
  return rules


def check_feature_file(path, seq_length, is_training, flag):
  """Raises AlbertError unless `path`'s first record has the official features at seq_length."""
  try:
    record = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
  except (tf.errors.OpError, OSError):
    raise AlbertError(f"--{flag} {path} is not a readable TFRecord file (delete it to rebuild)")
  if record is None:
    raise AlbertError(f"--{flag} {path} is empty (delete it to rebuild)")
  try:
    example = tf.train.Example.FromString(record.numpy())
  except protobuf_message.DecodeError:
    raise AlbertError(f"--{flag} {path}: record 0 is not a tf.train.Example (not a SQuAD "
                      "feature file?)") from None
  names = example.features.feature
  for name in feature_spec(seq_length, is_training):
    if name not in names:
      raise AlbertError(f"--{flag} {path} has no \"{name}\" feature (not a SQuAD "
                        f"{'training' if is_training else 'prediction'} feature file?)")
  length = len(names["input_ids"].int64_list.value)
  if length != seq_length:
    raise AlbertError(f"--{flag} {path} was written with max_seq_length {length}, but "
                      f"--max_seq_length is {seq_length} (delete it to rebuild)")


def feature_dataset(file_pattern, seq_length, is_training, batch_size, drop_remainder,
                    input_context=None, shuffle_buffer=100, seed=None, vocab_size=None,
                    type_vocab_size=None, bucket_boundaries=None, shuffle=True):
  """tf.data.Dataset of official SQuAD features (int32) from TFRecord file(s).

  Training repeats and shuffles (buffer 100, as the official; shuffle=False: in file order);
  prediction reads once in order.
  Yields dicts with every feature in `feature_spec`. Every record is checked against
  `feature_rules` (vocab_size / type_vocab_size: the model's); a bad one fails iteration with an
  InvalidArgumentError that `record_checks.explain_input_error` turns into one line.
  bucket_boundaries: None, or lengths ending at seq_length (`albert_tf.data.bucketing`): the
  sequence features of each batch are cut to the bucket of its longest feature; training
  batches group features of similar length, prediction batches come sorted by length (the
  outputs are keyed by unique_ids).
  """
  files = tf.io.gfile.glob(file_pattern)
  if not files:
    raise AlbertError(f"no SQuAD feature file matches {file_pattern}")
  dataset = tf.data.Dataset.from_tensor_slices(sorted(files))
  pipelines = input_context.num_input_pipelines if input_context is not None else 1
  if pipelines > 1 and len(files) >= pipelines:
    dataset = dataset.shard(pipelines, input_context.input_pipeline_id)
  dataset = dataset.interleave(record_checks.tagged_records, cycle_length=1)
  if pipelines > 1 and len(files) < pipelines:  # one file (the usual case): shard its records
    dataset = dataset.shard(pipelines, input_context.input_pipeline_id)
  if is_training:
    dataset = dataset.repeat()
    if shuffle:
      dataset = dataset.shuffle(shuffle_buffer, seed=seed)
  rules = feature_rules(seq_length, is_training, vocab_size, type_vocab_size)

  def decode(batch):
    parsed = record_checks.parse_checked_batch(batch, rules)
    return {name: tf.cast(value, tf.int32) for name, value in parsed.items()}

  # Batched first: parsing and checking a batch at once is much cheaper than record by record.
  sort_for_eval = bool(bucket_boundaries) and not is_training  # (outputs keyed by unique_ids)
  dataset = dataset.batch(bucketing.EVAL_WINDOW_EXAMPLES if sort_for_eval else batch_size,
                          drop_remainder=drop_remainder and not sort_for_eval)
  dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  if bucket_boundaries:
    if not is_training:
      dataset = bucketing.sort_windows_by_length(dataset, batch_size)
    elif shuffle:  # (in file order, each batch is only cut to its bucket)
      dataset = bucketing.group_by_length(dataset, batch_size, seed=seed)
    dataset = dataset.map(lambda features: bucketing.trim_batch_to_bucket(features,
                                                                           bucket_boundaries))
  return dataset.prefetch(tf.data.AUTOTUNE)


# ----------------------------------------------------------------------------- "left" features


def conversion_settings(max_seq_length, doc_stride, max_query_length, do_lower_case,
                        spm_model_file=None):
  """What a cached feature file depends on (stored with it, checked when it is reused)."""
  spm = None
  if spm_model_file:
    spm = (fileio.file_sha1(spm_model_file) if fileio.exists(spm_model_file)
           else os.path.basename(spm_model_file))
  return {"max_seq_length": int(max_seq_length), "doc_stride": int(doc_stride),
          "max_query_length": int(max_query_length), "do_lower_case": bool(do_lower_case),
          "spm_model": spm}


def examples_fingerprint(examples):
  """sha1 of what prediction features depend on: each question's id, text and passage."""
  digest = hashlib.sha1()
  for example in examples:
    for text in (example.qas_id, example.question_text, example.paragraph_text):
      digest.update(text.encode("utf-8"))
      digest.update(b"\0")
  return f"{len(examples)}:{digest.hexdigest()}"


def save_features_left(features, path, settings, examples, feature_file_identity=None):
  """Writes the prediction features' post-processing data (JSON, temp name then rename).

  feature_file_identity: `record_checks.file_identity` of the feature TFRecord written with
  them, so that a later run reuses that TFRecord only while it is unchanged.
  """
  fileio.write_json(path, {
      "format": _LEFT_FILE_FORMAT,
      "settings": settings,
      "examples": examples_fingerprint(examples),
      "feature_file": feature_file_identity,
      "features": [dataclasses.asdict(f) for f in features],
  })


def load_features_left(path, settings, examples):
  """Reads a left file; AlbertError if it is not ours or was built with other settings."""
  return _features_from_left(_read_features_left(path, settings, examples))


def _read_features_left(path, settings, examples):
  """The left file's JSON payload, checked against the settings and questions."""
  flag = "--predict_feature_left_file"
  try:
    payload = fileio.read_json(path)
  except (json.JSONDecodeError, UnicodeDecodeError):
    raise AlbertError(f"{flag} {path} is not an albert_tf feature file (an official pickle?); "
                      "delete it to rebuild")
  if not isinstance(payload, dict) or payload.get("format") != _LEFT_FILE_FORMAT:
    raise AlbertError(f"{flag} {path} is not an albert_tf feature file; delete it to rebuild")
  if payload["settings"] != settings:
    raise AlbertError(f"{flag} {path} was built with {payload['settings']}, now {settings}; "
                      "delete it and --predict_feature_file to rebuild")
  if payload["examples"] != examples_fingerprint(examples):
    raise AlbertError(f"{flag} {path} was built from other questions than the predict file "
                      "(ids, questions or passages differ); delete it to rebuild")
  return payload


def _features_from_left(payload):
  features = []
  for item in payload["features"]:
    item["token_is_max_context"] = {int(k): v for k, v in item["token_is_max_context"].items()}
    features.append(SquadFeature(**item))
  return features


def prepare_predict_features(examples, tokenizer, settings, predict_feature_file,
                             predict_feature_left_file):
  """The cached prediction features: loaded when both files exist and the TFRecord is the one
  written with the left file (else both are rebuilt, with a note), else built and written.

  Returns the list of SquadFeature (for post-processing); the TFRecord is at predict_feature_file.
  """
  if (fileio.exists(predict_feature_file) and
      fileio.exists(predict_feature_left_file)):
    logging.info("Loading cached prediction features from %s", predict_feature_left_file)
    payload = _read_features_left(predict_feature_left_file, settings, examples)
    features = _features_from_left(payload)
    problem = record_checks.cached_file_problem(
        predict_feature_file, payload.get("feature_file"), expected_count=len(features),
        counted="features")
    if problem is None:
      check_feature_file(predict_feature_file, settings["max_seq_length"], False,
                         "predict_feature_file")
      return features
    logging.warning("%s; rebuilding it and %s from --predict_file", problem,
                    predict_feature_left_file)
  features = write_features(
      convert_examples_to_features(
          examples, tokenizer, settings["max_seq_length"], settings["doc_stride"],
          settings["max_query_length"], is_training=False),
      predict_feature_file, is_training=False, keep=True)
  save_features_left(features, predict_feature_left_file, settings, examples,
                     record_checks.file_identity(predict_feature_file))
  return features


def _settings_path(feature_file):
  return feature_file + ".settings.json"


def _read_sidecar(path):
  """The JSON of a feature file's sidecar; None if there is none or it is unreadable (then it
  vouches for nothing and the file is checked as one of the official code's)."""
  if not fileio.exists(path):
    return None
  try:
    return fileio.read_json(path)
  except (ValueError, UnicodeDecodeError):
    logging.warning("%s: unreadable sidecar, ignored", path)
    return None


def prepare_train_features(examples, tokenizer, settings, train_feature_file):
  """Writes the training TFRecord unless it exists (then checks it). Returns the file path.

  Next to a file we write goes `<file>.settings.json`: the settings, the number of features and
  the file's size and sha1. A reused file with such a record must match the current settings
  (else AlbertError: an explicit file is not overwritten for that) and be the file written (else
  it is rebuilt from --train_file, with a note). Files from the official tool have none: they
  must be whole TFRecords with the right sequence length.
  """
  settings_path = _settings_path(train_feature_file)
  if fileio.exists(train_feature_file):
    logging.info("Using cached training features %s", train_feature_file)
    sidecar = _read_sidecar(settings_path)
    # Older sidecars hold the settings alone.
    recorded = sidecar.get("settings", sidecar) if isinstance(sidecar, dict) else None
    if sidecar is not None and recorded != settings:
      raise AlbertError(f"--train_feature_file {train_feature_file} was built with {recorded}, "
                        f"now {settings}; delete it to rebuild")
    identity = sidecar if isinstance(sidecar, dict) and "settings" in sidecar else None
    problem = record_checks.cached_file_problem(train_feature_file, identity)
    if problem is None:
      check_feature_file(train_feature_file, settings["max_seq_length"], True,
                         "train_feature_file")
      return train_feature_file
    logging.warning("%s; rebuilding it from --train_file", problem)
  num = write_features(
      convert_examples_to_features(
          examples, tokenizer, settings["max_seq_length"], settings["doc_stride"],
          settings["max_query_length"], is_training=True),
      train_feature_file, is_training=True)
  fileio.write_json(settings_path, {"settings": settings, "num_features": num,
                                    **record_checks.file_identity(train_feature_file)})
  logging.info("Wrote %d training features to %s", num, train_feature_file)
  return train_feature_file
