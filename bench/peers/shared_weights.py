"""Issue 41's reorder-once experiment: ALBERT's shared layer weights prepared once per weight
instead of once per layer, side by side with the export as it was and with the model garden.

  .venv/bin/python -m bench.peers.shared_weights --sizes=base,large,xxlarge
      [--requests=1x128,1x512] [--precisions=fp32,bf16] [--passes=2] [--total_budget_h=1]

Per size, one random classifier is exported (in a subprocess) four ways, all the same weights:
  unrolled            the export before issue 41: the L applied layers traced one after the
                      other, so each shared weight feeds L matmul kernels
  looped              the export now (networks/encoder.py, `shared_layers_in_one_loop`): the
                      layers that share their weights run as one tf.while_loop, one kernel each
at fp32 and bf16, and the model garden's AlbertEncoder (its own converter, fp32). Every variant
of a request runs in its own subprocess (variant.py: its peak memory is its own), in passes
whose order rotates, with and without TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 ("frozen"): oneDNN then
reorders a matmul kernel's weights into its blocked layout once and keeps them (TensorFlow reads
the variable once per kernel), instead of using the plain layout on every call. Unrolled that is
one kept copy per layer; looped, one per weight (two with the pooled-only last layer).

Reported per cell: median time per request, the paired ratio to the unrolled export of the same
precision without the setting, peak memory (VmHWM), the first calls' time (load + warm-up:
where the reorders happen), and the largest probability difference to unrolled fp32.
Results: bench/peers/results/shared_weights.{md,json}.
"""

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from bench import common
from bench.peers import sizes

HERE = os.path.dirname(os.path.abspath(__file__))

FLAGS = flags.FLAGS
flags.DEFINE_list("sizes", ["base", "large", "xxlarge"], "Model sizes (bench/peers/sizes.py).")
flags.DEFINE_list("requests", ["1x128", "1x512"], "Requests as <batch>x<seq_len>.")
flags.DEFINE_list("precisions", ["fp32", "bf16"], "Export precisions.")
flags.DEFINE_integer("passes", 2, "Passes per cell (1 for calls over sizes.SLOW_CALL_S).")
flags.DEFINE_integer("calls", 10, "Timed calls per subprocess at batch 1 x 128 (fewer above).")
flags.DEFINE_float("total_budget_h", 1.0, "Cells started after this are reported as not run.")
flags.DEFINE_float("mem_gib", 24.0, "Memory of the machine, for the fit estimate.")
flags.DEFINE_float("skip_over_s", 30.0, "Cells estimated (at 100 GFLOP/s) above this many "
                   "seconds per call are reported as not run.")
flags.DEFINE_string("work_dir", None, "Where the exports go (default: a temp dir).")
flags.DEFINE_string("out_name", "shared_weights", "Results: bench/peers/results/<out_name>.*")

FROZEN = {"TF_ONEDNN_ASSUME_FROZEN_WEIGHTS": "1"}
REFERENCE = "ours fp32"  # sizes.run_cell's reference name: here the unrolled fp32 export


def build_size(size, work_dir, precisions, seq):
  """(Subprocess.) The exports of one random model of `size`; returns {name: path}."""
  from albert_tf import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.export import export_classifier  # pylint: disable=g-import-not-at-top
  from albert_tf.export import serving  # pylint: disable=g-import-not-at-top
  from albert_tf.models.classifier import AlbertClassifier  # pylint: disable=g-import-not-at-top
  config = sizes.SIZES[size]
  model = AlbertClassifier(AlbertConfig.from_dict(config), num_classes=2, dropout_rate=0.0)
  paths = {}
  for precision in precisions:
    for layout in ("looped", "unrolled"):
      # serving.py loops only models that save LOOP_SAVES_AT_LEAST_BYTES; here both, any size.
      with _layout(serving, layout):
        paths[f"{layout} {precision}"] = export_classifier(
            model, os.path.join(work_dir, f"{layout}_{precision}"), ["0", "1"], seq,
            precision=precision)
  checkpoint, paths["model garden head"] = sizes.garden_checkpoint(model, config, work_dir)
  paths["model garden fp32"] = common.export_model_garden_encoder(work_dir, config,
                                                                  checkpoint=checkpoint)
  return paths


@contextlib.contextmanager
def _layout(serving_module, layout):
  saved = serving_module.LOOP_SAVES_AT_LEAST_BYTES
  serving_module.LOOP_SAVES_AT_LEAST_BYTES = 0 if layout == "looped" else float("inf")
  try:
    yield
  finally:
    serving_module.LOOP_SAVES_AT_LEAST_BYTES = saved


