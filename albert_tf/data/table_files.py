"""The user's own example files: TSV, CSV or JSON Lines -> records, each with the line it is on.

A `Table` is one file read whole: its header (TSV/CSV with a header), its records (a list of
field strings for TSV/CSV, a dict for JSON Lines) and the line each record starts on, so every
problem found later can be reported as `file:line`. Columns are named (header names, JSON keys)
or numbered from 0 (files without a header); `Table.column` turns a column flag into the key of
a record and `Table.field` reads it.

The formats:
  * TSV: one record per line, fields split on tabs, no quoting (as GLUE's files; a field may
    hold quote characters). Text with tabs or line breaks needs CSV or JSON Lines.
  * CSV: RFC 4180 (Python's csv module, strict): quoted fields may hold commas, quotes and line
    breaks; a record is reported at the line it starts on.
  * JSON Lines: one JSON object per line (`.jsonl`, or `.json` as the CLUE benchmark's
    train.json / dev.json / test.json, which are JSON Lines too).
Files are UTF-8 (a byte-order mark, as Excel writes, is dropped). Blank lines after the last
record are ignored; a blank line between records is an error, as is every record whose number of
fields differs from the first line's.
"""

import csv
import dataclasses
import io
from typing import List, Optional, Sequence, Tuple, Union

from albert_tf.common import utf8
from albert_tf.errors import AlbertError, parse_json_object

FORMATS = ("tsv", "csv", "jsonl")
# The file-name extensions of each format.
EXTENSIONS = {"tsv": ("tsv",), "csv": ("csv",), "jsonl": ("jsonl", "json")}
# How each format names what a record is made of, for messages.
_FIELDS = {"tsv": "tab-separated fields", "csv": "comma-separated fields",
           "jsonl": "a JSON object"}


def read_text(path, expected="a UTF-8 text file"):
  """The whole text of a local file; AlbertError (naming `expected`) when it cannot be read, or
  naming the line and column of a byte that is not UTF-8 (albert_tf/common/utf8.py)."""
  return utf8.read_file(path, expected)


def _without_trailing_blanks(records, is_blank):
  while records and is_blank(records[-1][1]):
    records.pop()
  return records


def _split_lines(text):
  """[(line number, line)] without line ends; blank lines after the last record dropped."""
  lines = [(number, line.rstrip("\r")) for number, line in enumerate(text.split("\n"), start=1)]
  return _without_trailing_blanks(lines, lambda line: not line.strip())


def _tsv_records(path, text):
  return [(number, line.split("\t")) for number, line in _split_lines(text)]


def _csv_records(path, text):
  reader = csv.reader(io.StringIO(text), strict=True)
  records = []
  start = 1  # the line the next record starts on (reader.line_num: the line it ended on)
  try:
    for fields in reader:
      records.append((start, fields))
      start = reader.line_num + 1
  except csv.Error as e:
    raise AlbertError(f"{path}:{start}: not valid CSV ({e})") from None
  return _without_trailing_blanks(records, lambda fields: not "".join(fields).strip())


def _jsonl_records(path, text):
  records = []
  for number, line in _split_lines(text):
    if not line.strip():
      raise AlbertError(f"{path}:{number}: empty line (expected a JSON object)")
    record = parse_json_object(line, f"{path}:{number}",
                               'a JSON object ({"field": value, ...})')
    records.append((number, record))
  return records


_READERS = {"tsv": _tsv_records, "csv": _csv_records, "jsonl": _jsonl_records}

Record = Union[List[str], dict]


