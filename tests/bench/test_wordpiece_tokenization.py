"""bench/speed/wordpiece_tokenization.py: the committed results have every tokenizer, kind and
batch, their ratios follow from the medians beside them, and the bench's vocabulary spells its
texts (no [UNK] that would make the tokenizers' work unrepresentative)."""

import json
import os

import pytest

from bench.speed import wordpiece_tokenization as bench
from tests.helpers.paths import REPO

RESULTS = os.path.join(REPO, "bench", "speed", "results", "wordpiece_tokenization.json")


@pytest.fixture(scope="module")
def results():
  with open(RESULTS, encoding="utf-8") as f:
    return json.load(f)


def test_the_results_name_their_machine_and_checked_the_ids(results):
  assert {"cpu", "machine", "cpus", "date", "uptime_before"} <= set(results["machine"])
  assert results["ids_equal"] is True
  assert results["vocab_size"] > 20000  # vocab_chinese.txt's size, not a toy vocabulary


def test_tokenization_ratios_follow_from_the_medians(results):
  table = results["tokenization"]
  assert set(table) == set(bench.KINDS)
  for kind, rows in table.items():
    assert set(rows) == {str(b) for b in bench.BATCH_SIZES}, kind
    for batch, row in rows.items():
      for name in ("ours", "python", "hf"):
        assert row[name]["min"] <= row[name]["median"] <= row[name]["p90"]
        assert row[name]["texts_per_second"] == pytest.approx(
            int(batch) * 1000 / row[name]["median"])
      assert row["python_vs_ours"] == pytest.approx(row["python"]["median"] /
                                                    row["ours"]["median"])
      assert row["hf_vs_ours"] == pytest.approx(row["hf"]["median"] / row["ours"]["median"])


def test_serving_rows_are_relative_to_the_sentencepiece_export(results):
  serving = results["serving"]
  assert serving["batch"] == 1
  rows = serving["rows"]
  assert set(rows) == {"wordpiece chinese", "wordpiece english", "sentencepiece english"}
  reference = rows["sentencepiece english"]["median"]
  for row in rows.values():
    assert row["vs_sentencepiece"] == pytest.approx(row["median"] / reference)


def test_the_bench_vocabulary_spells_its_texts(tmp_path):
  from albert_tf.text.tokenization import FullTokenizer  # lazy: only this test tokenizes
  lines = ["The tokenizer returns a list of ids for every sentence in the batch.",
           "Each file is read once and the results are written to the output directory."] * 40
  vocab_file = str(tmp_path / "vocab.txt")
  size = bench.build_vocab(vocab_file, lines)
  tokenizer = FullTokenizer(vocab_file=vocab_file, do_lower_case=True)
  assert len(tokenizer.vocab) == size > 20000
  texts = bench.build_texts(lines, 8)
  assert {k: len(t) for k, t in texts.items()} == {k: 8 for k in bench.KINDS}
  for kind in ("chinese", "mixed"):
    for text in texts[kind]:
      assert "[UNK]" not in tokenizer.tokenize(text), text
  assert bench.first_difference("x", [[1, 2]], [[1, 3]]) == "x: text 0 differs: [1, 2] vs [1, 3]"
  assert bench.first_difference("x", [[1, 2]], [[1, 2]]) is None
