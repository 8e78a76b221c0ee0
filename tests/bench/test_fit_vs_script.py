"""bench/speed/fit_vs_script.py: both sides train full 128-piece pairs, and the committed
results' ratios and rates follow from the per-round times beside them."""

import json
import os
import statistics

import numpy as np
import pytest

from bench import common
from bench.speed import fit_vs_script
from tests.helpers.paths import REPO

RESULTS = os.path.join(REPO, "bench", "speed", "results", "fit_vs_script.json")
# Every side's times, wall and process CPU; keras-hub's where it was measured.
FIT_TIMES = ("call", "steady", "setup", "first_step", "teardown", "trained")
SIDES = {"fit": FIT_TIMES, "script": ("call",), "keras_hub": FIT_TIMES}


@pytest.fixture(scope="module")
def results():
  with open(RESULTS, encoding="utf-8") as f:
    return json.load(f)


def test_the_bench_pairs_fill_the_whole_sequence():
  # The shape compared is batch x 128 real pieces: no padding makes either side cheaper.
  from albert_tf.text.preprocessor import AlbertPreprocessor  # lazy: TensorFlow for this test only
  a, b, labels = fit_vs_script.text_pairs(4)
  ids = AlbertPreprocessor(fit_vs_script.SPM_MODEL, sequence_length=128)(
      (np.array(a, object), np.array(b, object)))
  assert ids["input_mask"].shape == (4, 128)
  assert np.all(ids["input_mask"].numpy() == 1)
  assert set(np.unique(ids["segment_ids"].numpy())) == {0, 1}
  assert labels.shape == (4,) and set(labels) <= {0, 1}


def test_the_results_name_the_machine_and_the_shape(results):
  for entry in results["models"].values():
    machine = entry["machine"]
    assert machine["cpu"] and machine["date"] and "load average" in machine["uptime_before"]
    assert "load average" in entry["uptime_after"]
  settings = results["settings"]
  assert (settings["batch_size"], settings["seq_length"]) == (32, 128)
  assert "quickstart" in results["models"]
  assert results["keras_hub"]


def test_keras_hub_ran_on_our_weights(results):
  assert "keras_hub_call" in results["models"]["quickstart"]["ms_per_step_by_round"]
  for entry in results["models"].values():
    if "keras_hub_call" in entry["ms_per_step_by_round"]:
      note = entry["keras_hub"]  # versions, recipe and the weights' agreement
      assert note["keras_hub"] and note["backend"] == "tensorflow"
      assert note["max_logit_gap_on_the_same_ids"] < 1e-4  # the same model, not another init


def test_the_ratios_and_rates_follow_from_the_round_times(results):
  for name, entry in results["models"].items():
    rounds = entry["ms_per_step_by_round"]
    measured = [side for side in SIDES if f"{side}_call" in rounds]
    assert measured[:2] == ["fit", "script"], name
    assert sorted(rounds) == sorted(f"{side}_{key}{clock}" for side in measured
                                    for key in SIDES[side] for clock in ("", "_cpu")), name
    for key, values in rounds.items():
      assert len(values) == entry["rounds"], (name, key)
      assert entry[key]["median"] == pytest.approx(statistics.median(values), abs=0.01)
      assert entry[key]["steps_per_second"] == pytest.approx(
          1000 / statistics.median(values), rel=1e-2)
    assert entry["ratios"] == {
        ratio: pytest.approx(common.paired_ratio(rounds[a], rounds[b]), abs=2e-3)
        for ratio, (a, b) in fit_vs_script.RATIOS.items() if a in rounds and b in rounds}
    assert {"fit_call_over_script", "fit_call_cpu_over_script_cpu"} <= set(entry["ratios"])
