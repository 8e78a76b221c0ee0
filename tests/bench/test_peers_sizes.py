"""bench/peers/sizes.py's pure parts (no TensorFlow): the ISA classes and their emulation labels,
the parameter counts of the official v2 configs, the batch cut for xxlarge at 512, and the
size-axis table's "did not fit" rows (issue 41)."""

import os

import pytest

from bench.peers import report
from bench.peers import sizes

ZEN4 = {"avx2": True, "avx512f": True, "avx512_bf16": True, "amx_bf16": False}
AMX = dict(ZEN4, amx_bf16=True)
AVX2_ONLY = {"avx2": True}


def test_cpu_flags_parse_cpuinfo(tmp_path):
  cpuinfo = tmp_path / "cpuinfo"
  cpuinfo.write_text("model name\t: X\nflags\t\t: fpu sse4_1 avx2 avx512f avx512_bf16\n")
  flags = sizes.cpu_flags(str(cpuinfo))
  assert flags["avx2"] and flags["avx512f"] and flags["avx512_bf16"]
  assert not flags["amx_bf16"]
  assert sizes.native_class(flags) == "AVX512-BF16"


def test_isa_classes_and_emulation_labels():
  assert sizes.isa_info(AMX)["label"] == "AMX"
  assert sizes.isa_info(AVX2_ONLY)["effective"] == "AVX2"
  capped = sizes.isa_info(AMX, "avx2")
  assert capped["effective"] == "AVX2"
  assert capped["label"] == "AVX2 (emulated via ONEDNN_MAX_CPU_ISA=AVX2)"
  # A cap above what the CPU has changes nothing: the row is the native class, not "emulated".
  assert sizes.isa_info(ZEN4, "AVX512_CORE_AMX")["label"] == "AVX512-BF16"
  assert sizes.isa_info(AMX, "AVX512_CORE")["effective"] == "AVX-512"
  with pytest.raises(ValueError):
    sizes.isa_info(AMX, "AVX3")


def test_variant_env_caps_tf_and_torch_only():
  isa = sizes.isa_info(AMX, "AVX2")
  env, label = sizes.variant_env("savedmodel", isa)
  assert env["ONEDNN_MAX_CPU_ISA"] == "AVX2" and "emulated" in label
  env, label = sizes.variant_env("hf", isa)
  assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
  env, label = sizes.variant_env("ort", isa)
  assert env.get("ONEDNN_MAX_CPU_ISA") != "AVX2" or os.environ.get("ONEDNN_MAX_CPU_ISA")
  assert label == "AMX (native: no ISA cap knob)"
  env, label = sizes.variant_env("garden", sizes.isa_info(AMX))
  assert "ONEDNN_MAX_CPU_ISA" not in env or os.environ.get("ONEDNN_MAX_CPU_ISA")
  assert label == "AMX"


def test_official_v2_sizes():
  # The official v2 parameter counts (classifier: + pooler + 2-class head): 12M, 18M, 223M.
  assert round(sizes.params(sizes.SIZES["base"]) / 1e6) == 12
  assert round(sizes.params(sizes.SIZES["large"]) / 1e6) == 18
  assert round(sizes.params(sizes.SIZES["xxlarge"]) / 1e6) == 223
  for size in ("base", "large", "xxlarge"):
    c = sizes.SIZES[size]
    assert (c["embedding_size"], c["vocab_size"], c["num_hidden_groups"]) == (128, 30000, 1)


def test_xxlarge_512_runs_batch_8_with_a_reason():
  batch, reason = sizes.choose_batch("xxlarge", sizes.SIZES["xxlarge"], 512, 32, 24)
  assert batch == 8 and "24 GiB" in reason and "batch 8" in reason
  assert sizes.choose_batch("base", sizes.SIZES["base"], 512, 32, 24) == (32, None)
  assert sizes.choose_batch("xxlarge", sizes.SIZES["xxlarge"], 128, 32, 24) == (32, None)
  # the slow cells run one pass of 3 calls; base b1 s128 keeps the asked-for passes and calls
  assert sizes.schedule(sizes.SIZES["xxlarge"], 8, 512, 2, 10, 100)[:3] == (1, 1, 3)
  assert sizes.schedule(sizes.SIZES["base"], 1, 128, 2, 10, 100)[:3] == (2, 2, 10)


