"""The one rule for a flag's comma-separated file patterns (albert_tf/common/file_patterns.py),
which create_pretraining_data.py and run_pretraining.py both read --input_file by."""

import os

import pytest

from albert_tf.common import file_patterns, fileio
from albert_tf.errors import AlbertError
from tests.helpers import remote as remote_helpers


@pytest.fixture
def files(tmp_path):
  for name in ("b.txt", "a.txt", "c.dat"):
    (tmp_path / name).write_text(name)
  (tmp_path / "sub.txt").mkdir()  # a directory that a glob matches: not an input file
  (tmp_path / ".a.txt.tmp-1").write_text("half written")  # hidden: `*` skips it, as a shell
  return tmp_path


def test_patterns_in_order_each_sorted_each_file_once(files):
  value = f" {files}/c.dat , {files}/*.txt,,{files}/a.txt"
  assert file_patterns.expand(value) == [str(files / n) for n in ("c.dat", "a.txt", "b.txt")]
  assert file_patterns.expand(f"{files}/*") == [str(files / n)
                                                for n in ("a.txt", "b.txt", "c.dat")]
  assert file_patterns.expand(f"{files}/.*") == [str(files / ".a.txt.tmp-1")]  # named: read


def test_home_is_expanded(files, monkeypatch):
  monkeypatch.setenv("HOME", str(files))
  assert file_patterns.expand("~/a.txt") == [str(files / "a.txt")]


@pytest.mark.parametrize("value, message", [
    ("", "--input_file is empty: expected one or more comma-separated files or globs"),
    (" , ", "--input_file is empty: expected one or more comma-separated files or globs"),
    ("{d}/a.txt,{d}/none-*.txt", "--input_file: no file matches '{d}/none-*.txt'"),
    ("{d}/sub.txt", "--input_file: no file matches '{d}/sub.txt'"),  # only a directory
])
def test_each_broken_rule_is_one_line_naming_the_flag(files, value, message):
  with pytest.raises(AlbertError) as e:
    file_patterns.expand(value.format(d=files))
  assert str(e.value) == message.format(d=files)


def test_the_flag_is_named_and_unreadable_files_too(files, monkeypatch):
  with pytest.raises(AlbertError, match=r"^--eval_file: no file matches 'x\*'$"):
    file_patterns.expand("x*", flag="--eval_file")
  # Tests run as root, where chmod cannot make a file unreadable: the permission check is asked.
  monkeypatch.setattr(os, "access", lambda path, mode: not path.endswith("b.txt"))
  with pytest.raises(AlbertError) as e:
    file_patterns.expand(f"{files}/*.txt")
  assert str(e.value) == f"--input_file: {files / 'b.txt'} is not readable (permission denied)"


def test_patterns_on_ram_match_files_only(files):
  """ram:// stands in for gs:// (tf.io.gfile.glob); a directory a glob matches is no input file
  there either."""
  remote = remote_helpers.copied_to_ram(files)
  assert fileio.isdir(f"{remote}/sub.txt")
  assert file_patterns.expand(f"{remote}/c.dat,{remote}/*.txt") == [
      f"{remote}/{name}" for name in ("c.dat", "a.txt", "b.txt")]
  with pytest.raises(AlbertError, match=r"^--input_file: no file matches 'ram://.*/sub\.txt'$"):
    file_patterns.expand(f"{remote}/sub.txt")


def test_a_glob_never_reads_a_vocabulary_record(tmp_path):
  """create_pretraining_data.py's <output>.vocab.json sits beside the records: `out/*` reads the
  records alone; named outright, the record is a file like any other."""
  for name in ("train.tfrecord", "train.tfrecord.vocab.json", "shard.vocab.json"):
    (tmp_path / name).write_text("x")
  assert file_patterns.expand(str(tmp_path / "*")) == [str(tmp_path / "train.tfrecord")]
  named = str(tmp_path / "shard.vocab.json")
  assert file_patterns.expand(named) == [named]
