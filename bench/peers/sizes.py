"""The size axis of the peers bench (issue 41): ALBERT-base / -large / -xxlarge (official v2
configs) x sequence 128 / 512 x batch 1 / 32, every variant in its own subprocess
(bench/peers/variant.py) so its peak memory (VmHWM) is its own, beside its time.

  .venv-bench/bin/python -m bench.peers.run --sizes=base,large,xxlarge [--seq_lens=128,512]
      [--batches=1,32] [--isa=AVX2] [--budget_s=1800] [--total_budget_h=12] [--mem_gib=24]

Per size, one random model is built once (in a subprocess) and written in every form the
peers read: our classifier exports (fp32, bf16; SavedModel incl. core_ops/), our TFLite int8
(dynamic batch, one file per sequence length), the HF directory (our converter) that HF torch
loads and ONNX is exported from (+ onnxruntime.transformers fusions, + int8 dynamic
quantization), and the official TF1 checkpoint that the model garden's own converter
(tf2_albert_encoder_checkpoint_converter) turns into its AlbertEncoder's weights; the garden's
probabilities are its pooled output through our classifier head (numpy, inside its timed call).
Each export's size on disk is recorded.

Order: every size is built first; then the cells (and the train step) run cheapest first across
sizes (estimated seconds per call), so a run that reaches --total_budget_h leaves out the most
expensive cells and every size keeps its cheaper rows; the report lists them by size.

Interleaving: a cell (size, seq, batch) is run in `--passes` passes; each pass starts every
variant's subprocess once, in an order rotated per pass, and each subprocess times `calls`
calls after a warm-up. Medians are over all calls; ratios to ours fp32 are the median over
passes of the per-pass median ratios (so drifts that hit a whole pass cancel).

Not run (the table says so, never leaves the row out): a variant whose estimated peak memory
exceeds --mem_gib, one that exceeds --budget_s, one killed (out of memory), one started after
--total_budget_h, and the torch/ONNX Runtime peers when the bench venv is not installed.

ISA: every result names the CPU's vector extensions (/proc/cpuinfo) and, with --isa=X,
ONEDNN_MAX_CPU_ISA=X is set for the TensorFlow subprocesses (ours, the model garden) and for
torch (oneDNN, plus ATEN_CPU_CAPABILITY for its own kernels); ONNX Runtime (MLAS) and TFLite
(XNNPACK) have no such cap: their rows say "native".
"""

import json
import os
import statistics
import subprocess
import sys
import time

from albert_tf.common.cpu import FROZEN_WEIGHTS_VARIABLE
from bench import common

# The official v2 configs (albert_config.json of the v2 TF-Hub modules): E128, vocab 30000,
# one shared layer group. "tiny" is for smoke runs of the bench itself.
SIZES = {
    "tiny": dict(common.ALBERT_BASE, embedding_size=32, hidden_size=64, num_hidden_layers=2,
                 num_attention_heads=2, intermediate_size=256),
    "base": dict(common.ALBERT_BASE),
    "large": dict(common.ALBERT_BASE, hidden_size=1024, num_hidden_layers=24,
                  num_attention_heads=16, intermediate_size=4096),
    "xxlarge": dict(common.ALBERT_BASE, hidden_size=4096, num_hidden_layers=12,
                    num_attention_heads=64, intermediate_size=16384),
}
TRAIN_SIZES = ("large", "tiny")  # the train step's sizes (issue 41: "the train step at large")
TRAIN_BATCH, TRAIN_SEQ = 8, 128

# ---------------------------------------------------------------------------------- the ISA
# /proc/cpuinfo flag -> class, best first; oneDNN's ONEDNN_MAX_CPU_ISA names -> class.
ISA_CLASSES = ("AMX", "AVX512-BF16", "AVX-512", "AVX2", "SSE4.1")
_FLAG_CLASS = (("amx_bf16", "AMX"), ("avx512_bf16", "AVX512-BF16"), ("avx512f", "AVX-512"),
               ("avx2", "AVX2"), ("sse4_1", "SSE4.1"))
