"""Decoding input text as UTF-8, with the place of a bad byte as users look for it.

Every reader of users' text (GLUE/RACE/SQuAD and custom task files, the corpora of
create_pretraining_data.py and make_pair_task) decodes here, so a file that is not UTF-8 is
always reported the same way, as one line naming the file, the line and the column (counted in
characters, as editors do) and the byte:

  glue/MRPC/train.tsv: line 5, column 12: not UTF-8 text (invalid continuation byte 0xe9 at
  byte offset 420; saved as Latin-1 or Windows-1252? re-save it as UTF-8)
"""

import codecs

from albert_tf.common import fileio
from albert_tf.errors import AlbertError, file_error_reason, file_errors

_HINT = "saved as Latin-1 or Windows-1252? re-save it as UTF-8"


def error(path, data, decode_error, line=None, advice=None):
  """The AlbertError for `data` (bytes of `path`) that failed to decode.

  Args:
    path: the file, as the user named it.
    data: the bytes that were decoded: the whole file, or one line of it (then `line` is given).
    decode_error: the UnicodeDecodeError of data.decode("utf-8").
    line: the 1-based line number of `data` when it is a single line (the byte offset in the
      file is then unknown and not shown); None: `data` is the whole file.
    advice: what to do instead of the default hint (e.g. a flag that skips such lines).
  """
  start = decode_error.start
  line_start = data.rfind(b"\n", 0, start) + 1
  number = line if line is not None else data.count(b"\n", 0, start) + 1
  # Characters before the bad byte on its line (earlier bad bytes count as one each).
  column = len(data[line_start:start].decode("utf-8", errors="replace")) + 1
  where = f"{decode_error.reason} 0x{data[start]:02x}"
  if line is None:
    where += f" at byte offset {start}"
  return AlbertError(f"{path}: line {number}, column {column}: not UTF-8 text ({where}; "
                     f"{advice or _HINT})")


def decode(data, path, line=None, advice=None, bom=False):
  """`data` (bytes) decoded as UTF-8; AlbertError (`error`) naming line and column if it is not.

  bom: drop a leading UTF-8 byte-order mark (text editors on Windows write one).
  """
  try:
    text = data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise error(path, data, e, line=line, advice=advice) from None
  if bom and text.startswith(codecs.BOM_UTF8.decode("utf-8")):
    text = text[1:]
  return text


def read_file(path, expected="a UTF-8 text file", bom=True):
  """The whole text of a file (local or any tf.io.gfile path).

  Raises:
    AlbertError: the file is missing, a directory, unreadable (naming `expected`), or not UTF-8
      (naming line, column and byte offset).
  """
  try:
    data = fileio.read_bytes(path)
  except file_errors() as e:
    if fileio.isdir(path):
      raise AlbertError(f"{path}: is a directory (expected {expected})") from None
    if not fileio.exists(path):
      raise AlbertError(f"{path}: file not found (expected {expected})") from None
    raise AlbertError(f"{path}: cannot read ({file_error_reason(e)})") from None
  return decode(data, path, bom=bom)
