"""Input TFRecords are checked, not trusted: one-line errors naming the file and the record.

Three layers, from the cheapest to the most thorough:

  * `check_record_files` (before a run reads anything): every file's framing must end exactly
    at its end. A 0-byte file (when every input is empty; one empty shard among good ones is a
    warning), a file cut inside a record or a file that is no TFRecord at all is an AlbertError
    naming it. It reads a few bytes at the head and the tail of each file (O(1) per file, in
    parallel), so it stays cheap on corpora of thousands of large files.
  * `tagged_records` + `parse_checked_batch` (every batch, inside the tf.data pipeline): each
    record carries its file and index; every feature's length and value range (ids <
    vocab_size, segment ids < type_vocab_size, positions < max_seq_length, labels < the number
    of classes, ...) is checked with one reduction per feature. A bad record fails the pipeline
    with an InvalidArgumentError whose message holds one line between markers:
    "<file>: record <i>: <feature> <what>, expected <...>".
  * `explain_input_error` (after a failure): the trainer hands it any tf.errors.OpError raised
    while reading the input (or in a step that consumed it) and the files read; it returns that
    one-line AlbertError: the marked line, or, for a record corrupted or cut during the run and
    for records TensorFlow cannot parse, the first bad file and record found by scanning them.

Cached feature files (GLUE/RACE/SQuAD) are trusted only while their size and sha1 match what
was recorded when they were written (`file_identity`, `cached_file_problem`); files without
such a record must be whole and hold as many records as their source, where it can be counted.

TFRecord framing, per record: uint64 length, uint32 masked crc32c(length), data, uint32 masked
crc32c(data); little-endian.
"""

import concurrent.futures
import dataclasses
import re
import struct
from typing import Optional, Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from albert_tf.common import fileio
from albert_tf.errors import AlbertError

# The one line of a failed in-graph check sits between these in the InvalidArgumentError.
MARKER = "albert_tf-bad-record"
_MARKED_LINE = re.compile(r"\[" + MARKER + r"\] (.*?) \[/" + MARKER + r"\]", re.DOTALL)

_HEADER_BYTES = 12  # uint64 length + uint32 masked crc32c of the length
_FRAMING_BYTES = 16  # header + uint32 masked crc32c of the data
# Tail windows searched for the last record's header: most records are a few kB, so the first
# window nearly always holds it; the forward walk over headers is the fallback.
_TAIL_WINDOWS = (64 << 10, 1 << 20)
# Files checked at once (reads of remote files wait on the network, not on the CPU).
_PARALLEL_FILES = 32
# Records per batch when scanning files after a failure.
_SCAN_BATCH = 1024


# ----------------------------------------------------------------------------- crc32c


def _make_crc32c_table():
  table = []
  for byte in range(256):
    crc = byte
    for _ in range(8):
      crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)  # Castagnoli, reflected
    table.append(crc)
  return table


_CRC32C_TABLE = _make_crc32c_table()


def masked_crc32c(data):
  """The TFRecord checksum of `data` (bytes): crc32c, rotated and offset ("masked")."""
  crc = 0xFFFFFFFF
  for byte in data:
    crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
  crc ^= 0xFFFFFFFF
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _header_length(header):
  """The data length a 12-byte record header announces, or None if its checksum is wrong."""
  length, crc = struct.unpack("<QI", header)
  return length if masked_crc32c(header[:8]) == crc else None


# ----------------------------------------------------------------------------- framing


class _Reader:
  """Positioned reads of one (local or tf.io.gfile) file."""

  def __init__(self, handle):
    self._handle = handle

  def read(self, offset, size):
    self._handle.seek(offset)
    return self._handle.read(size)