_ONEDNN_CLASS = {"SSE41": "SSE4.1", "AVX": "SSE4.1", "AVX2": "AVX2", "AVX2_VNNI": "AVX2",
                 "AVX2_VNNI_2": "AVX2", "AVX512_CORE": "AVX-512",
                 "AVX512_CORE_VNNI": "AVX-512", "AVX512_CORE_BF16": "AVX512-BF16",
                 "AVX10_1_512": "AVX512-BF16", "AVX512_CORE_FP16": "AVX512-BF16",
                 "AVX512_CORE_AMX": "AMX", "AVX10_1_512_AMX": "AMX",
                 "AVX512_CORE_AMX_FP16": "AMX", "AVX10_1_512_AMX_FP16": "AMX", "ALL": None}
_ATEN_CAPABILITY = {"AVX2": "avx2", "AVX-512": "avx512", "AVX512-BF16": "avx512"}


def cpu_flags(cpuinfo="/proc/cpuinfo"):
  """{flag: present} of the vector extensions that decide the kernels."""
  try:
    with open(cpuinfo, encoding="utf-8") as f:
      flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")),
                   [])
  except OSError:
    flags = []
  names = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8",
           "avx_vnni")
  return {name: name in flags for name in names}


def native_class(flags):
  return next((cls for flag, cls in _FLAG_CLASS if flags.get(flag)), "unknown")


def isa_info(flags, cap=None):
  """{"native", "cap", "effective", "label"}: the class the CPU has, the ONEDNN_MAX_CPU_ISA
  asked for, and the class oneDNN then runs (the lower of the two)."""
  native = native_class(flags)
  if not cap:
    return {"native": native, "cap": None, "effective": native, "label": native}
  key = cap.upper()
  if key not in _ONEDNN_CLASS:
    raise ValueError(f"--isa={cap}: not a ONEDNN_MAX_CPU_ISA value ({sorted(_ONEDNN_CLASS)})")
  capped = _ONEDNN_CLASS[key] or native
  order = {cls: i for i, cls in enumerate(ISA_CLASSES)}
  effective = max((native, capped), key=lambda c: order.get(c, len(order)))
  label = (f"{effective} (emulated via ONEDNN_MAX_CPU_ISA={key})" if effective != native
           else native)
  return {"native": native, "cap": key, "effective": effective, "label": label}


def variant_env(kind, isa):
  """(environment, ISA label) of one variant's subprocess under the --isa cap."""
  env = common.child_env(TF_CPP_MIN_LOG_LEVEL="3")
  if not isa["cap"]:
    return env, isa["native"]
  if kind in ("savedmodel", "garden", "train_ours", "train_garden"):
    env["ONEDNN_MAX_CPU_ISA"] = isa["cap"]
    return env, isa["label"]
  if kind in ("hf", "train_hf"):
    env["ONEDNN_MAX_CPU_ISA"] = env["DNNL_MAX_CPU_ISA"] = isa["cap"]
    aten = _ATEN_CAPABILITY.get(isa["effective"])
    if aten:
      env["ATEN_CPU_CAPABILITY"] = aten
    return env, (f"{isa['effective']} (emulated via ONEDNN_MAX_CPU_ISA"
                 f"{' + ATEN_CPU_CAPABILITY=' + aten if aten else ''})")
  return env, f"{isa['native']} (native: no ISA cap knob)"  # ONNX Runtime (MLAS), TFLite


# --------------------------------------------------------------------------- the estimates
def params(c):
  """Parameter count of the classifier (embeddings, the shared layer, pooler, head)."""
  h, i, e = c["hidden_size"], c["intermediate_size"], c["embedding_size"]
  embeddings = (c["vocab_size"] + c["max_position_embeddings"] + c["type_vocab_size"]) * e + 2 * e
  layer = 4 * (h * h + h) + 2 * h + h * i + i + i * h + h + 2 * h
  return embeddings + e * h + h + layer + h * h + h + 2 * h + 2


