"""One value per figure: the measured figures of README.md and docs/ are their results files'.

The tables of docs/benchmarks.md are written from bench/peers/results/*.json
(scripts/docs_tables.py), and a figure quoted in the text links its results file with the
place in it (the module's docstring): both are read back here, so a new run that changes a file
fails this test until the pages say the same (`python -m scripts.docs_tables` rewrites the
tables; quoted figures are edited by hand).
"""

import os
import re

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
  assert {"0.319", "0.073", "0.617", "0.497", "1153 s"} <= readme, readme
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


# ------------------------------------------------------------------ figures with no results file
# The pages a newcomer plans with: a time, speed or memory figure in their prose links its results
# file (a figure test above then checks it). What is not a measurement (a setting, an input's
# size, a history table's row) is listed here with its reason; code blocks and tables are skipped.
PLANNING_PAGES = ("README.md", os.path.join("docs", "quickstart.md"))
MEASURE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:-\d+(?:\.\d+)?)?\s?"
                     r"(?:ms|s|seconds|minutes|hours|days|years|GB|MB|GiB|MiB|examples/s)(?![\w/])")
LINKED = re.compile(r"\[[^\]]*\]\([^)]*\)")
NOT_MEASURED = {
    ("README.md", "16.9 GB"): "docs/pretraining.md's memory table (linked beside it)",
    ("README.md", "2.7 GB"): "docs/pretraining.md's memory table (linked beside it)",
    ("README.md", "98 MB"): "the size of the domain study's corpus (an input)",
    ("README.md", "8 MB"): "the quickstart's corpus size (a setting)",
    ("docs/quickstart.md", "8 MB"): "the corpus size the script asks for (a setting)",
    ("docs/quickstart.md", "3 MB"): "QUICKSTART_SMALL's corpus size (a setting)",
    ("docs/quickstart.md", "11 minutes"): "history: the settings' runs of 2026-11-26/27, no log kept",
}


def unsourced_figures(page):
  """[figure text] of a page's prose: outside code blocks, tables and links."""
  with open(os.path.join(REPO, page), encoding="utf-8") as f:
    text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
  found = []
  for line in text.splitlines():
    if not line.startswith("|"):
      found += [m.group(0) for m in MEASURE.finditer(LINKED.sub("", line))]
  return found


@pytest.mark.parametrize("page", PLANNING_PAGES)
def test_measured_figures_link_their_results_file(page):
  key = page.replace(os.sep, "/")
  unsourced = [f for f in unsourced_figures(page) if (key, f) not in NOT_MEASURED]
  assert not unsourced, (f"{page}: figures without a results file: {unsourced} (link them as "
                         f"[figure](bench/.../file.json \"key\"), or list them in NOT_MEASURED)")
  stale = [f for (p, f) in NOT_MEASURED if p == key and f not in unsourced_figures(page)]
  assert not stale, f"NOT_MEASURED lists figures {page} no longer has: {stale}"


def test_an_unlinked_time_is_seen():
  line = "It took 677 s, [2.09 s](bench/x.json \"a\") a step, 4-5 hours in all at 8 MB/s."
  assert [m.group(0) for m in MEASURE.finditer(LINKED.sub("", line))] == ["677 s", "4-5 hours"]