def _last_record_found(reader, size, window):
  """True if a record header in the last `window` bytes frames a record ending exactly at EOF.

  Vectorised over every offset of the window: the candidates are the offsets whose uint64
  length field equals the bytes left after them minus the framing; the header checksum then
  confirms one (a chance match of both is a 1 in 2**32 event).
  """
  start = max(0, size - window)
  tail = np.frombuffer(reader.read(start, size - start), np.uint8)
  count = len(tail) - _FRAMING_BYTES + 1
  if count <= 0:
    return False
  wide = tail.astype(np.uint32)
  low = wide[:count] | wide[1:count + 1] << 8 | wide[2:count + 2] << 16 | wide[3:count + 3] << 24
  high_zero = (tail[4:count + 4] | tail[5:count + 5] | tail[6:count + 6] | tail[7:count + 7]) == 0
  expected = (len(tail) - _FRAMING_BYTES - np.arange(count)).astype(np.uint32)
  for offset in np.nonzero((low == expected) & high_zero)[0][::-1]:
    header = tail[offset:offset + _HEADER_BYTES].tobytes()
    if _header_length(header) is not None:
      return True
  return False


def _walk_headers(reader, size):
  """Follows the headers from the start. Returns (complete records, problem or None)."""
  offset = index = 0
  while offset < size:
    header = reader.read(offset, _HEADER_BYTES)
    if len(header) < _HEADER_BYTES:
      return index, (f"record {index}: cut short in its header at byte {size}: the file is "
                     "truncated")
    length = _header_length(header)
    if length is None:
      if index == 0:
        return 0, "not a TFRecord file (its first record header has a wrong checksum)"
      return index, (f"record {index}: the header at byte {offset} has a wrong checksum: the "
                     "file is corrupted")
    end = offset + _FRAMING_BYTES + length
    if end > size:
      return index, (f"record {index}: cut short at byte {size} (the record ends at byte "
                     f"{end}): the file is truncated")
    offset, index = end, index + 1
  return index, None


def _open(path):
  return tf.io.gfile.GFile(path, "rb")


def file_size(path):
  """Bytes in `path` (local or tf.io.gfile); AlbertError naming it if it cannot be read."""
  try:
    return tf.io.gfile.stat(path).length
  except tf.errors.NotFoundError:
    raise AlbertError(f"{path}: no such file") from None
  except tf.errors.OpError as e:
    raise AlbertError(f"{path}: cannot be read ({_first_line(e)})") from None


def framing_problem(path, size=None):
  """What is wrong with `path`'s TFRecord framing, as "<path>: ..." (None: it is whole).

  A 0-byte file is whole (it holds no record). Reads the first header and the file's tail; only
  when the last record is not found there (a damaged file, or a last record over 1 MB) are the
  headers walked from the start.
  """
  size = file_size(path) if size is None else size
  if size == 0:
    return None
  try:
    with _open(path) as handle:
      reader = _Reader(handle)
      first = reader.read(0, _HEADER_BYTES)
      if len(first) == _HEADER_BYTES and _header_length(first) is not None:
        for window in _TAIL_WINDOWS:
          if _last_record_found(reader, size, window):
            return None
          if window >= size:
            break
      _, problem = _walk_headers(reader, size)
  except tf.errors.OpError as e:
    return f"{path}: cannot be read ({_first_line(e)})"
  return f"{path}: {problem}" if problem else None


def check_record_files(files):
  """Checks the framing of every input file before a run reads it.

  Raises AlbertError naming the first file that is cut inside a record or is no TFRecord file,
  or when every file is empty (a pipeline repeating no records would spin forever); logs a
  one-line warning for each empty file among good ones. Returns the files that hold records.
  """
  files = list(files)
  workers = min(_PARALLEL_FILES, len(files))
  if workers > 1:
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
      sizes = list(pool.map(file_size, files))
      problems = list(pool.map(framing_problem, files, sizes))
  else:
    sizes = [file_size(path) for path in files]
    problems = [framing_problem(path, size) for path, size in zip(files, sizes)]
  for problem in problems:
    if problem:
      raise AlbertError(problem)
  empty = [path for path, size in zip(files, sizes) if size == 0]
  if empty and len(empty) == len(files):
    if len(files) == 1:
      raise AlbertError(f"{files[0]}: the file is empty (0 bytes), expected TFRecords")
    raise AlbertError(f"all {len(files)} input files are empty (0 bytes), e.g. {files[0]}: "
                      "expected TFRecords")
  for path in empty:
    logging.warning("%s: the file is empty (0 bytes); it adds no records", path)
  return [path for path, size in zip(files, sizes) if size]