def estimate_peak_gib(c, batch, seq, train=False):
  """A deliberately generous peak-memory estimate of one variant's process: the runtime
  (2 GiB), the weights three times (float32, a bf16/reordered copy, the loader's copy) and one
  layer's live activations twice (allocator slack); a train step keeps every layer's
  activations, the gradients and two LAMB moments."""
  weights = params(c) * 4
  h, i, a, layers = (c["hidden_size"], c["intermediate_size"], c["num_attention_heads"],
                     c["num_hidden_layers"])
  layer = 4 * batch * seq * (2 * a * seq + 2 * i + 8 * h)
  if train:
    return (2 * 2**30 + weights * 6 + layer * layers * 1.5) / 2**30
  return (2 * 2**30 + weights * 3 + layer * 2) / 2**30


def flops(c, batch, seq):
  """Forward FLOPs of one request (the layers' matmuls and attention)."""
  h, i = c["hidden_size"], c["intermediate_size"]
  per_token = 2 * (4 * h * h + 2 * h * i) + 4 * seq * h
  return batch * seq * c["num_hidden_layers"] * per_token


HEADROOM = 0.8  # of --mem_gib a variant may use: the rest is the OS, the parent, page cache
SLOW_CALL_S = 10  # estimated seconds per call above which a cell runs 1 pass, 1 warm-up, 3 calls


def choose_batch(size, c, seq, batch, mem_gib):
  """(batch to run, reason or None): a batch whose estimated peak exceeds HEADROOM x mem_gib is
  cut to 8 (issue 41: xxlarge at 512), and the reason is recorded."""
  need = estimate_peak_gib(c, batch, seq)
  if need <= HEADROOM * mem_gib or batch <= 8:
    return batch, None
  need8 = estimate_peak_gib(c, 8, seq)
  return 8, (f"batch {batch} estimated at {need:.1f} GiB peak > {HEADROOM:.0%} of "
             f"{mem_gib:g} GiB for {size} seq {seq}; batch 8 ({need8:.1f} GiB) instead")


def schedule(c, batch, seq, passes, calls, gflops):
  """(passes, warm-up calls, timed calls, estimated s per call) of one cell: a cell whose calls
  take over SLOW_CALL_S (at `gflops`) runs one pass of one warm-up and three timed calls."""
  per_call = flops(c, batch, seq) / (gflops * 1e9)
  if per_call > SLOW_CALL_S:
    return 1, 1, 3, per_call
  return passes, 2, calls_for(calls, batch, seq), per_call


# ------------------------------------------------------------------------------ the builds
def disk_bytes(path, skip_subdir=None):
  """Bytes of a file or a directory tree (without its `skip_subdir`), each file counted once
  however many hard links it has (an export's core_ops/ variables are links to the version's)."""
  if os.path.isfile(path):
    return os.path.getsize(path)
  sizes = {}
  for root, dirs, files in os.walk(path):
    if root == path and skip_subdir in dirs:
      dirs.remove(skip_subdir)
    for name in files:
      st = os.stat(os.path.join(root, name))
      sizes[(st.st_dev, st.st_ino)] = st.st_size
  return sum(sizes.values())