def variants(paths, precisions):
  """[(name, spec)]: unrolled / looped x plain / frozen per precision, then the garden."""
  out = []
  for precision in precisions:
    for layout in ("unrolled", "looped"):
      path = paths.get(f"{layout} {precision}")
      for frozen in (False, True):
        name = ("ours fp32" if (precision, layout, frozen) == ("fp32", "unrolled", False)
                else f"ours {precision} {layout}" + (", frozen" if frozen else ""))
        out.append((name, {"kind": "savedmodel", "path": path, "env": FROZEN if frozen else {},
                           "precision": precision, "layout": layout, "frozen": frozen}))
  out.append(("model garden fp32", {"kind": "garden", "path": paths.get("model garden fp32"),
                                    "head": paths.get("model garden head"), "env": {},
                                    "precision": "fp32", "layout": "garden", "frozen": False}))
  return out


def _plain_name(precision, layout):
  return "ours fp32" if (precision, layout) == ("fp32", "unrolled") else (
      f"ours {precision} {layout}")


def summarize(cell, specs):
  """Adds to each ok row: the ratio to its precision's plain unrolled export, and to the
  garden."""
  rows = cell["rows"]
  for name, spec in specs:
    row = rows.get(name, {})
    if row.get("status") != "ok":
      continue
    base = rows.get(_plain_name(spec["precision"], "unrolled"), {})
    if base.get("status") == "ok" and spec["layout"] != "garden":
      row["vs_unrolled"] = sizes.paired(row, base)
    garden = rows.get("model garden fp32", {})
    if garden.get("status") == "ok":
      row["vs_garden"] = sizes.paired(row, garden)


def markdown(result):
  lines = [f"# Shared weights prepared once (issue 41): {result['cpu']}, {result['isa']['label']}",
           "", f"{result['started']} - {result['finished']} UTC; load before {result['load_before']}"
           f", after {result['load_after']}; {result['settings']}", "",
           "fp32 tf.matmul, best of 8 calls (GFLOP/s): " + ", ".join(
               f"{k} {v:.0f}" for k, v in result.get("matmul_gflops", {}).items()), "",
           "| size | batch x seq | variant | median | vs unrolled (same precision) | vs garden "
           "| peak GiB | load + warm-up s | max prob diff |", "|---|---|---|---|---|---|---|---|---|"]
  for cell in result["cells"]:
    for name, row in cell["rows"].items():
      shown = "ours fp32 unrolled" if name == REFERENCE else name
      where = f"| {cell['size']} | {cell['batch']} x {cell['seq']} | {shown} |"
      if row.get("status") != "ok":
        lines.append(f"{where} {row.get('status')} | | | | | |")
        continue
      ms = row["median_ms"]
      lines.append(
          f"{where} {ms / 1000:.2f} s |" if ms >= 1000 else f"{where} {ms:.1f} ms |")
      lines[-1] += (f" {row['vs_unrolled']:.3f} |" if "vs_unrolled" in row else " |")
      lines[-1] += (f" {row['vs_garden']:.3f} |" if "vs_garden" in row else " |")
      lines[-1] += (f" {row['peak_mib'] / 1024:.2f} | {row['load_s']:.1f} | "
                    f"{row['max_prob_diff']:.1e} |" if "max_prob_diff" in row else
                    f" {row['peak_mib'] / 1024:.2f} | {row['load_s']:.1f} | |")
  for size, built in result["builds"].items():
    if built.get("failure"):
      lines.append(f"\n{size}: build failed: {built['failure']}")
  return "\n".join(lines) + "\n"


_CEILING = r"""
import json, time, tensorflow as tf
rates = {}
for m, k, n in ((2048, 2048, 2048), (4096, 4096, 4096), (128, 4096, 16384), (512, 4096, 16384)):
  a, b = tf.random.normal([m, k]), tf.random.normal([k, n])
  f = tf.function(lambda: tf.matmul(a, b))
  f().numpy()
  best = min((lambda t: (f().numpy(), time.perf_counter() - t)[1])(time.perf_counter())
             for _ in range(8))
  rates[f"{m}x{k}x{n}"] = 2 * m * k * n / best / 1e9
print(json.dumps(rates))
"""


def matmul_ceiling():
  """{shape: GFLOP/s}: the best of 8 float32 tf.matmul calls per shape, in a fresh process (the
  fastest rate TensorFlow's oneDNN matmul reaches here: what a request's time is bounded by)."""
  proc = subprocess.run([sys.executable, "-c", _CEILING], capture_output=True, text=True,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), check=True)
  return json.loads(proc.stdout.strip().splitlines()[-1])