# ----------------------------------------------------------------------------- cached files


def file_identity(path):
  """What a cache sidecar records of a file it vouches for: {"size", "sha1"}."""
  return {"size": file_size(path), "sha1": fileio.file_sha1(path)}


def identity_problem(path, identity):
  """Why `path` is not the file `identity` (from `file_identity`) describes, as
  "<path>: ...", or None.

  The size is compared first (a truncated file fails without being read), then the sha1.
  """
  size = file_size(path)
  if identity.get("size") is not None and size != identity["size"]:
    return (f"{path}: {size} bytes, but {identity['size']} were recorded when it was written "
            "(cut or changed since)")
  if fileio.file_sha1(path) != identity.get("sha1"):
    return (f"{path}: its sha1 differs from the one recorded when it was written (changed "
            "since)")
  return None


def cached_file_problem(path, identity=None, expected_count=None, count_feature=None,
                        counted="records"):
  """Why a cached TFRecord file cannot be reused, as "<path>: ...", or None.

  Args:
    identity: {"size", "sha1"} recorded when the file was written (`file_identity`); when
      given, the file must match it and nothing else is checked.
    expected_count: without identity (a file of the official code, or an older one of ours):
      how many records it must hold (with count_feature: the sum of that feature), as an int or
      a zero-arg callable (called only once the framing is whole; an AlbertError from it means
      "unknown": e.g. the source data is gone), or None (then the framing alone is checked).
    count_feature, counted: what is counted and how the message calls it ("real examples").
  """
  if identity and identity.get("sha1"):
    return identity_problem(path, identity)
  if file_size(path) == 0:
    return f"{path}: the file is empty (0 bytes)"
  problem = framing_problem(path)
  if problem:
    return problem
  if callable(expected_count):
    try:
      expected_count = expected_count()
    except AlbertError as e:
      logging.info("%s: not compared with its source (%s)", path, e)
      expected_count = None
  if expected_count is None:
    return None
  found = count_records(path, count_feature)
  if found != expected_count:
    return f"{path}: holds {found} {counted}, expected {expected_count}"
  return None


def count_records(path, count_feature=None):
  """Records in a TFRecord file; with count_feature, the sum of that int64 scalar feature
  instead (missing: 1), e.g. the official is_real_example. Reads the whole file."""
  dataset = tf.data.TFRecordDataset(path).batch(_SCAN_BATCH)
  if count_feature is None:
    dataset = dataset.map(lambda records: tf.size(records, out_type=tf.int64))
  else:
    spec = {count_feature: tf.io.FixedLenFeature([], tf.int64, default_value=1)}
    dataset = dataset.map(lambda records: tf.reduce_sum(
        tf.io.parse_example(records, spec)[count_feature]))
  return int(dataset.reduce(tf.constant(0, tf.int64), lambda total, n: total + n).numpy())


# ----------------------------------------------------------------------------- in-graph checks


@dataclasses.dataclass(frozen=True)
class FeatureRule:
  """What one feature of every record must hold.

  Attributes:
    name: the feature's name in the tf.train.Example.
    shape: its shape per record: () for a scalar, (seq_len,), (num_choices, seq_len) ...
    dtype: tf.int64 or tf.float32 (as written in the records).
    low, high: values must lie in [low, high) (None: unbounded on that side).
    bound: where the bounds come from, for the message ("vocab_size of the model config").
    length_from: where the length comes from ("--max_seq_length").
    default: a record without this (scalar) feature reads this value (the official readers'
      default for is_real_example); None: the feature is required.
    finite: float values must be finite.
  """
  name: str
  shape: Tuple[int, ...]
  dtype: tf.DType = tf.int64
  low: Optional[float] = None
  high: Optional[float] = None
  bound: str = ""
  length_from: str = ""
  default: Optional[float] = None
  finite: bool = False

  @property
  def length(self):
    return int(np.prod(self.shape, dtype=np.int64))

  def range_text(self):
    if self.low is None and self.high is None:
      return "a finite number"
    low = "" if self.low is None else _number(self.low)
    high = "" if self.high is None else _number(self.high)
    if self.low is not None and self.high is not None:
      text = f"values in [{low}, {high})"
    elif self.high is not None:
      text = f"values < {high}"
    else:
      text = f"values >= {low}"
    return text + (f" ({self.bound})" if self.bound else "")


