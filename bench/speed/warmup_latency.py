"""First-request latency of a freshly loaded export, with and without TF Serving's warm-up.

Every export carries `assets.extra/tf_serving_warmup_requests` (albert_tf/export/warmup.py),
which TF Serving replays when it loads a version, before the version takes traffic. This
bench shows what that buys: an ALBERT-base classifier (configs/albert_base_v2.json, random
weights, 2 labels, max_seq_length 128, raw-text signature with a small SentencePiece model)
is exported once; then, in fresh processes (a server that has just loaded the version):

  cold   load the SavedModel, then the first request, then `--steady` more (steady state);
         one process per signature
  warm   load, replay every warm-up record of the export through its signature (as TF Serving
         does at load), then for each signature the same first request and steady state

  .venv/bin/python -m bench.speed.warmup_latency [--rounds=3] [--steady=20]

The first request is not one of the warm-up records: batch 1, a sentence pair
(serving_default) or 100 real tokens padded to 128 (token_ids). Processes run in interleaved
rounds (the order of the cold and warm processes flips every round), so a drift in the
machine's speed hits both alike. Reported: the load and warm-up replay times; per signature
and mode, medians over rounds of the first request and of steady state (median of `--steady`
calls), the first request / steady state ratio, and cold / warm first request (the median of
per-round ratios). tf.saved_model.load calls the signatures as ConcreteFunctions,
not through TF Serving's Session, but the first call pays the same kind of cost (graph
optimisation, executor and oneDNN kernel creation).
"""

import json
import os
import statistics
import subprocess
import tempfile
import time

from absl import app
from absl import flags

from bench import common

CONFIG = os.path.join(common.REPO, "configs", "albert_base_v2.json")
SIGNATURES = ("serving_default", "token_ids")
SEQ_LENGTH = 128

flags.DEFINE_integer("rounds", 3, "Rounds of (cold, warm) processes per signature.")
flags.DEFINE_integer("steady", 20, "Requests after the first one; their median is the steady "
                     "state.")
flags.DEFINE_string("work_dir", None, "Where the export goes (default: a temp dir).")
flags.DEFINE_string("child", None, "Internal: cold|warm, run one fresh-process measurement.")
flags.DEFINE_string("export", None, "Internal: the version directory the child loads.")
flags.DEFINE_string("signatures", None, "Internal: the signatures the child times, in order.")

FLAGS = flags.FLAGS


def export(work_dir):
  """The ALBERT-base classifier as a TF Serving version; returns its directory."""
  from albert_tf import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.export import export_classifier  # pylint: disable=g-import-not-at-top
  from albert_tf.models.classifier import AlbertClassifier  # pylint: disable=g-import-not-at-top
  spm = common.spm_model(work_dir)
  model = AlbertClassifier(AlbertConfig.from_json_file(CONFIG), num_classes=2)
  return export_classifier(model, os.path.join(work_dir, "export"), ["0", "1"], SEQ_LENGTH, spm,
                           True, "bench", True)


def first_request(signature):
  """The request timed first and then in steady state (not one of the warm-up records)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if signature == "serving_default":
    return {"text_a": tf.constant(["Will the new bridge across the river be finished before "
                                   "the winter storms arrive?"]),
            "text_b": tf.constant(["Engineers said on Monday that the last section would be "
                                   "lifted into place within three weeks."])}
  rng = np.random.default_rng(7)
  mask = (np.arange(SEQ_LENGTH) < 100).astype(np.int32)[None]
  return {"input_ids": tf.constant(rng.integers(5, 4000, size=(1, SEQ_LENGTH)).astype(np.int32)
                                   * mask),
          "input_mask": tf.constant(mask),
          "segment_ids": tf.constant((np.arange(SEQ_LENGTH) >= 40).astype(np.int32)[None] * mask)}


def child(mode, path, signatures, steady):
  """One fresh process: load, (replay the warm-up records,) then for each signature in turn
  time its first request and steady state. Prints one JSON line."""
  start = time.perf_counter()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  from tensorflow_serving.apis import prediction_log_pb2  # pylint: disable=g-import-not-at-top
  from albert_tf.common.export_format import WARMUP_REQUESTS  # pylint: disable=g-import-not-at-top
  result = {"mode": mode, "import_s": time.perf_counter() - start}
  start = time.perf_counter()
  loaded = tf.saved_model.load(path)
  result["load_s"] = time.perf_counter() - start
  result["warmup_s"] = 0.0
  if mode == "warm":
    start = time.perf_counter()
    records = 0
    for raw in tf.data.TFRecordDataset(os.path.join(path, WARMUP_REQUESTS)):
      request = prediction_log_pb2.PredictionLog.FromString(raw.numpy()).predict_log.request
      inputs = {k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()}
      loaded.signatures[request.model_spec.signature_name](**inputs)
      records += 1
    result["warmup_s"] = time.perf_counter() - start
    result["warmup_records"] = records
  for signature in signatures:
    fn, inputs = loaded.signatures[signature], first_request(signature)
    start = time.perf_counter()
    fn(**inputs)["probabilities"].numpy()
    first = (time.perf_counter() - start) * 1000
    times = []
    for _ in range(steady):
      start = time.perf_counter()
      fn(**inputs)["probabilities"].numpy()
      times.append((time.perf_counter() - start) * 1000)
    result[signature] = {"first_ms": first, "steady_ms": statistics.median(times)}
  print("RESULT " + json.dumps(result), flush=True)


def run_child(mode, path, signatures, steady):
  command = common.module_command(__spec__.name, f"--child={mode}", f"--export={path}",
                                  f"--signatures={','.join(signatures)}", f"--steady={steady}")
  env = common.child_env(TF_CPP_MIN_LOG_LEVEL="2")
  out = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
  lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
  if out.returncode or not lines:
    raise RuntimeError(f"child {mode} {signatures} failed ({out.returncode}):\n"
                       f"{out.stderr[-3000:]}")
  return json.loads(lines[-1][len("RESULT "):])


def cpu_line():
  """`lscpu`'s model name, the CPU count and which of avx2 / avx512 / amx it has."""
  lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
  fields = dict(line.split(":", 1) for line in lscpu.splitlines() if ":" in line)
  model = fields.get("Model name", common.cpu_model()).strip()
  flags_ = fields.get("Flags", "").split()
  wanted = [f for f in flags_ if f in ("avx2", "avx512f", "avx512_bf16", "avx512_vnni")
            or f.startswith("amx")]
  amx = "" if any(f.startswith("amx") for f in wanted) else " (no AMX)"
  return f"{model}; {os.cpu_count()} CPUs; flags: {' '.join(wanted) or 'none'}{amx}"