def build_size(size, seq_lens, work_dir, with_peers):
  """(Runs in a subprocess.) Writes every form of one random model of `size` into work_dir;
  returns {"paths": {name: path}, "disk": {name: bytes}, "failures": {name: reason}}."""
  from albert_tf import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.checkpoints.hf.save import save_hf_checkpoint  # pylint: disable=g-import-not-at-top
  from albert_tf.export import export_classifier  # pylint: disable=g-import-not-at-top
  from albert_tf.export.tflite import write_tflite  # pylint: disable=g-import-not-at-top
  from albert_tf.models.classifier import AlbertClassifier  # pylint: disable=g-import-not-at-top
  config = SIZES[size]
  model = AlbertClassifier(AlbertConfig.from_dict(config), num_classes=2, dropout_rate=0.0)
  paths, failures = {}, {}

  def attempt(name, fn):
    try:
      paths[name] = fn()
    except Exception as e:  # pylint: disable=broad-except
      failures[name] = f"export failed: {type(e).__name__}: {str(e)[:300]}"

  seq0 = max(seq_lens)
  for precision in ("fp32", "bf16"):
    attempt(f"ours {precision}", lambda p=precision: export_classifier(
        model, os.path.join(work_dir, f"ours_{p}"), ["0", "1"], seq0, precision=p))
  for seq in seq_lens:
    attempt(f"ours TFLite int8 s{seq}", lambda s=seq: write_tflite(
        model, os.path.join(work_dir, f"ours_int8_s{s}.tflite"), s, quantize="dynamic",
        batch_size=None))
  hf_dir = os.path.join(work_dir, "hf")  # (save_hf_checkpoint returns the tensor names)
  attempt("hf", lambda: (save_hf_checkpoint(model, hf_dir, label_list=["0", "1"]), hf_dir)[1])
  try:  # the same weights: our official TF1 checkpoint through the garden's own converter
    checkpoint, paths["model garden head"] = garden_checkpoint(model, config, work_dir)
  except Exception as e:  # pylint: disable=broad-except
    checkpoint = None
    failures["model garden weights"] = (f"own random weights (no probabilities): the "
                                        f"conversion failed: {type(e).__name__}: {str(e)[:300]}")
  attempt("model garden fp32", lambda: common.export_model_garden_encoder(
      work_dir, config, checkpoint=checkpoint))
  if with_peers and "hf" in paths:
    try:
      from bench.peers import torch_peers as peers  # pylint: disable=g-import-not-at-top
      onnx_path = peers.export_onnx(peers.load_hf_classifier(paths["hf"], attention="eager"),
                                    os.path.join(work_dir, "hf.onnx"), seq0)
      variants, onnx_failures = peers.onnx_variants(onnx_path, config["hidden_size"],
                                                    config["num_attention_heads"])
      paths.update(variants)
      failures.update({k: str(v) for k, v in onnx_failures.items()})
    except Exception as e:  # pylint: disable=broad-except
      failures["ORT fp32"] = f"ONNX export failed: {type(e).__name__}: {str(e)[:300]}"
  disk = {name: disk_bytes(path) for name, path in paths.items()
          if name not in ("hf", "model garden head")}
  if "ours fp32" in paths and os.path.isdir(os.path.join(paths["ours fp32"], "core_ops")):
    # What core_ops/ adds to the version (its weights are links to the version's own).
    version = paths["ours fp32"]
    disk["ours fp32: of which core_ops/"] = (disk_bytes(version)
                                             - disk_bytes(version, skip_subdir="core_ops"))
  return {"paths": paths, "disk": disk, "failures": failures}


def garden_checkpoint(model, config, work_dir):
  """Our model's weights for the model garden: written as an official TF1 checkpoint (our
  converter), converted by the garden's tf2_albert_encoder_checkpoint_converter; the classifier
  head (official output_weights [2, H], output_bias) saved as .npz for the garden's child.
  Returns (the garden encoder checkpoint, the head file)."""
  import types  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.checkpoints import conversion  # pylint: disable=g-import-not-at-top
  from official.nlp.tools import tf2_albert_encoder_checkpoint_converter as converter  # pylint: disable=g-import-not-at-top
  tf1 = os.path.join(work_dir, "official_tf1", "model.ckpt")
  conversion.write_model(model, "tf1", tf1)
  out_dir = os.path.join(work_dir, "garden_ckpt")
  os.makedirs(os.path.join(out_dir, "temp_v1"), exist_ok=True)  # the converter needs it
  converter.convert_checkpoint(types.SimpleNamespace(**config), os.path.join(out_dir, "encoder"),
                               tf1, "encoder")
  head = os.path.join(work_dir, "classifier_head.npz")
  np.savez(head, weights=tf.train.load_variable(tf1, "output_weights"),
           bias=tf.train.load_variable(tf1, "output_bias"))
  return tf.train.latest_checkpoint(out_dir), head


