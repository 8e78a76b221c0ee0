"""The quickstart's sentence-pair task: right labels, MRPC format, clear errors."""

import pytest

from albert_tf.errors import AlbertError
from albert_tf.tools.make_pair_task import make_sentence_pairs, read_documents, write_mrpc_task


def _corpus(tmp_path, docs):
  path = tmp_path / "corpus.txt"
  path.write_text("\n\n".join("\n".join(d) for d in docs) + "\n")
  return str(path)


def test_labels_mean_what_they_say(tmp_path):
  docs = [[f"doc{d} sentence{s} text" for s in range(5)] for d in range(6)]
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
  docs = [[f"d{d} s{s}\twith tab" for s in range(3)] for d in range(4)]
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
