"""albert_tf/common/utf8.py: every reader of users' text reports a byte that is not UTF-8 by file,
line and column (characters, as editors count), with the byte and its offset."""

import json
import os

import pytest

from albert_tf import AlbertError
from albert_tf.common import utf8
from albert_tf.data import race, squad, table_files
from albert_tf.tools import pair_task

# Line 3, after "naïve caf" (9 characters; "ï" is 2 bytes): a Latin-1 "é" at byte offset 18.
TEXT = "one\ntwo\nna\u00efve ".encode("utf-8") + b"caf\xe9\nfour\n"
WHERE = "line 3, column 10: not UTF-8 text (invalid continuation byte 0xe9 at byte offset 18; "


def test_whole_file_line_column_and_offset(tmp_path):
  path = tmp_path / "x.txt"
  path.write_bytes(TEXT)
  with pytest.raises(AlbertError) as e:
    utf8.read_file(str(path))
  assert str(e.value) == f"{path}: {WHERE}saved as Latin-1 or Windows-1252? re-save it as UTF-8)"


def test_one_line_of_a_file_and_advice():
  line = "na\u00efve ".encode("utf-8") + b"caf\xe9 au lait"
  with pytest.raises(AlbertError, match=r"^c.txt: line 7, column 10: not UTF-8 text \(invalid "
                     r"continuation byte 0xe9; use --flag\)$"):
    utf8.decode(line, "c.txt", line=7, advice="use --flag")


def test_a_utf8_byte_order_mark_is_dropped(tmp_path):
  path = tmp_path / "bom.tsv"
  path.write_bytes(b"\xef\xbb\xbfa\tb\n")
  assert utf8.read_file(str(path)) == "a\tb\n"


def _race_tree(root):
  level = root / "RACE" / "train" / "middle"
  level.mkdir(parents=True)
  passage = {"article": "x", "questions": ["q"], "options": [["a", "b", "c", "d"]],
             "answers": ["A"], "id": "m1.txt"}
  (level / "all.txt").write_bytes(json.dumps(passage).encode() + b"\n" + TEXT)
  return str(level / "all.txt")


@pytest.mark.parametrize("reader", ["glue_or_custom", "race", "squad", "make_pair_task"])
def test_every_reader_reports_line_and_column(tmp_path, reader):
  path = str(tmp_path / "data.txt")
  with open(path, "wb") as f:
    f.write(TEXT)
  where = WHERE
  if reader == "glue_or_custom":
    call = lambda: table_files.read_table(path, "tsv")
  elif reader == "race":
    path = _race_tree(tmp_path)
    before = os.path.getsize(path) - len(TEXT)  # the good passage's line
    where = WHERE.replace("line 3", "line 4").replace("offset 18", f"offset {18 + before}")
    call = lambda: race.read_examples(str(tmp_path), "train")
  elif reader == "squad":
    call = lambda: squad.load_squad_json(path)
  else:
    call = lambda: pair_task.read_documents(path)
  with pytest.raises(AlbertError) as e:
    call()
  assert str(e.value).startswith(f"{path}: {where}"), str(e.value)