def main(_):
  if FLAGS.child:
    child(FLAGS.child, FLAGS.export, FLAGS.signatures.split(","), FLAGS.steady)
    return
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="warmup_latency_")
  path = export(work_dir)
  size = os.path.getsize(os.path.join(path, "assets.extra", "tf_serving_warmup_requests"))
  load_before = common.uptime()
  cold, warm = [], []  # per round: {signature: result}, result
  for r in range(FLAGS.rounds):
    # Cold: one process per signature (a second signature in the same process would find
    # kernels the first one built). Warm: one process replays the records, then times both.
    runs = [("cold", (signature,)) for signature in SIGNATURES] + [("warm", SIGNATURES)]
    if r % 2:
      runs.reverse()
    cold.append({})
    for mode, signatures in runs:
      result = run_child(mode, path, signatures, FLAGS.steady)
      if mode == "cold":
        cold[-1][signatures[0]] = result
      else:
        warm.append(result)
      print(f"round {r} {mode}: load {result['load_s']:.1f} s, warm-up {result['warmup_s']:.1f} s"
            + "".join(f"; {s} first {result[s]['first_ms']:.0f} ms, steady "
                      f"{result[s]['steady_ms']:.1f} ms" for s in signatures), flush=True)
  print(f"\nCPU: {cpu_line()}")
  print(f"uptime before timing: {load_before}")
  print(f"uptime after timing:  {common.uptime()}")
  print(f"export: {path} (warm-up file {size / 1024:.0f} KiB, {warm[0]['warmup_records']} "
        f"records; its core_ops/ has its own); medians over {FLAGS.rounds} rounds")
  print(f"warm-up replay at load: {statistics.median(w['warmup_s'] for w in warm):.1f} s; load "
        f"{statistics.median(w['load_s'] for w in warm):.1f} s")
  summarize(cold, warm)


def summarize(cold, warm):
  """Prints the per-signature table. cold: per round {signature: child result}; warm: per
  round the warm child's result."""
  print(f"{'signature':<16} {'mode':<5} {'first ms':>9} {'steady ms':>10} {'first/steady':>13}")
  for signature in SIGNATURES:
    rows = {"cold": [c[signature][signature] for c in cold],
            "warm": [w[signature] for w in warm]}
    for mode, results in rows.items():
      first = statistics.median(x["first_ms"] for x in results)
      steady = statistics.median(x["steady_ms"] for x in results)
      ratio = statistics.median(x["first_ms"] / x["steady_ms"] for x in results)
      print(f"{signature:<16} {mode:<5} {first:>9.0f} {steady:>10.1f} {ratio:>12.1f}x")
    paired = statistics.median(c["first_ms"] / w["first_ms"]
                               for c, w in zip(rows["cold"], rows["warm"]))
    per_round = "; ".join(f"{c['first_ms']:.0f} vs {w['first_ms']:.0f}"
                          for c, w in zip(rows["cold"], rows["warm"]))
    print(f"{signature:<16} first request cold / warm: {paired:.1f}x (median of per-round "
          f"ratios; per round, ms: {per_round})")


if __name__ == "__main__":
  app.run(main)
