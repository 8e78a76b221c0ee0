"""python -m bench.peers.run --early_exit (issue 50: early exit beside ORT fp32 and the model
garden): one tiny smoke run of the script checked many ways (the suite's venv has no
torch/onnxruntime, so its ORT rows must say "not run"), and the table/ratio code on synthetic rows
with ORT rows."""

import json
import os
import subprocess
import sys

import pytest

from bench.peers import early_exit_peers
from bench.peers import sizes
from bench.speed import early_exit
from tests.helpers.paths import REPO


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
  """The smallest end-to-end run: tiny shape (L 4), patience 1 (+ 3, no exit), exit at layer 2,
  batches 1 and 2 (the mixed batch), 3 rounds."""
  work = tmp_path_factory.mktemp("early_exit_peers")
  results_dir = os.path.join(REPO, "bench", "peers", "results")
  before = sorted(os.listdir(results_dir))
  proc = subprocess.run(
      [sys.executable, "-m", "bench.peers.run", "--early_exit", "--early_exit_size=tiny",
       "--quick", f"--work_dir={work}", "--patiences=1", "--exit_layers=2",
       "--early_exit_batches=1,2"],
      cwd=REPO, capture_output=True, text=True, check=False, timeout=600,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert sorted(os.listdir(results_dir)) == before  # a smoke run never writes a real result
  with open(work / "early_exit.json", encoding="utf-8") as f:
    result = json.load(f)
  return proc, result, (work / "early_exit.md").read_text(encoding="utf-8")


def test_smoke_rows_and_ratios(smoke):
  _, result, _ = smoke
  rows = {(r["batch"], r["model"]): r for r in result["rows"]}
  expected = ["full depth", "patience 1", "patience 3", "exit at layer 2", "ORT fp32",
              "ORT fp32 fused", "model garden fp32"]
  assert [r["model"] for r in result["rows"] if r["batch"] == 1] == expected
  assert [r["model"] for r in result["rows"] if r["batch"] == 2] == (
      expected[:4] + ["mixed batch"] + expected[4:])
  for batch in (1, 2):
    assert rows[(batch, "full depth")]["vs_full_depth"] == 1.0
    assert rows[(batch, "exit at layer 2")]["mean_exit_layer"] == 2.0
    assert rows[(batch, "patience 3")]["mean_exit_layer"] == 4.0
    garden = rows[(batch, "model garden fp32")]
    assert garden["status"] == "ok" and garden["rounds"] == 3 and garden["median"] > 0
    for name in early_exit_peers.ORT_ROWS:  # no torch/onnxruntime in the suite's venv
      assert rows[(batch, name)]["status"].startswith("not run (the bench venv is not installed")
  assert rows[(2, "mixed batch")]["mean_exit_layer"] == 3.0  # half at layer 2, half at 4
  assert result["no_exit_bit_exact"] == {"1": True, "2": True}
  assert result["mixed_batch_exit_layers"]["2"] == [2, 4]


def test_smoke_records_machine_date_load_and_isa(smoke):
  proc, result, text = smoke
  assert result["cpu"] and result["date"].startswith("20") and "load average" in (
      result["load_before"] + result["load_after"])
  assert result["isa"]["cap"] is None and result["threads"] == 2
  assert result["config"]["num_hidden_layers"] == 4 and result["seq"] == 128
  assert "| 1 | exit at layer 2 | 2.00 |" in text and "| 2 | mixed batch | 3.00 |" in text
  assert "| 1 | ORT fp32 | | not run" in text and "Batch 1: no ORT row was timed." in text
  assert "written: " in proc.stdout and "early_exit.{md,json}" in proc.stdout


@pytest.mark.parametrize("args, message", [
    (["--sizes=base"], "PEERS_ARGS=--early_exit"),
    (["--early_exit_size=tiny", "--exit_layers=2,5"], "--exit_layers in 1..4: [5]"),
    (["--isa=AVX3"], "not a ONEDNN_MAX_CPU_ISA value")])
def test_bad_flags_are_usage_errors(args, message):
  proc = subprocess.run([sys.executable, "-m", "bench.peers.run", "--early_exit"] + args,
                        cwd=REPO, capture_output=True, text=True, check=False, timeout=120)
  assert proc.returncode != 0 and message in proc.stderr and "Traceback" not in proc.stderr


def _times(ms_by_name):
  return {name: list(ms) for name, ms in ms_by_name.items()}


def test_ratios_are_medians_of_per_round_ratios():
  times = _times({"full depth": [100, 200, 100], "exit at layer 2": [20, 60, 25],
                  "ORT fp32": [80, 80, 80], "ORT fp32 fused": [50, 100, 50]})
  outputs = {"exit at layer 2": {"exit_layer": __import__("numpy").array([2, 2])}}
  rows = {r["model"]: r for r in early_exit.latency_rows(times, 1, 3, outputs,
                                                         early_exit_peers.REFERENCES)}
  exit2 = rows["exit at layer 2"]
  assert exit2["vs_full_depth"] == pytest.approx(0.25)  # ratios 0.2, 0.3, 0.25
  assert exit2["speedup"] == pytest.approx(4.0)
  assert exit2["vs_ort_fp32"] == pytest.approx(25 / 80)  # ratios 0.25, 0.75, 0.3125
  assert exit2["vs_ort_fp32_fused"] == pytest.approx(0.5)  # 0.4, 0.6, 0.5
  assert exit2["mean_exit_layer"] == 2.0 and "mean_exit_layer" not in rows["full depth"]
  assert rows["ORT fp32"]["vs_ort_fp32"] == 1.0


def _result(rows, cap=None):
  isa = sizes.isa_info({"avx2": True, "avx512f": True}, cap)
  return {"shape": "base", "seq": 128, "date": "2026-11-28T14:00:00+00:00", "cpu": "Test CPU",
          "cpus": 2, "threads": 2, "isa": isa, "layers": 12,
          "isa_labels": {"ours": isa["label"], "model garden": isa["label"],
                         "ORT": sizes.variant_env("ort", isa)[1]},
          "load_before": "load average: 0.1", "load_after": "load average: 0.2",
          "settings": {"warmup": 2, "rounds_at": {"1": 30}}, "batches": [1], "rows": rows,
          "no_exit_bit_exact": {"1": True}, "ort_max_prob_diff": {"1": {"ORT fp32": 1e-6}},
          "failures": {}}


def _row(model, median, vs_full, vs_ort, vs_fused, exit_layer=None):
  row = {"batch": 1, "model": model, "status": "ok", "median": median, "p10": median,
         "p90": median, "vs_full_depth": vs_full, "vs_ort_fp32": vs_ort,
         "vs_ort_fp32_fused": vs_fused}
  if exit_layer:
    row["mean_exit_layer"] = exit_layer
  return row


def test_table_and_break_even_against_the_faster_ort_row():
  rows = [_row("full depth", 120, 1.0, 1.2, 1.5),
          _row("exit at layer 4", 40, 1 / 3, 0.4, 0.5, 4.0),
          _row("exit at layer 8", 80, 2 / 3, 0.8, 1.0, 8.0),
          _row("ORT fp32", 100, 5 / 6, 1.0, 1.25), _row("ORT fp32 fused", 80, 2 / 3, 0.8, 1.0)]
  assert early_exit_peers.break_even(rows, 1) == ("ORT fp32 fused", 4)  # 8: not faster (1.0)
  accuracy = {"rows": [{"patience": "full depth", "mean_exit_layer": 12.0},
                       {"patience": 1, "mean_exit_layer": 2.0, "points_vs_full": -0.7},
                       {"patience": 2, "mean_exit_layer": 3.1, "points_vs_full": -0.25},
                       {"patience": 3, "mean_exit_layer": 4.5, "points_vs_full": 0.5}]}
  goal = early_exit_peers.goal(rows, 1, accuracy)  # patience 1 is 0.7 points off: patience 2,
  assert (goal["patience"], goal["row"]) == (2, "exit at layer 4")  # 3.1 layers -> the 4 row
  assert goal["speed_vs_full_depth"] == pytest.approx(3.0)
  assert (goal["ort"], goal["speed_vs_ort"]) == ("ORT fp32 fused", pytest.approx(2.0))
  assert early_exit_peers.goal(rows, 1, None) is None
  result = dict(_result(rows), goals=[goal])
  text = early_exit_peers.markdown(result)
  assert "patience 2 is -0.25 points from the full model at mean exit layer 3.10; \"exit at " \
         "layer 4\" runs 3.00x our full depth and 2.00x ORT fp32 fused" in text
  assert "| 1 | exit at layer 4 | 4.00 | 40.0 | 40.0-40.0 | 3.00x | 2.50x | 2.00x |" in text
  assert "| 1 | full depth | 12 | 120.0 |" in text
  assert "against ORT fp32 fused (the faster ORT fp32 row), early exit is ahead while " \
         "examples leave by layer 4" in text
  assert "ONEDNN_MAX_CPU_ISA" not in text
  assert "(same weights): batch 1: ORT fp32 1.0e-06." in text
  slow = [dict(r, vs_ort_fp32_fused=2.0) if r["model"].startswith("exit") else r for r in rows]
  assert early_exit_peers.break_even(slow, 1) == ("ORT fp32 fused", None)
  assert "behind at every exit layer timed" in early_exit_peers.markdown(_result(slow))
  fast = [dict(r, vs_ort_fp32_fused=0.9) if r["model"].startswith("exit") else r for r in rows]
  assert "ahead at every exit layer timed (up to 8)" in early_exit_peers.markdown(_result(fast))


def test_an_isa_cap_says_ort_runs_its_native_kernels():
  text = early_exit_peers.markdown(_result([_row("full depth", 120, 1.0, 1.2, 1.5)], "AVX2"))
  assert "ours and the model garden AVX2 (emulated via ONEDNN_MAX_CPU_ISA=AVX2)" in text
  assert "ORT AVX-512 (native: no ISA cap knob)" in text
  assert "conservative (unfavourable to us)" in text
  assert early_exit_peers.batch_rounds(30, 1) == 30 and early_exit_peers.batch_rounds(30, 32) == 5
  assert early_exit_peers.batch_rounds(3, 32) == 3


def test_refresh_goals_reads_another_sweep_against_the_same_timed_rows():
  rows = [_row("full depth", 120, 1.0, 1.2, 1.5),
          _row("exit at layer 4", 40, 1 / 3, 0.4, 0.5, 4.0),
          _row("exit at layer 8", 80, 2 / 3, 0.8, 1.0, 8.0),
          _row("ORT fp32", 100, 5 / 6, 1.0, 1.25), _row("ORT fp32 fused", 80, 2 / 3, 0.8, 1.0)]
  old_sweep = {"rows": [{"patience": 1, "mean_exit_layer": 5.5, "points_vs_full": 0.0}]}
  result = dict(_result(rows), goals=[early_exit_peers.goal(rows, 1, old_sweep)])
  assert result["goals"][0]["row"] == "exit at layer 8"
  new_sweep = {"rows": [{"patience": 1, "mean_exit_layer": 2.3, "points_vs_full": 1.6}]}
  refreshed = early_exit_peers.refresh_goals(result, new_sweep, "2026-11-28T21:24:16+00:00")
  assert refreshed["rows"] == rows and result["goals"][0]["row"] == "exit at layer 8"
  (goal,) = refreshed["goals"]
  assert (goal["row"], goal["mean_exit_layer"]) == ("exit at layer 4", 2.3)
  assert goal["speed_vs_full_depth"] == pytest.approx(3.0)
  assert refreshed["goals_from"] == {
      "accuracy_file": os.path.join("bench", "experiments", "results",
                                    "early_exit_accuracy_order.json"),
      "accuracy_date": "2026-11-28T21:24:16+00:00"}
  text = early_exit_peers.markdown(refreshed)
  assert "read the accuracy sweep of 2026-11-28T21:24:16+00:00" in text
  assert "patience 1 is +1.60 points from the full model at mean exit layer 2.30" in text