# ------------------------------------------------------------------------------ the variants
def serving_variants(paths, seq, with_peers):
  """[(name, spec)] of one cell; a missing path's variant gets spec None (reported)."""
  out = [("ours fp32", {"kind": "savedmodel", "path": paths.get("ours fp32")}),
         # The same export served the README's way for CPUs with oneDNN (reorder once).
         ("ours fp32, frozen weights", {"kind": "savedmodel", "path": paths.get("ours fp32"),
                                        "env": {FROZEN_WEIGHTS_VARIABLE: "1"}}),
         ("ours bf16", {"kind": "savedmodel", "path": paths.get("ours bf16")}),
         ("ours TFLite int8", {"kind": "tflite", "path": paths.get(f"ours TFLite int8 s{seq}")}),
         ("model garden fp32", {"kind": "garden", "path": paths.get("model garden fp32"),
                                "head": paths.get("model garden head")})]
  peers = [("HF torch fp32", {"kind": "hf", "path": paths.get("hf")}),
           ("HF torch bf16", {"kind": "hf", "path": paths.get("hf"), "bf16": True})]
  peers += [(name, {"kind": "ort", "path": paths.get(name)})
            for name in ("ORT fp32", "ORT fp32 fused", "ORT int8", "ORT int8 fused")]
  for name, spec in peers:
    out.append((name, spec if with_peers else {"kind": spec["kind"], "path": None,
                                               "missing": "the bench venv is not installed "
                                                          "(torch/onnxruntime: make bench-peers)"}))
  return out


def train_variants(config, with_peers):
  missing = None if with_peers else "the bench venv is not installed (torch)"
  base = {"config": config, "batch": TRAIN_BATCH, "seq": TRAIN_SEQ, "warmup": 1}
  return [("ours fp32", dict(base, kind="train_ours")),
          ("ours bf16", dict(base, kind="train_ours", precision="bf16")),
          ("model garden fp32", dict(base, kind="train_garden")),
          ("HF torch fp32", dict(base, kind="train_hf", missing=missing)),
          ("HF torch bf16", dict(base, kind="train_hf", bf16=True, missing=missing))]


def run_child(spec, spec_file, env, budget_s):
  """Runs variant.py on spec; returns (result dict, None) or (None, reason)."""
  with open(spec_file, "w", encoding="utf-8") as f:
    json.dump(spec, f)
  try:
    proc = subprocess.run(common.module_command("bench.peers.variant", spec_file),
                          capture_output=True, text=True, env=env, timeout=budget_s,
                          check=False)
  except subprocess.TimeoutExpired:
    return None, f"did not fit (over the {budget_s:g} s per-variant time budget)"
  if proc.returncode in (-9, 137):
    return None, "did not fit (killed by SIGKILL: out of memory)"
  if proc.returncode != 0:
    tail = (proc.stderr.strip().splitlines() or ["no stderr"])[-1][:300]
    if "MemoryError" in proc.stderr or "OOM" in proc.stderr or "out of memory" in proc.stderr:
      return None, f"did not fit (out of memory: {tail})"
    return None, f"failed (exit {proc.returncode}: {tail})"
  return json.loads(proc.stdout.strip().splitlines()[-1]), None


class Clock:
  """The --total_budget_h budget of the whole run."""

  def __init__(self, hours):
    self.deadline = time.time() + hours * 3600
    self.hours = hours

  def spent(self):
    return time.time() > self.deadline


