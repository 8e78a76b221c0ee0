"""bench/experiments/ner_pretraining/run.py: the lookup baseline and the prediction-file reader
score what they should, and the committed results' summaries follow from their runs."""

import glob
import json
import os
import statistics

import pytest

from bench.experiments.ner_pretraining import run
from tests.helpers.paths import REPO

RESULTS = sorted(glob.glob(os.path.join(REPO, "bench", "experiments", "results",
                                       "ner_pretraining*.json")))


def _write(path, sentences):
  path.write_text("\n\n".join("\n".join("\t".join(row) for row in s) for s in sentences) + "\n",
                  encoding="utf-8")
  return str(path)


def test_the_lookup_baseline_tags_each_word_with_its_most_frequent_training_tag(tmp_path):
  train = run._columns_file(_write(tmp_path / "train.txt", [
      [("Paris", "B-location"), ("is", "O")],
      [("paris", "B-location"), ("Hilton", "B-person")],
      [("Paris", "B-location"), ("Hilton", "B-person"), ("Hilton", "B-corporation")]]))
  scored = run._columns_file(_write(tmp_path / "dev.txt", [
      [("I", "O"), ("saw", "O"), ("PARIS", "B-location")],   # unseen exact, seen lower-cased
      [("Hilton", "B-person"), ("Rome", "B-location")]]))     # Rome unseen: tagged O
  # Predicted: PARIS -> B-location (right), Hilton -> B-person (2 of 3), Rome -> O (missed).
  assert run._lookup_baseline(train, scored) == {
      "eval_f1": 0.8, "eval_precision": 1.0, "eval_recall": round(2 / 3, 4)}


def test_the_prediction_file_gives_gold_then_predicted(tmp_path):
  path = _write(tmp_path / "test_predictions.txt", [
      [("Rome", "B-location", "B-location"), ("rocks", "O", "B-location")]])
  [(words, gold, predicted)] = run._columns_file(path, predicted=True)
  assert (words, gold, predicted) == (["Rome", "rocks"], ["B-location", "O"],
                                      ["B-location", "B-location"])


@pytest.fixture(scope="module", params=RESULTS, ids=os.path.basename)
def results(request):
  with open(request.param, encoding="utf-8") as f:
    return json.load(f)


def test_a_results_file_is_committed():
  assert RESULTS


def test_each_seed_ran_both_starts_with_the_same_recipe(results):
  for start in ("pretrained", "random"):
    assert [r["seed"] for r in results["runs"][start]] == results["seeds"]
  assert len(results["seeds"]) >= 3
  assert results["baselines"]["all_O"]["test"]["eval_f1"] == 0.0
  for start, rate in results["learning_rate"].items():  # each start's best on dev, first seed
    sweep = results["learning_rate_sweep"][start]
    assert rate == max(sweep, key=lambda run: run["dev"]["eval_f1"])["learning_rate"]
    assert results["runs"][start][0] == {k: v for k, v in sweep[[r["learning_rate"] for r in
                                                                 sweep].index(rate)].items()
                                         if k != "learning_rate"}


def test_the_summaries_follow_from_the_runs(results):
  for start, runs in results["runs"].items():
    for split in ("dev", "test"):
      values = [r[split]["eval_f1"] for r in runs]
      summary = results["f1"][start][split]
      assert summary["mean"] == pytest.approx(statistics.mean(values), abs=1e-4)
      assert summary["stdev"] == pytest.approx(statistics.stdev(values), abs=1e-4)
      assert (summary["min"], summary["max"]) == (min(values), max(values))
