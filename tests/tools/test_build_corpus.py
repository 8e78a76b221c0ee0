"""The quickstart's docstring corpus builder."""

import os

import pytest

from albert_tf.errors import AlbertError
from albert_tf.tools.docstring_corpus import build_docstring_corpus


def test_build_docstring_corpus(tmp_path):
  out = tmp_path / "corpus" / "docs.txt"
  written = build_docstring_corpus(str(out), max_bytes=60_000)
  data = out.read_bytes()
  assert written == len(data) and 0 < written <= 60_000
  assert not os.path.exists(str(out) + ".tmp")
  text = data.decode("utf-8")
  assert text.endswith("\n\n") and not text.startswith("\n")
  documents = text.strip("\n").split("\n\n")
  assert len(documents) > 20
  for doc in documents:
    lines = doc.split("\n")
    assert len(lines) >= 2 and all(line.strip() == line and line for line in lines)
  # Deterministic: the same installation gives the same corpus.
  build_docstring_corpus(str(tmp_path / "again.txt"), max_bytes=60_000)
  assert (tmp_path / "again.txt").read_bytes() == data
  with pytest.raises(AlbertError, match="no docstring documents"):
    build_docstring_corpus(str(tmp_path / "none.txt"), max_bytes=10)
  assert not (tmp_path / "none.txt").exists()
