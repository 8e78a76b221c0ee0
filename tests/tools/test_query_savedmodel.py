"""query_savedmodel on a labelled pair file: every row queried, how many the model got right,
beside the majority-class baseline of the same rows; unlabelled files are not scored.

The SavedModel is a hand-made stand-in with the classifier export's serving signature (raw
text_a/text_b in; label, probabilities out) whose answers are known: label "1" exactly when
text_b contains the word "follows". That makes the right count checkable by hand.
"""

import os
import subprocess
import sys

import pytest
import tensorflow as tf

from albert_tf.errors import AlbertError
from albert_tf.tools import savedmodel_query
from tests.helpers import remote as remote_helpers
from tests.helpers.paths import REPO

HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
# (gold, text_a, text_b): the stand-in answers 1, 1, 0, 0, 1, 0 -> right on rows 1, 3, 5, 6.
ROWS = [("1", "a first sentence", "this follows it"),
        ("0", "another sentence", "it follows nothing"),
        ("0", "third sentence", "unrelated words"),
        ("1", "fourth sentence", "no match here"),
        ("1", "fifth sentence", "what follows"),
        ("0", "sixth sentence", "more unrelated words")]


class _StandIn(tf.Module):

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                tf.TensorSpec([None], tf.string, name="text_b")])
  def serve(self, text_a, text_b):
    del text_a
    yes = tf.strings.regex_full_match(text_b, ".*\\bfollows\\b.*")
    p1 = tf.where(yes, 0.9, 0.2)
    return {"label": tf.where(yes, "1", "0"), "probabilities": tf.stack([1 - p1, p1], axis=1)}


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("export") / "1")
  module = _StandIn()
  tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
  return os.path.dirname(path)  # a TF Serving base path: its newest version is queried


def _write(path, rows, header=HEADER):
  path.write_text(header + "".join(f"{g}\t{2 * n}\t{2 * n + 1}\t{a}\t{b}\n"
                                   for n, (g, a, b) in enumerate(rows)))
  return str(path)


def _query(args, cwd):
  return subprocess.run([sys.executable, "-m", "albert_tf.cli.query_savedmodel"] + args,
                        capture_output=True, text=True, cwd=cwd, timeout=300, check=False,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO))


def test_labelled_file_prints_right_count_beside_the_majority_baseline(export_dir, tmp_path):
  pairs = _write(tmp_path / "heldout.tsv", ROWS)
  proc = _query([f"--export_dir={export_dir}", f"--pair_file={pairs}", "--num_pairs=0",
                 "--show=2"], tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  out = proc.stdout
  assert out.count("-> label ") == 2, out  # --show=2 prints two, the score counts all six
  assert "(gold 1: right)" in out and "(gold 0: WRONG)" in out, out
  assert out.strip().splitlines()[-1] == (
      "4 of 6 right; majority-class baseline (always label 0): 3 of 6"), out
  # --num_pairs limits the rows sent: the first four, gold 1, 0, 0, 1 (a tie: the smaller
  # label is the majority answer).
  proc = _query([f"--export_dir={export_dir}", f"--pair_file={pairs}", "--num_pairs=4"],
                tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.count("-> label ") == 4
  assert proc.stdout.strip().splitlines()[-1] == (
      "2 of 4 right; majority-class baseline (always label 0): 2 of 4"), proc.stdout


def test_unlabelled_test_file_is_answered_not_scored(export_dir, tmp_path):
  pairs = _write(tmp_path / "test.tsv", ROWS,
                 header="index\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
  proc = _query([f"--export_dir={export_dir}", f"--pair_file={pairs}", "--num_pairs=3"],
                tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.count("-> label ") == 3 and "gold" not in proc.stdout
  assert " right" not in proc.stdout, proc.stdout


def test_score_and_reader_by_hand(tmp_path):
  assert savedmodel_query.score(["1", "1", "0"], ["1", "0", "0"]) == savedmodel_query.Score(
      right=2, total=3, majority_label="0", majority_right=2)
  # Unlabelled rows are left out of both counts; nothing labelled: no score.
  assert savedmodel_query.score(["1", "0"], [None, "1"]).total == 1
  assert savedmodel_query.score(["1"], [None]) is None
  rows = savedmodel_query.read_pairs(_write(tmp_path / "dev.tsv", ROWS), 0)
  assert rows == ROWS
  bad = tmp_path / "bad.tsv"
  bad.write_text(HEADER + "1\tonly\tthree\n")
  with pytest.raises(AlbertError, match=r"bad.tsv:2: expected 5 tab-separated columns, got 3"):
    savedmodel_query.read_pairs(str(bad), 0)
  with pytest.raises(AlbertError, match="missing.tsv: cannot read pair file"):
    savedmodel_query.read_pairs(str(tmp_path / "missing.tsv"), 0)


def test_pairs_on_ram_read_as_the_local_ones(tmp_path):
  """ram:// stands in for gs://; a missing file is the local one-line error."""
  local = _write(tmp_path / "dev.tsv", ROWS)
  assert savedmodel_query.read_pairs(remote_helpers.copied_to_ram(local), 0) == ROWS
  bucket = remote_helpers.ram_bucket()
  with pytest.raises(AlbertError) as info:
    savedmodel_query.read_pairs(f"{bucket}/missing.tsv", 0)
  assert str(info.value) == (
      f"{bucket}/missing.tsv: cannot read pair file (No such file or directory)")
