"""bench/speed/job_times.py: every recipe is priced from a shape the bench measures, and the
hours are steps x micro-batches x the measured CPU time of a step (checked on the committed results)."""

import json
import os

import pytest

from bench.speed import job_times
from tests.helpers.paths import REPO

RESULTS = os.path.join(REPO, "bench", "speed", "results", "job_times.json")


def test_every_recipe_is_priced_from_a_measured_shape():
  measured = set(job_times.PRETRAINING) | set(job_times.FINETUNING)
  assert {recipe["shape"] for recipe in job_times.RECIPES.values()} <= measured


def test_recipe_hours_are_steps_times_micro_batches_times_the_step():
  seconds = {name: 1.0 for name in set(job_times.PRETRAINING) | set(job_times.FINETUNING)}
  seconds["base_512"] = 9.0
  table = job_times.recipe_hours(seconds)
  official = table["official_base_pretraining"]
  assert official["micro_batches"] == 512
  assert official["core_hours"] == pytest.approx(125000 * 512 * 9.0 / 3600, rel=1e-3)
  assert official["hours_on_2_cores"] == pytest.approx(125000 * 512 * 9.0 / 7200, rel=1e-6)
  assert official["hours_per_1000_steps_on_2_cores"] == pytest.approx(1000 * 512 * 9.0 / 7200,
                                                                      rel=1e-6)
  # A recipe whose shape was not measured (--shapes) is left out, not priced at zero.
  del seconds["quickstart"]
  assert "quickstart_pretraining" not in job_times.recipe_hours(seconds)


def test_the_committed_results_follow_from_their_step_times():
  with open(RESULTS, encoding="utf-8") as f:
    results = json.load(f)
  shapes = set(job_times.PRETRAINING) | set(job_times.FINETUNING)
  assert set(results["step_seconds"]) == set(results["step_cpu_seconds"]) == shapes
  again = job_times.recipe_hours(results["step_cpu_seconds"])
  assert again == results["recipes"]
  assert "load average" in results["machine"]["uptime_before"]