def run_cell(variants, cell_dir, isa, passes, calls, budget_s, est_gib, mem_gib, clock):
  """Runs the variants of one cell in rotated passes. Returns {name: row}."""
  os.makedirs(cell_dir, exist_ok=True)
  rows, times, peaks, loads, per_pass, outs = {}, {}, {}, {}, {}, {}
  for name, spec in variants:
    if spec.get("missing"):
      rows[name] = {"status": f"not run ({spec['missing']})"}
    elif not spec.get("path") and not spec["kind"].startswith("train_"):
      rows[name] = {"status": "not run (its export failed: see the size's failures)"}
    elif est_gib > HEADROOM * mem_gib:
      rows[name] = {"status": f"did not fit (estimated {est_gib:.1f} GiB > {HEADROOM:.0%} of "
                              f"{mem_gib:g} GiB)"}
  runnable = [(n, s) for n, s in variants if n not in rows]
  for p in range(passes):
    shift = p % max(1, len(runnable))
    for name, spec in runnable[shift:] + runnable[:shift]:
      if name in rows:  # failed in an earlier pass
        continue
      if clock.spent():
        rows[name] = {"status": f"did not fit (the {clock.hours:g} h bench budget was spent)"}
        continue
      env, label = variant_env(spec["kind"], isa)
      env.update(spec.get("env", {}))  # a variant's own settings (shared_weights.py)
      slug = name.replace(" ", "_").replace(",", "")
      spec = dict(spec, calls=spec.get("calls", calls), out=os.path.join(cell_dir, slug + ".npy"))
      result, reason = run_child(spec, os.path.join(cell_dir, slug + ".json"), env, budget_s)
      if reason and isa["cap"] and isa["effective"] != isa["native"] and "bf16" in name:
        reason += (" [under ONEDNN_MAX_CPU_ISA emulation: TensorFlow picks its bf16 kernels "
                   "from the CPU's own flags, the capped oneDNN may have none; not a result "
                   "for a real CPU of that class]")
      if reason:
        rows[name] = {"status": reason, "isa": label}
        continue
      times.setdefault(name, []).extend(result["ms"])
      per_pass.setdefault(name, {})[p] = statistics.median(result["ms"])
      peaks[name] = max(peaks.get(name, 0), result["vmhwm_kib"])
      loads.setdefault(name, []).append(result["load_s"])
      if result["out"]:
        outs[name] = result["out"]
      rows.setdefault("_labels", {})[name] = label
  labels = rows.pop("_labels", {})
  ref = per_pass.get("ours fp32", {})
  for name, ms in times.items():
    if name in rows:
      continue
    ratios = [m / ref[p] for p, m in per_pass[name].items() if p in ref]  # as paired()
    rows[name] = {"status": "ok", "median_ms": statistics.median(ms), "calls": len(ms),
                  "passes": len(per_pass[name]), "peak_mib": peaks[name] / 1024,
                  "load_s": statistics.median(loads[name]), "isa": labels[name],
                  "vs_ours_fp32": statistics.median(ratios) if ratios else None,
                  "per_pass_ms": per_pass[name]}
  for name, diff in agreement(outs).items():
    if rows.get(name, {}).get("status") == "ok":
      rows[name]["max_prob_diff"] = diff
  return rows


