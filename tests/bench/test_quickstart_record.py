"""bench/experiments/quickstart/record.py: the quickstart's results file holds the run's whole log,
and every figure in it is what that log printed (so the README's quickstart figures, checked
against the file by tests/test_docs_figures.py, are a real run's)."""

import json
import os

import pytest

from bench.experiments.quickstart import record
from tests.helpers.paths import REPO

FIGURES = ("seconds_total", "seconds_pretraining", "pretraining_examples_per_second",
           "mlm_accuracy", "mlm_baseline_accuracy", "sop_accuracy",
           "pair_dev_accuracy_pretrained", "pair_dev_accuracy_scratch", "pair_dev_majority_class",
           "savedmodel_right", "savedmodel_queried", "savedmodel_majority_right")


@pytest.mark.parametrize("name", ["quickstart.json", "quickstart_small.json"])
def test_the_results_file_is_its_log(name):
  with open(os.path.join(REPO, "bench", "experiments", "results", name), encoding="utf-8") as f:
    results = json.load(f)
  assert len(results["log"]) > 50, "the run's log is kept whole"
  parsed = record.parse_log(results["log"])
  assert set(parsed) == set(FIGURES)
  assert {key: results[key] for key in FIGURES} == parsed
  assert ("QUICKSTART_SMALL=1" in results["what"]) == (name == "quickstart_small.json")


def test_a_missing_summary_line_is_named():
  with open(os.path.join(REPO, "bench", "experiments", "results", "quickstart.json"),
            encoding="utf-8") as f:
    log = json.load(f)["log"]
  cut = [line for line in log if not line.startswith("pair task dev accuracy")]
  with pytest.raises(ValueError, match="'pair'"):
    record.parse_log(cut)