def _number(value):
  return str(int(value)) if float(value).is_integer() else str(value)


# The functions below run inside tf.data functions (map, interleave). They are graph code as
# written (tf.cond, tf.where; Python `if` only on Python values), so they are marked for AutoGraph
# not to convert: tf.data converts every function it is given, and converting these (their
# source re-parsed and rewritten, callees included) was ~15% of the CPU of a tiny
# run_classifier.py --do_eval.
@tf.autograph.experimental.do_not_convert
def tagged_records(path):
  """The records of one TFRecord file with where they come from.

  Args:
    path: a file name (str or scalar string tensor, e.g. inside `interleave`).
  Returns:
    tf.data.Dataset of {"record": serialized string, "file": path, "index": int64 index of
    the record in its file}; zipped, not mapped, so tagging costs no function call per record.
  """
  path = tf.convert_to_tensor(path, tf.string)
  # (Dataset.range, not Dataset.counter: the latter costs ~5x more per element.)
  return tf.data.Dataset.zip({"record": tf.data.TFRecordDataset(path),
                              "file": tf.data.Dataset.from_tensors(path).repeat(),
                              "index": tf.data.Dataset.range(np.iinfo(np.int64).max)})


@tf.autograph.experimental.do_not_convert
def parse_checked_batch(batch, rules):
  """Parses a batch of tagged records and checks every feature against its rule.

  Lengths are parsed tolerantly (as ragged values), so a record of another length is reported
  with its file and index instead of failing inside parse_example. Each check is one reduction
  per feature; the message is built only when a check fails.

  Args:
    batch: a batch of `tagged_records` elements: record, file [batch] strings, index [batch].
    rules: FeatureRule per feature to read.
  Returns:
    {rule.name: tensor [batch, *rule.shape] of rule.dtype}.
  Raises (when the pipeline runs):
    InvalidArgumentError holding "[MARKER] <file>: record <i>: <feature> ... [/MARKER]".
  """
  spec = {}
  for rule in rules:
    if rule.default is not None:
      spec[rule.name] = tf.io.FixedLenFeature(rule.shape, rule.dtype,
                                              default_value=rule.default)
    else:
      spec[rule.name] = tf.io.RaggedFeature(rule.dtype, row_splits_dtype=tf.int64)
  parsed = tf.io.parse_example(batch["record"], spec)

  ragged = [rule for rule in rules if rule.default is None]
  lengths = {rule.name: parsed[rule.name].row_lengths() for rule in ragged}

  def length_line(rule, row):
    found = lengths[rule.name][row]
    what = tf.where(found == 0, tf.constant("is missing"),
                    tf.strings.join(["has ", tf.strings.as_string(found), " values"]))
    source = f" ({rule.length_from})" if rule.length_from else ""
    return tf.strings.join([what, f", expected {rule.length}{source}"])

  check = _first_failure(batch, ragged,
                         [tf.not_equal(lengths[rule.name], rule.length) for rule in ragged],
                         length_line)
  # The batch's static size where it has one (drop_remainder batches): [-1, ...] would leave
  # the batch dimension open, and every TPU step would then go through the dynamic padder.
  rows = batch["record"].shape[0]
  rows = -1 if rows is None else rows
  with tf.control_dependencies([check]):
    values = {rule.name: tf.reshape(parsed[rule.name].values, [rows, *rule.shape])
              for rule in ragged}
  values.update({rule.name: parsed[rule.name] for rule in rules if rule.default is not None})

  bounded = [rule for rule in rules
             if rule.low is not None or rule.high is not None or rule.finite]
  extremes = {}
  failures = []
  for rule in bounded:
    flat = tf.reshape(values[rule.name], [tf.shape(values[rule.name])[0], -1])
    bad = tf.zeros(tf.shape(flat)[:1], tf.bool)
    if rule.high is not None:
      extremes[rule.name, "max"] = tf.reduce_max(flat, axis=1)
      bad |= extremes[rule.name, "max"] >= tf.cast(rule.high, rule.dtype)
    if rule.low is not None:
      extremes[rule.name, "min"] = tf.reduce_min(flat, axis=1)
      bad |= extremes[rule.name, "min"] < tf.cast(rule.low, rule.dtype)
    if rule.finite:
      extremes[rule.name, "finite"] = tf.reduce_all(tf.math.is_finite(flat), axis=1)
      bad |= tf.logical_not(extremes[rule.name, "finite"])
    failures.append(bad)

  def range_line(rule, row):
    # The value shown: the largest if it is too large, else the smallest, else a non-finite one.
    shown = tf.constant("nan or inf")
    if rule.low is not None:
      low = extremes[rule.name, "min"][row]
      shown = tf.where(low < tf.cast(rule.low, rule.dtype), tf.strings.as_string(low), shown)
    if rule.high is not None:
      high = extremes[rule.name, "max"][row]
      shown = tf.where(high >= tf.cast(rule.high, rule.dtype), tf.strings.as_string(high),
                       shown)
    return tf.strings.join(["holds ", shown, f", expected {rule.range_text()}"])

  check = _first_failure(batch, bounded, failures, range_line)
  with tf.control_dependencies([check]):
    return {name: tf.identity(value) for name, value in values.items()}