def build(size, size_dir, precisions, seq):
  os.makedirs(size_dir, exist_ok=True)
  proc = subprocess.run(
      common.module_command(__spec__.name, "--child_build", size, size_dir,
                            ",".join(precisions), str(seq)), capture_output=True, text=True,
      env=common.child_env(TF_CPP_MIN_LOG_LEVEL="3"), check=False)
  if proc.returncode:
    tail = (proc.stderr.strip().splitlines() or ["no stderr"])[-1][:300]
    return {"paths": {}, "failure": f"exit {proc.returncode}: {tail}"}
  return {"paths": json.loads(proc.stdout.strip().splitlines()[-1])}


def main(_):
  requests = []
  for request in FLAGS.requests:
    batch, _, seq = request.partition("x")
    if not (batch.isdigit() and seq.isdigit()):
      raise app.UsageError(f"--requests: {request!r} is not <batch>x<seq_len> (e.g. 1x128)")
    requests.append((int(batch), int(seq)))
  unknown = [s for s in FLAGS.sizes if s not in sizes.SIZES]
  if unknown:
    raise app.UsageError(f"--sizes: unknown {unknown}; known: {sorted(sizes.SIZES)}")
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="albert_tf_shared_weights_")
  isa = sizes.isa_info(sizes.cpu_flags())
  result = {"cpu": common.cpu_model(), "isa": isa, "load_before": common.uptime(),
            "started": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "settings": {"passes": FLAGS.passes, "calls": FLAGS.calls,
                         "total_budget_h": FLAGS.total_budget_h},
            "versions": sizes.versions(False), "builds": {}, "cells": []}
  result["matmul_gflops"] = matmul_ceiling()
  print(f"fp32 matmul ceiling (GFLOP/s): {result['matmul_gflops']}", flush=True)
  clock = sizes.Clock(FLAGS.total_budget_h)
  max_seq = max(seq for _, seq in requests)
  for size in FLAGS.sizes:
    print(f"building {size} ...", flush=True)
    built = build(size, os.path.join(work_dir, size), FLAGS.precisions, max_seq)
    result["builds"][size] = built
    config = sizes.SIZES[size]
    for batch, seq in requests:
      print(f"{size} {batch}x{seq} ...", flush=True)
      specs = variants(built["paths"], FLAGS.precisions)
      n, warmup, timed, per_call = sizes.schedule(config, batch, seq, FLAGS.passes, FLAGS.calls,
                                                  100.0)
      if per_call > FLAGS.skip_over_s:
        status = (f"not run (estimated {per_call:.0f} s per call at 100 GFLOP/s > "
                  f"--skip_over_s={FLAGS.skip_over_s:g})")
        result["cells"].append({"size": size, "batch": batch, "seq": seq,
                                "rows": {name: {"status": status} for name, _ in specs}})
        print(f"  {status}", flush=True)
        continue
      for _, spec in specs:
        spec.update(batch=batch, seq=seq, warmup=warmup)
      rows = sizes.run_cell(specs, os.path.join(work_dir, size, f"b{batch}_s{seq}"), isa, n,
                            timed, 3600, sizes.estimate_peak_gib(config, batch, seq),
                            FLAGS.mem_gib, clock)
      cell = {"size": size, "batch": batch, "seq": seq, "rows": rows}
      summarize(cell, specs)
      result["cells"].append(cell)
      for name, row in rows.items():
        if row.get("status") == "ok":
          print(f"  {name}: {row['median_ms']:.1f} ms, vs unrolled "
                f"{row.get('vs_unrolled', float('nan')):.3f}, peak "
                f"{row['peak_mib'] / 1024:.2f} GiB", flush=True)
        else:
          print(f"  {name}: {row.get('status')}", flush=True)
  result["load_after"] = common.uptime()
  result["finished"] = time.strftime("%H:%M", time.gmtime())
  text = markdown(result)
  print(text)
  out_dir = work_dir if set(FLAGS.sizes) == {"tiny"} else os.path.join(HERE, "results")
  os.makedirs(out_dir, exist_ok=True)
  stem = os.path.join(out_dir, FLAGS.out_name)
  with open(stem + ".json", "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1, sort_keys=True)
  with open(stem + ".md", "w", encoding="utf-8") as f:
    f.write(text)
  print(f"written: {stem}.{{md,json}}")


if __name__ == "__main__":
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  if len(sys.argv) == 6 and sys.argv[1] == "--child_build":
    print(json.dumps(build_size(sys.argv[2], sys.argv[3], sys.argv[4].split(","),
                                int(sys.argv[5]))))
  else:
    app.run(main)
