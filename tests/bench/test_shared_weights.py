"""bench/peers/shared_weights.py's pure parts (the exports and timings run on the bench machine):
the variants and their settings, the ratios each row is given, and the report's rows."""

from bench.peers import shared_weights

PATHS = {"unrolled fp32": "/u32", "looped fp32": "/l32", "unrolled bf16": "/u16",
         "looped bf16": "/l16", "model garden fp32": "/g", "model garden head": "/h.npz"}


def test_every_layout_runs_with_and_without_the_setting_and_the_garden_last():
  specs = dict(shared_weights.variants(PATHS, ["fp32", "bf16"]))
  assert list(specs)[0] == "ours fp32" and list(specs)[-1] == "model garden fp32"
  assert len(specs) == 9
  for name, spec in specs.items():
    frozen = spec["env"].get("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS") == "1"
    assert frozen == name.endswith(", frozen") == spec["frozen"]
  assert specs["ours fp32"]["path"] == "/u32" and not specs["ours fp32"]["env"]
  assert specs["ours bf16 looped, frozen"]["path"] == "/l16"
  assert specs["model garden fp32"]["head"] == "/h.npz"


def _row(per_pass):
  return {"status": "ok", "median_ms": sorted(per_pass.values())[len(per_pass) // 2],
          "per_pass_ms": per_pass, "peak_mib": 1024.0, "load_s": 5.0, "max_prob_diff": 1e-7}


def test_rows_are_paired_with_their_own_precisions_unrolled_export_and_the_garden():
  specs = shared_weights.variants(PATHS, ["fp32", "bf16"])
  rows = {name: _row({0: 100.0, 1: 110.0}) for name, _ in specs}
  rows["ours fp32 looped, frozen"] = _row({0: 90.0, 1: 99.0})
  rows["ours bf16 unrolled"] = _row({0: 50.0, 1: 55.0})
  rows["ours bf16 unrolled, frozen"] = _row({0: 45.0, 1: 44.0})
  rows["model garden fp32"] = _row({0: 200.0, 1: 220.0})
  rows["ours bf16 looped"] = {"status": "did not fit (out of memory)"}
  cell = {"size": "base", "batch": 1, "seq": 128, "rows": rows}
  shared_weights.summarize(cell, specs)
  assert abs(rows["ours fp32 looped, frozen"]["vs_unrolled"] - 0.9) < 1e-9
  assert abs(rows["ours bf16 unrolled, frozen"]["vs_unrolled"] - 0.85) < 1e-9  # 0.9, 0.8
  assert abs(rows["ours fp32 looped, frozen"]["vs_garden"] - 0.45) < 1e-9
  assert "vs_unrolled" not in rows["model garden fp32"]
  text = shared_weights.markdown({
      "cpu": "AMD EPYC", "isa": {"label": "AVX512-BF16"}, "started": "2026-11-27 07:40",
      "finished": "08:06", "load_before": "x", "load_after": "y", "settings": {},
      "matmul_gflops": {"2048x2048x2048": 206.4}, "builds": {"xxlarge": {"failure": "exit 1"}},
      "cells": [cell]})
  assert "| base | 1 x 128 | ours fp32 unrolled | 110.0 ms | 1.000 |" in text
  assert "| base | 1 x 128 | ours bf16 looped | did not fit (out of memory) |" in text
  assert "2048x2048x2048 206" in text
  assert "xxlarge: build failed: exit 1" in text