def _first_failure(batch, rules, failures, describe):
  """An assertion that no record fails any rule; its message names the first record that does.

  failures: per rule, bool [batch] (True: the record breaks the rule).
  describe(rule, row): scalar string, what is wrong with that record's feature.
  """
  if not rules:
    return tf.no_op()
  failing = tf.stack(failures)  # [rules, batch]
  any_failure = tf.reduce_any(failing)

  def message():
    row = tf.argmax(tf.cast(tf.reduce_any(failing, axis=0), tf.int32), output_type=tf.int32)
    which = tf.argmax(tf.cast(failing[:, row], tf.int32), output_type=tf.int32)
    lines = tf.stack([tf.strings.join([rule.name, " ", describe(rule, row)]) for rule in rules])
    return tf.strings.join([f"[{MARKER}] ", batch["file"][row], ": record ",
                            tf.strings.as_string(batch["index"][row]), ": ",
                            tf.gather(lines, which), f" [/{MARKER}]"])

  text = tf.cond(any_failure, message, lambda: tf.constant(""))
  return tf.debugging.Assert(tf.logical_not(any_failure), [text])


# ----------------------------------------------------------------------------- after a failure


def _first_line(error):
  """TensorFlow's own reason, without the function and iterator names it is wrapped in."""
  text = (getattr(error, "message", None) or str(error)).strip()
  text = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", text)
  text = re.sub(r"^Error in user-defined function .*? Iterator::[\w:]+: ", "", text)
  text = re.sub(r"\s*\[Op:\w+\].*$", "", text, flags=re.MULTILINE)
  return text.splitlines()[0].strip() if text else type(error).__name__


def _unescape(text):
  # tf.debugging.Assert prints strings C-escaped (quotes, backslashes, control characters).
  return re.sub(r"\\(['\"\\])", r"\1", text).replace("\\n", " ").replace("\\t", " ")


_PARSE_ERROR_SIGNS = ("ParseExample", "parse_example", "Can't parse", "Could not parse",
                      "Data types don't match", "Key: ")