@dataclasses.dataclass
class Table:
  """One file's records.

  path: the file. data_format: "tsv", "csv" or "jsonl".
  header: the column names of a TSV/CSV file's first line, or None (no header, or JSON Lines).
  records: [(line number, record)]: a list of strings (TSV/CSV) or a dict (JSON Lines), in file
    order, header excluded; every TSV/CSV record has as many fields as the file's first line.
  """
  path: str
  data_format: str
  header: Optional[List[str]]
  records: List[Tuple[int, Record]]

  def column(self, ref, flag):
    """The record key of column `ref` (a header name or a number from 0; a JSON key).

    flag: the flag that gave `ref`, for the message. Raises AlbertError when this file has no
    such column.
    """
    if self.data_format == "jsonl":
      return ref  # each record is checked when it is read: JSON objects may differ in keys
    if self.header is not None and ref in self.header:
      if self.header.count(ref) > 1:
        raise AlbertError(f"{self.path}:1: the header names {ref!r} more than once ({flag})")
      return self.header.index(ref)
    width = len(self.header) if self.header is not None else len(self.records[0][1])
    if not ref.isdigit():
      if self.header is None:
        raise AlbertError(f"{flag}={ref!r}: {self.path} has no header line, so its columns are "
                          f"numbers from 0 (it has {width})")
      raise AlbertError(f"{self.path}:1: no column {ref!r} in the header ({flag}; the columns "
                        f"are {', '.join(map(repr, self.header))})")
    if int(ref) >= width:
      raise AlbertError(f"{self.path}:1: {flag}={ref} but the file has {width} "
                        f"{_FIELDS[self.data_format]} (columns 0..{width - 1})")
    return int(ref)

  def has_column(self, ref):
    """Whether `column(ref)` would find `ref` (for columns a split may leave out)."""
    try:
      self.column(ref, "")
    except AlbertError:
      return False
    return True

  def field(self, line, record, key, flag):
    """The value at `key` (from `column`) of the record on `line`; for JSON Lines any JSON
    value. AlbertError naming file:line when a JSON record lacks the key."""
    if self.data_format != "jsonl":
      return record[key]
    if key not in record:
      raise AlbertError(f"{self.path}:{line}: no field {key!r} ({flag}; the record has "
                        f"{', '.join(map(repr, record)) or 'no fields'})")
    return record[key]


def _check_widths(path, data_format, records):
  """Every TSV/CSV record has as many fields as the first line."""
  width = len(records[0][1])
  for line, fields in records:
    if len(fields) <= 1 and not "".join(fields).strip():
      raise AlbertError(f"{path}:{line}: empty line (expected {width} {_FIELDS[data_format]})")
    if len(fields) != width:
      raise AlbertError(f"{path}:{line}: expected {width} {_FIELDS[data_format]} (as line "
                        f"{records[0][0]}), found {len(fields)}")


def read_table(path, data_format, header=True):
  """Reads a whole TSV, CSV or JSON Lines file.

  Args:
    path: a local file or a tf.io.gfile URL (gs://...).
    data_format: one of FORMATS.
    header: TSV/CSV: whether the first line names the columns (ignored for JSON Lines).
  Returns:
    a Table with at least one record.
  Raises:
    AlbertError: the file is missing, not UTF-8, not valid CSV/JSON, or a record has another
      number of fields than the first line (file:line), or it holds no records.
  """
  if data_format not in FORMATS:
    raise AlbertError(f"{path}: unknown data format {data_format!r}; expected one of "
                      f"{', '.join(FORMATS)}")
  records = _READERS[data_format](path, read_text(path, f"a {data_format.upper()} file"))
  names = None
  if data_format != "jsonl" and records:
    _check_widths(path, data_format, records)
    if header:
      names = [name.strip() for name in records.pop(0)[1]]
  if not records:
    what = "only a header line" if names else "no records"
    raise AlbertError(f"{path}: no examples (the file holds {what})")
  return Table(path=path, data_format=data_format, header=names, records=records)


def format_of(path):
  """The format a file name's extension says ("tsv", "csv", "jsonl"), or None."""
  for data_format in FORMATS:
    if path.lower().endswith(tuple("." + ext for ext in EXTENSIONS[data_format])):
      return data_format
  return None


def names(paths: Sequence[str]):
  """`a`, `a or b`, `a, b or c` (for messages)."""
  paths = list(paths)
  return paths[0] if len(paths) == 1 else ", ".join(paths[:-1]) + " or " + paths[-1]
