"""Early exit (docs/early_exit.md) beside ONNX Runtime and the model garden, in one run (issue 50):

  .venv-bench/bin/python -m bench.peers.run --early_exit [--isa=AVX2] [--early_exit_rounds=30]
  make bench-peers PEERS_ARGS=--early_exit [ARGS=--isa=AVX2]

ALBERT-base shape (V 30000, E 128, H 768, L 12, one shared group), sequence 128 (every position
real), random weights, batch 1 and 32, all in this process, called round by round in a rotated
order (bench/common.py time_interleaved) after warm-up:
  ours: full depth, patience p, exit at layer k, mixed batch, patience L-1
                      the rows of bench/speed/early_exit.py, built by its functions
                      (our exports loaded back, `token_ids` signature)
  ORT fp32 / ORT fp32 fused
                      our full-depth classifier's weights written as an HF directory (our
                      converter), exported to ONNX from HF torch, + onnxruntime.transformers'
                      fusions (bench/peers/torch_peers.py, as run.py's table)
  model garden fp32   its AlbertEncoder at the same shape (own random weights, encoder + pooler,
                      no head: the cost of a full-depth request; as run.py's table)
Each row: median ms, speed against our full-depth export and against ORT fp32 (plain and fused)
as medians of per-round ratios, and its mean exit layer. The ORT rows' largest |probability
difference| to our full-depth export shows they serve the same weights.

Threads: two intra-op threads each (TensorFlow's intra-op pool, ORT's session; torch_peers
THREADS).

ISA (--isa=AVX2): ONEDNN_MAX_CPU_ISA is set before TensorFlow loads, so our rows and the model
garden's run oneDNN's kernels of that class. ONNX Runtime has no such cap: its MLAS kernels are
chosen from cpuid when it loads (ORT's maintainers, microsoft/onnxruntime#7010 and #12438: no
run-time option; only a build of ORT without them). The ORT rows of a capped run are therefore
the CPU's native ISA (they are labelled so): against a real AVX2 CPU's ORT they are too fast, and
a capped run's ratios to ORT are conservative (unfavourable to us).

Results: bench/peers/results/early_exit[_<isa>].{md,json} with the CPU, the date and the load
before and after; --early_exit_size=tiny (a smoke run of this code, seconds; without torch and
onnxruntime the ORT rows say "not run") writes into its --work_dir instead.
"""

import datetime
import json
import os
import sys

from bench import common
from bench.peers import sizes
from bench.peers import torch_peers
from bench.speed import early_exit

SEQ = 128
# The shapes: base is the issue's; tiny (L 4, so that patience can stop early) is the smoke run.
SHAPES = {"base": dict(common.ALBERT_BASE),
          "tiny": dict(common.ALBERT_BASE, vocab_size=1000, embedding_size=32, hidden_size=64,
                       num_hidden_layers=4, num_attention_heads=2, intermediate_size=256)}
DEFAULT_ROWS = {"base": ([1, 2, 3, 4, 5, 6], [2, 4, 6, 8, 10, 12]), "tiny": ([1, 2], [2, 4])}
ORT_ROWS = ("ORT fp32", "ORT fp32 fused")
REFERENCES = {"vs_full_depth": "full depth", "vs_ort_fp32": "ORT fp32",
              "vs_ort_fp32_fused": "ORT fp32 fused"}