def agreement(outs):
  """Max |probability difference| to ours fp32 (ORT int8: to its own fp32 graph)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  values = {name: np.load(path) for name, path in outs.items()}
  reference = {"ORT int8 fused": "ORT fp32 fused", "ORT int8": "ORT fp32"}
  diffs = {}
  for name, value in values.items():
    ref = reference.get(name, "ours fp32")
    if name != "ours fp32" and ref in values and values[ref].shape == value.shape:
      diffs[name] = float(np.abs(value - values[ref]).max())
  return diffs


def paired(row, reference):
  """Median over the passes both ran of the per-pass median ratio (drifts that hit a whole
  pass cancel); the ratio of the overall medians when they share no pass."""
  common_passes = [p for p in row["per_pass_ms"] if p in reference["per_pass_ms"]]
  if not common_passes:
    return row["median_ms"] / reference["median_ms"]
  return statistics.median(row["per_pass_ms"][p] / reference["per_pass_ms"][p]
                           for p in common_passes)


def goals_for(rows, where, batch, goals):
  """The GOALS of run.py for one cell (batch 1: "batch 1"; any larger batch: "batch 32")."""
  key = "batch 1" if batch == 1 else ("train" if where.startswith("train") else "batch 32")
  ort = {kind: min((n for n in rows if n.startswith("ORT") and kind in n
                    and rows[n].get("status") == "ok"),
                   key=lambda n: rows[n]["median_ms"], default=None)
         for kind in ("fp32", "int8")}
  out = []
  for (at, ours, peer), limit in goals.items():
    if at != key:
      continue
    peer_name = {"ORT best fp32": ort["fp32"], "ORT int8": ort["int8"]}.get(peer, peer)
    a, b = rows.get(ours, {}), rows.get(peer_name or peer, {})
    if a.get("status") == "ok" and b.get("status") == "ok":
      ratio = paired(a, b)
      out.append({"where": where, "ours": ours, "peer": peer_name, "ratio": ratio,
                  "goal": limit, "met": ratio <= limit})
    else:
      out.append({"where": where, "ours": ours, "peer": peer_name or peer, "ratio": None,
                  "goal": limit, "met": None})
  return out


def work_order(cells, train_sizes, passes, calls, gflops):
  """[("serve", cell) | ("train", size)], cheapest first by estimated seconds per call, across
  sizes: when --total_budget_h runs out, what is left is the most expensive cells, and every
  size has its cheaper rows. `cells` as plan() gives them; the train step (forward + backward,
  about 3 forward passes) runs for the TRAIN_SIZES among `train_sizes`."""
  work = [(schedule(SIZES[cell[0]], cell[3], cell[1], passes, calls, gflops)[3], "serve", cell)
          for cell in cells]
  work += [(3 * flops(SIZES[size], TRAIN_BATCH, TRAIN_SEQ) / (gflops * 1e9), "train", size)
           for size in train_sizes if size in TRAIN_SIZES]
  return [(what, item) for _, what, item in sorted(work, key=lambda w: w[0])]


def plan(sizes, seq_lens, batches, mem_gib, calls, passes, gflops):
  """[(size, seq, batch, reason)] and the run-time estimate (s) at `gflops` sustained."""
  cells, seconds = [], 0.0
  for size in sizes:
    for seq in seq_lens:
      for requested in batches:
        batch, reason = choose_batch(size, SIZES[size], seq, requested, mem_gib)
        cells.append((size, seq, requested, batch, reason))
        # 11 variants, each: its warm-up and timed calls + loading (~params / 50 M per s)
        n, warmup, timed, per_call = schedule(SIZES[size], batch, seq, passes, calls, gflops)
        seconds += n * 11 * ((warmup + timed) * per_call + 5 + params(SIZES[size]) / 5e7)
  return cells, seconds


def calls_for(calls, batch, seq):
  """Timed calls per subprocess: `calls` at batch 1 seq 128, fewer for bigger requests."""
  return max(3, int(calls / max(1.0, (batch * seq / 128) ** 0.5)))


def versions(with_peers):
  import importlib.metadata as md  # pylint: disable=g-import-not-at-top
  out = {"cpu_count": os.cpu_count()}
  for package in ("tensorflow", "torch", "transformers", "onnxruntime", "ai-edge-litert",
                  "tf-models-official"):
    try:
      out[package] = md.version(package)
    except md.PackageNotFoundError:
      out[package] = "not installed"
  out["peers"] = "run" if with_peers else "torch/onnxruntime not installed: peers not run"
  return out


def have_peers():
  import importlib.util  # pylint: disable=g-import-not-at-top
  return all(importlib.util.find_spec(m) for m in ("torch", "transformers", "onnx",
                                                   "onnxruntime"))


def build(size, size_dir, seq_lens, with_peers, log=print):
  """Builds one size's models in a subprocess (build_size); returns its record."""
  os.makedirs(size_dir, exist_ok=True)
  start = time.time()
  log(f"building {size} ...")
  proc = subprocess.run(
      common.module_command(__spec__.name, "build", size, size_dir,
                            ",".join(map(str, seq_lens)), "1" if with_peers else "0"),
      capture_output=True, text=True, env=common.child_env(TF_CPP_MIN_LOG_LEVEL="3"),
      check=False)
  if proc.returncode == 0:
    built = json.loads(proc.stdout.strip().splitlines()[-1])
  else:
    tail = (proc.stderr.strip().splitlines() or ["no stderr"])[-1][:300]
    built = {"paths": {}, "disk": {}, "failures": {"build": f"exit {proc.returncode}: {tail}"}}
  built.update(config=SIZES[size], params=params(SIZES[size]), build_s=time.time() - start)
  return built