def test_markdown_sizes_reports_every_variant():
  ok = {"status": "ok", "median_ms": 12.0, "calls": 6, "passes": 2, "peak_mib": 2048.0,
        "load_s": 1.0, "isa": "AVX2 (emulated via ONEDNN_MAX_CPU_ISA=AVX2)", "vs_ours_fp32": 1.0,
        "per_pass_ms": {0: 12.0, 1: 12.0}}
  result = {
      "cpu": "Test CPU", "cpu_flags": AMX, "isa": sizes.isa_info(AMX, "AVX2"),
      "versions": {"tensorflow": "x"}, "load_before": "", "load_after": "",
      "settings": {"passes": 2, "calls": 10, "budget_s": 60, "total_budget_h": 1, "mem_gib": 24},
      "sizes": {"xxlarge": {"disk": {"ours fp32": 2**30}, "failures": {}}},
      "cells": [{"size": "xxlarge", "seq": 512, "batch": 8, "batch_reason": "batch 32 too big",
                 "rows": {"ours fp32": ok,
                          "HF torch fp32": {"status": "did not fit (killed by SIGKILL: out "
                                                      "of memory)"}}}],
      "training": [], "goals": [{"where": "xxlarge s512 b8", "ours": "ours fp32",
                                 "peer": "HF torch fp32", "ratio": None, "goal": 1.0,
                                 "met": None}]}
  text = report.markdown_sizes(result)
  assert "| xxlarge | 512 | 8 | ours fp32 | AVX2 (emulated via ONEDNN_MAX_CPU_ISA=AVX2) | " \
         "12.0 ms | 1.00x | 2.00 GiB |" in text
  assert "| xxlarge | 512 | 8 | HF torch fp32 |" in text and "did not fit (killed" in text
  assert "| xxlarge | ours fp32 | 1024.0 MiB |" in text
  assert "batch 32 too big" in text and "not run" in text


def test_disk_bytes_counts_a_hard_linked_file_once(tmp_path):
  """An export's core_ops/ variables are hard links to the version's own: on disk once."""
  version = tmp_path / "1"
  (version / "variables").mkdir(parents=True)
  (version / "core_ops" / "variables").mkdir(parents=True)
  (version / "variables" / "data").write_bytes(b"w" * 1000)
  os.link(version / "variables" / "data", version / "core_ops" / "variables" / "data")
  (version / "core_ops" / "saved_model.pb").write_bytes(b"g" * 30)
  (version / "saved_model.pb").write_bytes(b"g" * 50)
  assert sizes.disk_bytes(str(version)) == 1080
  assert sizes.disk_bytes(str(version), skip_subdir="core_ops") == 1050
  assert sizes.disk_bytes(str(version / "core_ops")) == 1030


def test_work_runs_cheapest_first_across_sizes():
  """A run cut by --total_budget_h loses the most expensive cells, never a size's cheap rows."""
  cells, _ = sizes.plan(["base", "large", "xxlarge"], [128, 512], [1, 32], 24, 10, 1, 100)
  order = sizes.work_order(cells, ["base", "large", "xxlarge"], 1, 10, 100)
  names = [f"{item[0]} {item[1]}x{item[3]}" if what == "serve" else f"train {item}"
           for what, item in order]
  assert len(names) == 12 + 1  # 3 sizes x 4 cells + the train step at large
  assert names[:3] == ["base 128x1", "large 128x1", "base 512x1"]
  assert names[-2:] == ["xxlarge 128x32", "xxlarge 512x8"]
  assert names.index("xxlarge 128x1") < names.index("large 512x32")
  costs = [sizes.flops(sizes.SIZES[item[0]], item[3], item[1]) for what, item in order
           if what == "serve"]
  assert costs == sorted(costs)
  assert [n for n in names if n.startswith("train")] == ["train large"]
  assert all(w == "serve" for w, _ in sizes.work_order(cells, [], 1, 10, 100))


def test_frozen_weights_variant_serves_the_fp32_export_with_the_setting():
  variants = dict(sizes.serving_variants({"ours fp32": "/exports/fp32"}, 128, with_peers=False))
  frozen = variants["ours fp32, frozen weights"]
  assert frozen["path"] == "/exports/fp32" and frozen["kind"] == "savedmodel"
  assert frozen["env"] == {"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "1"}
  assert "env" not in variants["ours fp32"]