def batch_rounds(rounds, batch):
  """Timed rounds at a batch: `rounds` at batch 1, a sixth (at least 2) at larger batches."""
  return rounds if batch == 1 else max(2, min(rounds, max(4, rounds // 6)))


def set_isa(isa):
  """Caps oneDNN for TensorFlow (ours, the model garden): must run before TensorFlow loads."""
  if not isa["cap"]:
    return
  if "tensorflow" in sys.modules:
    raise RuntimeError("--isa: TensorFlow is already loaded; ONEDNN_MAX_CPU_ISA would not apply")
  os.environ["ONEDNN_MAX_CPU_ISA"] = isa["cap"]


def build(work_dir, shape, patiences, exit_layers, batches, peers):
  """Every model of the run, written into work_dir. Returns ({row name: our `token_ids`
  signature}, {ORT row name: ONNX file}, the garden's SavedModel directory, build notes)."""
  from albert_tf.checkpoints.hf.save import save_hf_checkpoint  # pylint: disable=g-import-not-at-top
  config = SHAPES[shape]
  plain, fns = early_exit.build_signatures(work_dir, config, SEQ, patiences, exit_layers,
                                           mixed=max(batches) > 1)
  onnx_files, failures = {}, {}
  if peers is not None:
    hf_dir = os.path.join(work_dir, "hf")
    save_hf_checkpoint(plain, hf_dir, label_list=["0", "1"])
    try:  # eager attention: the graph onnxruntime.transformers fuses (as run.py)
      onnx_path = peers.export_onnx(peers.load_hf_classifier(hf_dir, attention="eager"),
                                    os.path.join(work_dir, "hf.onnx"), SEQ)
      variants, failures = peers.onnx_variants(onnx_path, config["hidden_size"],
                                               config["num_attention_heads"])
      onnx_files = {name: path for name, path in variants.items() if name in ORT_ROWS}
    except Exception as e:  # pylint: disable=broad-except
      failures["ORT fp32"] = f"ONNX export failed: {type(e).__name__}: {str(e)[:300]}"
  garden = common.export_model_garden_encoder(work_dir, config)
  return fns, onnx_files, garden, failures


def garden_call(garden, arrays):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  t = {k: tf.constant(v) for k, v in arrays.items()}
  return lambda: garden(input_word_ids=t["input_ids"], input_mask=t["input_mask"],
                        input_type_ids=t["segment_ids"])


def measure(fns, onnx_files, garden_path, batches, rounds, warmup, peers, layers, vocab):
  """Times every row at each batch. Returns (rows, {batch: bit-exact}, {batch: ORT agreement},
  {batch: mixed batch exit layers})."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  garden = tf.saved_model.load(garden_path).signatures["serving_default"]
  rows, exact, agreement, mixed = [], {}, {}, {}
  for batch in batches:
    calls, arrays = early_exit.signature_calls(fns, batch, SEQ, vocab)
    outputs, exact[str(batch)] = early_exit.check_outputs(calls, layers)
    if "mixed batch" in outputs:
      mixed[str(batch)] = outputs["mixed batch"]["exit_layer"].tolist()
    full = outputs["full depth"]["probabilities"]
    for name, path in onnx_files.items():
      calls[name] = peers.ort_call(path, arrays["input_ids"], arrays["input_mask"],
                                   arrays["segment_ids"])
      agreement.setdefault(str(batch), {})[name] = float(np.abs(calls[name]() - full).max())
    calls["model garden fp32"] = garden_call(garden, arrays)
    n = batch_rounds(rounds, batch)
    times = common.time_interleaved(calls, n, warmup=warmup)
    rows += [dict(row, status="ok") for row in
             early_exit.latency_rows(times, batch, n, outputs, REFERENCES)]
  return rows, exact, agreement, mixed


def not_run_rows(batches, reason):
  return [{"batch": b, "model": name, "status": f"not run ({reason})"}
          for b in batches for name in ORT_ROWS]


def settings(shape, isa_cap, patiences, exit_layers):
  """(ISA record, patiences, exit layers) of a run, the defaults of `shape` for empty lists;
  ValueError for an unknown ISA cap, a patience < 1 or an exit layer outside 1..L."""
  isa = sizes.isa_info(sizes.cpu_flags(), isa_cap)
  layers = SHAPES[shape]["num_hidden_layers"]
  patiences = patiences or DEFAULT_ROWS[shape][0]
  exit_layers = exit_layers or DEFAULT_ROWS[shape][1]
  bad = [p for p in patiences if p < 1] + [k for k in exit_layers if not 1 <= k <= layers]
  if bad:
    raise ValueError(f"--patiences must be >= 1 and --exit_layers in 1..{layers}: {bad}")
  return isa, patiences, exit_layers


def run(shape, work_dir, isa_cap=None, rounds=30, warmup=2, batches=(1, 32), patiences=None,
        exit_layers=None, with_peers=None, log=print):
  """The whole bench; returns the result dict (markdown() prints it)."""
  isa, patiences, exit_layers = settings(shape, isa_cap, patiences, exit_layers)
  set_isa(isa)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(torch_peers.THREADS)
  with_peers = sizes.have_peers() if with_peers is None else with_peers
  peers = torch_peers if with_peers else None
  config = SHAPES[shape]
  layers = config["num_hidden_layers"]
  date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
  load_before = common.uptime()
  log(f"CPU {common.cpu_model()}: {isa['label']}; peers "
      f"{'installed' if with_peers else 'absent'}; {load_before}")
  log(f"building {shape}: {len(patiences) + len(exit_layers) + 3} exports of ours, "
      f"{'ONNX, ' if with_peers else ''}the model garden ...")
  fns, onnx_files, garden, failures = build(work_dir, shape, patiences, exit_layers, batches,
                                            peers)
  log(f"timing batches {list(batches)} ...")
  rows, exact, agreement, mixed = measure(fns, onnx_files, garden, batches, rounds, warmup,
                                          peers, layers, config["vocab_size"])
  if not with_peers:
    rows += not_run_rows(batches, "the bench venv is not installed (torch/onnxruntime: "
                                  "make bench-peers)")
  else:
    rows += [r for r in not_run_rows(batches, "its build failed: see failures")
             if r["model"] not in onnx_files]
  order = {name: i for i, name in enumerate(fns)}  # ours as built, then ORT, then the garden
  order.update({name: len(order) + i for i, name in enumerate(ORT_ROWS + ("model garden fp32",))})
  rows.sort(key=lambda r: (r["batch"], order.get(r["model"], len(order))))
  fusions = failures.pop("fusions", {})  # onnx_variants' fusion counts: not a failure
  accuracy = None
  if os.path.exists(ACCURACY_FILE):
    with open(ACCURACY_FILE, encoding="utf-8") as f:
      accuracy = json.load(f)
  goals = [g for g in (goal(rows, b, accuracy) for b in batches) if g]
  labels = {"ours": isa["label"], "model garden": isa["label"],
            "ORT": sizes.variant_env("ort", isa)[1]}
  return {"cpu": common.cpu_model(), "cpu_flags": sizes.cpu_flags(), "isa": isa,
          "isa_labels": labels, "cpus": os.cpu_count(), "shape": shape, "config": config,
          "seq": SEQ, "threads": torch_peers.THREADS, "batches": list(batches),
          "settings": {"rounds": rounds, "warmup": warmup,
                       "rounds_at": {str(b): batch_rounds(rounds, b) for b in batches}},
          "date": date, "versions": sizes.versions(with_peers), "load_before": load_before,
          "load_after": common.uptime(), "layers": layers, "rows": rows,
          "no_exit_bit_exact": exact, "ort_max_prob_diff": agreement,
          "mixed_batch_exit_layers": mixed, "goals": goals,
          "onnx_fusions": fusions, "failures": failures}


def _speed(ratio):
  return f"{1 / ratio:.2f}x" if ratio else "n/a"


def break_even(rows, batch):
  """(The faster ORT fp32 row at `batch`, the deepest "exit at layer k" row faster than it):
  early exit beats that ORT row while examples leave by layer k. (None, None) without ORT."""
  ok = [r for r in rows if r["batch"] == batch and r["status"] == "ok"]
  ort = min((r for r in ok if r["model"] in ORT_ROWS), key=lambda r: r["median"], default=None)
  if ort is None:
    return None, None
  key = REFERENCES_BY_ROW[ort["model"]]
  ahead = [int(r["model"].split()[-1]) for r in ok
           if r["model"].startswith("exit at layer") and r[key] < 1]
  return ort["model"], max(ahead, default=None)


REFERENCES_BY_ROW = {row: key for key, row in REFERENCES.items()}
ACCURACY_FILE = os.path.join(common.REPO, "bench", "experiments", "results",
                             "early_exit_accuracy_order.json")


def goal(rows, batch, accuracy, within_points=0.5):
  """The issue's goal at `batch`, read through the accuracy sweep (`accuracy`: the dict of
  ACCURACY_FILE): its patience with the fewest layers within `within_points` of the full model;
  that patience's mean exit layer rounded up to the next timed "exit at layer k" row; that row's
  speed against our full depth and the faster ORT fp32 row. None without a sweep, a timed exit
  row deep enough, or ORT."""
  close = [r for r in (accuracy or {}).get("rows", []) if isinstance(r["patience"], int)
           and r["points_vs_full"] >= -within_points]
  ort, _ = break_even(rows, batch)
  if not close or ort is None:
    return None
  chosen = min(close, key=lambda r: r["mean_exit_layer"])
  exits = {int(r["model"].split()[-1]): r for r in rows if r["batch"] == batch
           and r["status"] == "ok" and r["model"].startswith("exit at layer")}
  layer = min((k for k in exits if k >= chosen["mean_exit_layer"]), default=None)
  if layer is None:
    return None
  row = exits[layer]
  return {"batch": batch, "patience": chosen["patience"],
          "mean_exit_layer": chosen["mean_exit_layer"],
          "points_vs_full": chosen["points_vs_full"], "row": row["model"],
          "speed_vs_full_depth": 1 / row["vs_full_depth"], "ort": ort,
          "speed_vs_ort": 1 / row[REFERENCES_BY_ROW[ort]]}


def markdown(result):
  """The result as a Markdown page: one table of every row, then the break-even lines."""
  labels = result["isa_labels"]
  lines = [
      f"# Early exit beside ONNX Runtime and the model garden ({result['shape']} shape, "
      f"seq {result['seq']})", "",
      f"{result['date']}; CPU {result['cpu']} ({result['cpus']} logical CPUs), "
      f"{result['threads']} intra-op threads each; ISA: ours and the model garden "
      f"{labels['ours']}, ORT {labels['ORT']}.",
      f"Load before: `{result['load_before']}`; after: `{result['load_after']}`.",
      f"Rounds (interleaved, after {result['settings']['warmup']} warm-up calls each): "
      + ", ".join(f"batch {b}: {n}" for b, n in result["settings"]["rounds_at"].items()) + ".",
      "Speed columns: the reference's time / the row's, medians of per-round ratios "
      "(> 1: the row is faster).", "",
      "| batch | model | mean exit layer | median ms | p10-p90 ms | speed vs our full depth "
      "| speed vs ORT fp32 | speed vs ORT fp32 fused |",
      "|---|---|---|---|---|---|---|---|"]
  for r in result["rows"]:
    if r["status"] != "ok":
      lines.append(f"| {r['batch']} | {r['model']} | | {r['status']} | | | | |")
      continue
    exit_layer = r.get("mean_exit_layer")  # rows without an exit_layer output run every layer
    exit_text = f"{exit_layer:.2f}" if exit_layer is not None else str(result["layers"])
    lines.append(
        f"| {r['batch']} | {r['model']} | {exit_text} | {r['median']:.1f} | "
        f"{r['p10']:.1f}-{r['p90']:.1f} | {_speed(r['vs_full_depth'])} | "
        f"{_speed(r.get('vs_ort_fp32'))} | {_speed(r.get('vs_ort_fp32_fused'))} |")
  lines.append("")
  for batch in result["batches"]:
    ort, layer = break_even(result["rows"], batch)
    if ort is None:
      lines.append(f"- Batch {batch}: no ORT row was timed.")
    else:
      deepest = max(int(r["model"].split()[-1]) for r in result["rows"]
                    if r["batch"] == batch and r["model"].startswith("exit at layer"))
      lines.append(f"- Batch {batch}: against {ort} (the faster ORT fp32 row), early exit is "
                   + ("behind at every exit layer timed." if layer is None else
                      f"ahead at every exit layer timed (up to {layer})." if layer == deepest else
                      f"ahead while examples leave by layer {layer} (the deepest "
                      "\"exit at layer k\" row faster than it)."))
  if result.get("goals_from"):
    lines.append(f"- The goal lines below read the accuracy sweep of "
                 f"{result['goals_from']['accuracy_date']} "
                 f"({result['goals_from']['accuracy_file']}) against this run's timed rows.")
  for g in result.get("goals", []):
    lines.append(
        f"- Goal (>= 1.5x our full depth at batch 1; ahead of ORT fp32), batch {g['batch']}: "
        f"the accuracy sweep's patience {g['patience']} is {g['points_vs_full']:+.2f} points "
        f"from the full model at mean exit layer {g['mean_exit_layer']:.2f}; \"{g['row']}\" "
        f"runs {g['speed_vs_full_depth']:.2f}x our full depth and {g['speed_vs_ort']:.2f}x "
        f"{g['ort']} (the sweep's model is the pretrained 12-layer H=128 one of "
        "bench/experiments/results/early_exit_accuracy_order.json: its exit layers stand in for "
        "a base model's).")
  lines += [
      f"- Patience {result['layers'] - 1} (no example can leave) answers the full-depth "
      f"export's probabilities bit for bit: {result['no_exit_bit_exact']}.",
      "- ORT's largest |probability difference| to our full-depth export (same weights): "
      + ("; ".join(f"batch {b}: " + ", ".join(f"{n} {d:.1e}" for n, d in diffs.items())
                   for b, diffs in result["ort_max_prob_diff"].items()) or "n/a") + ".",
      "- The patience rows' exit layers are those of random internal classifiers; a fine-tuned "
      "model's are in bench/experiments/results/early_exit_accuracy_order.json "
      "(docs/early_exit.md).",
      "- The model garden row is its encoder + pooler with its own random weights (no head).",
  ]
  if result["isa"]["cap"]:
    lines.append(f"- ONEDNN_MAX_CPU_ISA={result['isa']['cap']} caps oneDNN for ours and the "
                 "model garden only: ONNX Runtime's MLAS picks its kernels from cpuid (no "
                 "run-time cap exists), so its rows run the native ISA and the ratios to ORT "
                 "are conservative (unfavourable to us) for a real CPU of the capped class.")
  fused = {op: n for op, n in result.get("onnx_fusions", {}).items() if n}
  if fused:
    lines.append("- ORT fp32 fused: " + ", ".join(f"{op} x{n}" for op, n in fused.items()) + ".")
  if result["failures"]:
    lines.append(f"- Not built: {result['failures']}")
  return "\n".join(lines) + "\n"


def refresh_goals(result, accuracy, accuracy_date):
  """`result` with its goals read again through another accuracy sweep (`accuracy`, of
  `accuracy_date`), its timed rows unchanged: the latency of an exit layer does not depend on
  which fine-tuned model's sweep chose the layer. Records which sweep the goals come from."""
  goals = [g for g in (goal(result["rows"], b, accuracy) for b in result["batches"]) if g]
  return dict(result, goals=goals, goals_from={
      "accuracy_file": os.path.relpath(ACCURACY_FILE, common.REPO), "accuracy_date": accuracy_date})


def write(result, out_dir, stem):
  os.makedirs(out_dir, exist_ok=True)
  with open(os.path.join(out_dir, stem + ".json"), "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1, sort_keys=True)
  with open(os.path.join(out_dir, stem + ".md"), "w", encoding="utf-8") as f:
    f.write(markdown(result))
  return os.path.join(out_dir, stem)