def run(sizes, seq_lens, batches, isa_cap, work_dir, goals, passes=2, calls=10, budget_s=3600,
        total_budget_h=12.0, mem_gib=24.0, train=True, gflops=100.0, log=print):
  """The whole size axis; returns the result dict (report.markdown_sizes prints it)."""
  flags = cpu_flags()
  isa = isa_info(flags, isa_cap)
  with_peers = have_peers()
  cells, estimate = plan(sizes, seq_lens, batches, mem_gib, calls, passes, gflops)
  log(f"CPU {common.cpu_model()}: {isa['label']}; peers {'installed' if with_peers else 'absent'}")
  log(f"estimated serving time at {gflops:g} GFLOP/s sustained: {estimate / 3600:.1f} h "
      f"(+ builds and the train step); budget {total_budget_h:g} h")
  for size, seq, requested, batch, reason in cells:
    if reason:
      log(f"{size} seq {seq}: {reason}")
  clock = Clock(total_budget_h)
  result = {"cpu": common.cpu_model(), "cpu_flags": flags, "isa": isa,
            "versions": versions(with_peers), "load_before": common.uptime(),
            "settings": {"passes": passes, "calls": calls, "budget_s": budget_s,
                         "total_budget_h": total_budget_h, "mem_gib": mem_gib},
            "estimate_h": estimate / 3600, "sizes": {}, "cells": [], "training": [],
            "goals": []}
  for size in sizes:
    result["sizes"][size] = build(size, os.path.join(work_dir, size), seq_lens, with_peers, log)
  for what, item in work_order(cells, sizes if train else (), passes, calls, gflops):
    if what == "train":
      size = item
      log(f"{size} train step ...")
      est = estimate_peak_gib(SIZES[size], TRAIN_BATCH, TRAIN_SEQ, train=True)
      rows = run_cell(train_variants(SIZES[size], with_peers),
                      os.path.join(work_dir, size, "train"), isa, passes, 3, budget_s, est,
                      mem_gib, clock)
      result["training"].append({"size": size, "seq": TRAIN_SEQ, "batch": TRAIN_BATCH,
                                 "estimated_peak_gib": est, "rows": rows})
      result["goals"] += goals_for(rows, f"train {size} s{TRAIN_SEQ} b{TRAIN_BATCH}",
                                   TRAIN_BATCH, goals)
      continue
    size, seq, requested, batch, reason = item
    log(f"{size} seq {seq} batch {batch} ...")
    est = estimate_peak_gib(SIZES[size], batch, seq)
    variants = serving_variants(result["sizes"][size]["paths"], seq, with_peers)
    for _, spec in variants:
      spec.update(batch=batch, seq=seq)
    n, warmup, timed, _ = schedule(SIZES[size], batch, seq, passes, calls, gflops)
    for _, spec in variants:
      spec["warmup"] = warmup
    rows = run_cell(variants, os.path.join(work_dir, size, f"s{seq}_b{batch}"), isa, n,
                    timed, budget_s, est, mem_gib, clock)
    result["cells"].append({"size": size, "seq": seq, "batch": batch,
                            "batch_requested": requested, "batch_reason": reason,
                            "estimated_peak_gib": est, "rows": rows})
    result["goals"] += goals_for(rows, f"{size} s{seq} b{batch}", batch, goals)
  # The report's order: by size as asked, then sequence length and batch.
  order = {size: i for i, size in enumerate(sizes)}
  result["cells"].sort(key=lambda c: (order[c["size"]], c["seq"], c["batch"]))
  result["training"].sort(key=lambda t: order[t["size"]])
  def goal_order(goal):  # "<size> s<seq> b<batch>" or "train <size> s<seq> b<batch>"
    words = goal["where"].split()
    train = words[0] == "train"
    size, seq, batch = words[1:] if train else words
    return (train, order.get(size, len(order)), int(seq[1:]), int(batch[1:]))
  result["goals"].sort(key=goal_order)  # stable: each cell's goals keep their order
  result["load_after"] = common.uptime()
  return result


if __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "build":
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  print(json.dumps(build_size(sys.argv[2], [int(s) for s in sys.argv[4].split(",")],
                              sys.argv[3], sys.argv[5] == "1")))