def explain_input_error(error, files):
  """The one-line AlbertError behind a tf.errors.OpError raised while reading input files.

  Args:
    error: the OpError raised by the input pipeline, or by a train/eval/predict step that
      consumed it (or the UnicodeDecodeError TensorFlow raises instead for a record holding
      no protocol buffer at all).
    files: the record files the pipeline reads (`Task.input_files(mode)`).
  Returns:
    AlbertError "<file>: record <i>: ..." (or "<file>: ..." when the record index is not
    known), or None when the files are fine and the error was not the input's.
  """
  message = getattr(error, "message", None) or str(error)
  marked = _MARKED_LINE.search(message)
  if marked:
    return AlbertError(_unescape(marked.group(1)))
  files = list(files or [])
  if not files:
    return None
  for path in files:  # a file cut, replaced or deleted during the run: cheap, so first
    try:
      problem = framing_problem(path)
    except AlbertError as e:
      return e
    if problem:
      return AlbertError(problem)
  # (A record that is not even a protocol buffer makes TensorFlow put raw bytes in its message,
  # which fails to decode as UTF-8: a UnicodeDecodeError instead of an OpError.)
  is_parse_error = (isinstance(error, UnicodeDecodeError) or
                    any(sign in message for sign in _PARSE_ERROR_SIGNS))
  if not isinstance(error, tf.errors.DataLossError) and not is_parse_error:
    return None
  logging.info("Scanning %d input file(s) for the record TensorFlow could not read",
               len(files))
  for path in files:
    problem = _first_unreadable_record(path)
    if problem:
      return AlbertError(problem)
  if is_parse_error:
    more = f" (or one of {len(files) - 1} more files)" if len(files) > 1 else ""
    return AlbertError(f"{files[0]}{more}: a record cannot be parsed: {_first_line(error)}")
  return None


def _layout_spec(path):
  """A ragged parsing spec with the feature names and types of `path`'s first record."""
  for record in tf.data.TFRecordDataset(path).take(1):
    example = tf.train.Example.FromString(record.numpy())
    kinds = {"int64_list": tf.int64, "float_list": tf.float32, "bytes_list": tf.string}
    return {name: tf.io.RaggedFeature(kinds[feature.WhichOneof("kind") or "bytes_list"],
                                      row_splits_dtype=tf.int64)
            for name, feature in example.features.feature.items()}
  return {}


def _first_unreadable_record(path):
  """"<path>: record <i>: ..." for the first record of `path` that cannot be read or parsed
  with the layout of its first record; None if every record can. Scans batches in C++, then
  the failing batch record by record."""
  try:
    spec = _layout_spec(path)
  except tf.errors.DataLossError as e:
    return f"{path}: record 0: {_data_loss_text(e)}"
  except Exception as e:  # pylint: disable=broad-except
    return f"{path}: record 0: not a tf.train.Example ({type(e).__name__})"

  def count_parsed(records):
    # The parse is what the scan runs (its sizes are returned so that it is not pruned); the
    # count says how far it got.
    parsed = tf.io.parse_example(records, spec) if spec else {}
    return tf.size(records), [tf.size(t) for t in tf.nest.flatten(parsed, True)]

  start = 0
  counts = iter(tf.data.TFRecordDataset(path).batch(_SCAN_BATCH).map(count_parsed))
  while True:
    try:
      start += int(next(counts)[0])
    except StopIteration:
      return None
    except (tf.errors.OpError, UnicodeDecodeError):
      break
  records = iter(tf.data.TFRecordDataset(path).skip(start).take(_SCAN_BATCH).enumerate(start))
  while True:
    try:
      index, record = next(records)
    except StopIteration:
      return None
    except tf.errors.DataLossError as e:
      return f"{path}: record {start}: {_data_loss_text(e)}"
    start = int(index) + 1
    problem = _record_problem(record.numpy(), spec)
    if problem:
      return f"{path}: record {int(index)}: {problem}"


def _data_loss_text(error):
  if "truncated" in _first_line(error):
    return "cut short: the file is truncated"
  return "its checksum does not match its bytes: the file is corrupted"


def _record_problem(serialized, spec):
  """Why one serialized record does not parse with `spec`, or None."""
  try:
    example = tf.train.Example.FromString(serialized)
  except Exception:  # pylint: disable=broad-except
    return "not a tf.train.Example"
  kinds = {tf.int64: "int64_list", tf.float32: "float_list", tf.string: "bytes_list"}
  for name, feature in sorted(example.features.feature.items()):
    if name in spec and feature.WhichOneof("kind") not in (None, kinds[spec[name].dtype]):
      return (f"{name} is a {feature.WhichOneof('kind')}, expected {kinds[spec[name].dtype]} "
              "(as in the file's first record)")
  return None
