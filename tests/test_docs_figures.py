"""One value per figure: the measured figures of README.md and docs/ are their results files'.

The tables of docs/benchmarks.md are written from bench/peers/results/*.json
(scripts/docs_tables.py), and a figure quoted in the text links its results file with the
place in it (the module's docstring): both are read back here, so a new run that changes a file
fails this test until the pages say the same (`python -m scripts.docs_tables` rewrites the
tables; quoted figures are edited by hand).
"""

import os

import pytest

from scripts import docs_tables

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PAGES = ["README.md"] + sorted(
    os.path.join("docs", name) for name in os.listdir(os.path.join(REPO, "docs"))
    if name.endswith(".md"))


def test_generated_tables_equal_their_files():
  names = []
  for page in docs_tables.pages():
    with open(page, encoding="utf-8") as f:
      text = f.read()
    names += [m.group("name") for m in docs_tables.BLOCK.finditer(text)]
    assert docs_tables.render(text) == text, (
        f"{os.path.relpath(page, REPO)}: its generated tables differ from bench/peers/results: "
        f"run `python -m scripts.docs_tables`")
  assert sorted(names) == sorted(docs_tables.TABLES), "a generated table is missing or repeated"


@pytest.mark.parametrize("page", PAGES)
def test_quoted_figures_equal_their_files(page):
  wrong = [f"{text} -> {target} \"{query}\": {problem}"
           for text, target, query, problem in docs_tables.quoted_figures(page) if problem]
  assert not wrong, f"{page}:\n" + "\n".join(wrong)


def test_the_headline_figures_are_quoted_from_files():
  """The README's quickstart result and CPU time, and the TFLite size of docs/serving.md, link
  their files (so they are checked above)."""
  readme = {text for text, *_ in docs_tables.quoted_figures("README.md")}
  assert {"0.320", "0.066", "0.635", "0.497", "2.09 s"} <= readme, readme
  serving = {text for text, *_ in docs_tables.quoted_figures(os.path.join("docs", "serving.md"))}
  assert "11.4 MiB" in serving, serving


def test_lookup_and_precision():
  data = {"cells": [{"size": "base", "seq": 128, "rows": {"a": {"ms": 2092.74}}},
                    {"size": "large", "seq": 128, "rows": {"a": {"ms": 1.0}}}],
          "disk": {"x": 11910160}}
  assert docs_tables.lookup(data, "cells[size=base,seq=128]/rows/a/ms x0.001") == (
      pytest.approx(2.09274))
  assert round(docs_tables.lookup(data, "disk/x MiB"), 2) == 11.36
  assert docs_tables.figure_mismatch("2.09 s", 2.09274) is None
  assert docs_tables.figure_mismatch("2.1 s", 2.09274) is None
  assert docs_tables.figure_mismatch("2.08 s", 2.09274) == "'2.08 s': the file says 2.09"
  assert docs_tables.figure_mismatch("4.6e-04", 0.00045999) is None
  with pytest.raises(KeyError):
    docs_tables.lookup(data, "cells[seq=128]/rows")  # two elements match
