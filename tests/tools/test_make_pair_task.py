"""The quickstart's sentence-pair tasks ("next", "order"): right labels, distinct pairs, MRPC
format, a labelled held-out file, clear errors."""

import pytest

from albert_tf.errors import AlbertError
from albert_tf.tools.pair_task import make_sentence_pairs, read_documents, write_mrpc_task
from tests.helpers import remote as remote_helpers


def _corpus(tmp_path, docs):
  path = tmp_path / "corpus.txt"
  path.write_text("\n\n".join("\n".join(d) for d in docs) + "\n")
  return str(path)


def test_labels_mean_what_they_say(tmp_path):
  docs = [[f"doc{d} sentence{s} text" for s in range(11)] for d in range(40)]
  pairs = make_sentence_pairs(read_documents(_corpus(tmp_path, docs)), 400, seed=1)
  assert sum(label for label, _, _ in pairs) == 200
  for label, a, b in pairs:
    doc_a, sent_a = a.split()[:2]
    doc_b, sent_b = b.split()[:2]
    if label == 1:
      assert doc_a == doc_b and int(sent_b[8:]) == int(sent_a[8:]) + 1
    else:
      assert doc_a != doc_b


def test_mrpc_files(tmp_path):
  docs = [[f"d{d} s{s}\twith tab" for s in range(3)] for d in range(8)]
  counts = write_mrpc_task(_corpus(tmp_path, docs), tmp_path / "MRPC", 10, 4, 2)
  assert counts == {"train": 10, "dev": 4, "test": 2}
  train = (tmp_path / "MRPC/train.tsv").read_text().splitlines()
  assert train[0].startswith("Quality\t#1 ID")
  assert all(len(row.split("\t")) == 5 and row[0] in "01" for row in train[1:])
  test = (tmp_path / "MRPC/test.tsv").read_text().splitlines()
  assert test[0].startswith("index\t") and test[1].startswith("0\t")
  assert not list((tmp_path / "MRPC").glob("*.tmp"))


def test_bad_corpus(tmp_path):
  with pytest.raises(AlbertError, match="does not exist"):
    read_documents(str(tmp_path / "missing.txt"))
  with pytest.raises(AlbertError, match="fewer than two documents"):
    make_sentence_pairs(read_documents(_corpus(tmp_path, [["only one", "doc"]])), 4)


def test_order_kind_swaps_the_same_two_sentences(tmp_path):
  docs = [[f"doc{d} sentence{s} text" for s in range(5)] for d in range(6)]
  pairs = make_sentence_pairs(read_documents(_corpus(tmp_path, docs)), 24, seed=2, kind="order")
  assert sum(label for label, _, _ in pairs) == 12
  for label, a, b in pairs:
    doc_a, sent_a = a.split()[:2]
    doc_b, sent_b = b.split()[:2]
    assert doc_a == doc_b
    step = int(sent_b[8:]) - int(sent_a[8:])
    assert step == (1 if label == 1 else -1), (label, a, b)


def test_no_pair_is_drawn_twice(tmp_path):
  """All 6 x 4 = 24 consecutive positions: every one used once, so train and dev never share
  a pair; one more pair than positions is an error, not a repeat."""
  docs = [[f"doc{d} sentence{s} text" for s in range(5)] for d in range(6)]
  documents = read_documents(_corpus(tmp_path, docs))
  for kind in ("next", "order"):
    pairs = make_sentence_pairs(documents, 24, seed=3, kind=kind)
    firsts = {min(a, b) if kind == "order" else a for _, a, b in pairs}
    assert len(firsts) == 24
  with pytest.raises(AlbertError, match="24 consecutive sentence pairs: cannot build 25"):
    make_sentence_pairs(documents, 25)
  with pytest.raises(AlbertError, match="unknown pair task kind 'swap'"):
    make_sentence_pairs(documents, 4, kind="swap")


def test_heldout_file_is_labelled_and_disjoint(tmp_path):
  docs = [[f"doc{d} sentence{s} text" for s in range(6)] for d in range(8)]
  counts = write_mrpc_task(_corpus(tmp_path, docs), tmp_path / "MRPC", 10, 6, 2, kind="order",
                           num_heldout=8)
  assert counts == {"train": 10, "dev": 6, "test": 2, "heldout": 8}
  rows = {split: (tmp_path / "MRPC" / f"{split}.tsv").read_text().splitlines()
          for split in counts}
  assert rows["heldout"][0].startswith("Quality\t#1 ID")
  assert all(row[0] in "01" for row in rows["heldout"][1:])
  pair = lambda row: tuple(sorted(row.split("\t")[3:]))  # noqa: E731
  heldout = {pair(row) for row in rows["heldout"][1:]}
  seen = {pair(row) for split in ("train", "dev") for row in rows[split][1:]}
  assert len(heldout) == 8 and not heldout & seen
  # Without --num_heldout no heldout.tsv is written.
  assert "heldout" not in write_mrpc_task(_corpus(tmp_path, docs), tmp_path / "B", 4, 2, 0)
  assert not (tmp_path / "B" / "heldout.tsv").exists()


def test_span_takes_that_many_consecutive_sentences_a_side(tmp_path):
  docs = [[f"doc{d} sentence{s} text." for s in range(6)] for d in range(5)]
  documents = read_documents(_corpus(tmp_path, docs))
  for kind in ("next", "order"):
    pairs = make_sentence_pairs(documents, 14, seed=4, kind=kind, span=2)
    for label, a, b in pairs:
      left = [tuple(part.split()[:2]) for part in a.split(". ")]
      right = [tuple(part.split()[:2]) for part in b.split(". ")]
      assert len(left) == len(right) == 2, (a, b)
      index = lambda part: int(part[1][8:])  # noqa: E731
      assert index(left[1]) == index(left[0]) + 1 and index(right[1]) == index(right[0]) + 1
      if label == 1:
        assert left[0][0] == right[0][0] and index(right[0]) == index(left[1]) + 1
      elif kind == "order":
        assert left[0][0] == right[0][0] and index(left[0]) == index(right[1]) + 1
      else:
        assert left[0][0] != right[0][0]
  # 5 documents of 6 sentences hold 5 * 3 starts of two-plus-two sentences.
  with pytest.raises(AlbertError, match="15 consecutive sentence pairs: cannot build 16"):
    make_sentence_pairs(documents, 16, span=2)
  with pytest.raises(AlbertError, match="fewer than two documents with 8 or more sentences"):
    make_sentence_pairs(documents, 2, span=4)
  with pytest.raises(AlbertError, match="span=0 is invalid"):
    make_sentence_pairs(documents, 2, span=0)


def test_a_corpus_on_ram_reads_as_the_local_one(tmp_path):
  """ram:// stands in for gs://: the corpus flag may be a bucket's file."""
  local = _corpus(tmp_path, [[f"doc{d} sentence{s}" for s in range(3)] for d in range(4)])
  assert read_documents(remote_helpers.copied_to_ram(local)) == read_documents(local)
  with pytest.raises(AlbertError, match=r"^ram://.*/missing.txt: corpus file does not exist$"):
    read_documents(f"{remote_helpers.ram_bucket()}/missing.txt")
