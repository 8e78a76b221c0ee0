"""fp32 vs bf16 vs bf16+XLA on the CPU at hand: ALBERT-base training step and serving latency.

  .venv/bin/python -m bench.speed.precision [--train_rounds=3] [--serving_rounds=20] [--kernels]

Prints the CPU model and the flags that decide how bfloat16 runs (avx512_bf16, amx_*, ...),
whether TensorFlow's oneDNN ops are on, then one table (markdown, for the README):

  training  our Trainer's train loop (bench/common.build_our_pretraining_step): ALBERT-base,
            batch 8, seq 128, 20 predictions, MLM + SOP, LAMB; fp32 = --precision=fp32,
            bf16 = --precision=bf16 (mixed_bfloat16: float32 variables, bfloat16 compute),
            +XLA = --jit_compile. Seconds per step.
  serving   a 2-class classifier exported with export_classifier at --export_precision=fp32
            and bf16, loaded with tf.saved_model.load in a fresh process (as a server loads
            it: timings taken in the exporting process itself differed), `token_ids`
            signature, seq 128, every position real, batch 1 and 32. bf16+XLA: the same bf16
            export with the model call compiled by XLA (tf.function(jit_compile=True) inside
            the signature). Milliseconds per request.

Every workload's variants are timed interleaved (one call of each per round, the order rotated
every round), so drifts in machine speed hit all alike: per variant the median and the 10th-90th
percentile; the ratio to fp32 is the median over rounds of the per-round ratio (paired).
--kernels also prints which oneDNN primitives and implementations one batch-1 request of the
fp32 and the bf16 export runs (ONEDNN_VERBOSE=1 in a child process).

The CPUs where bf16 cannot be faster can be imitated on one that has AVX512-BF16:
  TF_ENABLE_ONEDNN_OPTS=0 .venv/bin/python -m bench.speed.precision --training=false
      TensorFlow's oneDNN ops off: matmuls through Eigen (float32 sgemm blocks)
  ONEDNN_MAX_CPU_ISA=AVX512_CORE_VNNI .venv/bin/python -m bench.speed.precision --training=false
      oneDNN limited to a CPU without AVX512-BF16 (Cascade Lake): emulated bfloat16
"""

import collections
import json
import os
import subprocess
import tempfile

from absl import app
from absl import flags
from absl import logging

from bench import common

flags.DEFINE_list("variants", ["fp32", "bf16", "bf16+xla"],
                  "Columns: fp32, bf16, bf16+xla, fp32+xla.")
flags.DEFINE_integer("train_rounds", 3, "Interleaved rounds of the training step.")
flags.DEFINE_integer("steps_per_round", 2, "Training steps per round and variant.")
flags.DEFINE_integer("serving_rounds", 20, "Interleaved rounds at batch 1 (a fifth of them, at "
                     "least 4, at larger batches).")
flags.DEFINE_list("batch_sizes", ["1", "32"], "Serving batch sizes.")
flags.DEFINE_bool("training", True, "Time the training step.")
flags.DEFINE_bool("kernels", False, "Print the oneDNN primitives of one request per export.")
flags.DEFINE_string("work_dir", None, "Where the exports go (default: a temp dir).")
flags.DEFINE_string("child", None, "Internal: run as the serving process, `time:<json>` (exports "
                    "by variant) or `kernels:<export dir>`.")
FLAGS = flags.FLAGS

SEQ_LENGTH = 128
TRAIN_BATCH = 8
NUM_PREDICTIONS = 20


def _split(variant):
  """"bf16+xla" -> ("bf16", True)."""
  precision, _, xla = variant.partition("+")
  return precision, xla == "xla"


# --------------------------------------------------------------------------- training
def time_training(config, variants):
  """{variant: [s per step]} of the pretraining step, variants interleaved."""
  features, labels = common.synthetic_pretraining_batch(TRAIN_BATCH, SEQ_LENGTH, NUM_PREDICTIONS,
                                                        config.vocab_size)
  runs = {}
  for variant in variants:
    precision, xla = _split(variant)
    run, _ = common.build_our_pretraining_step(config, features, labels, TRAIN_BATCH, SEQ_LENGTH,
                                               NUM_PREDICTIONS, precision=precision,
                                               jit_compile=xla)
    runs[variant] = run
  steps = FLAGS.steps_per_round
  times = common.time_interleaved({v: (lambda run=run: run(steps)) for v, run in runs.items()},
                                  FLAGS.train_rounds, warmup=1)
  return {v: [ms / 1000 / steps for ms in t] for v, t in times.items()}


# --------------------------------------------------------------------------- serving
def export_variants(work_dir, config, variants):
  """{variant: version directory}: one random classifier exported per variant."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.export import export_classifier  # pylint: disable=g-import-not-at-top
  from albert_tf.export import serving  # pylint: disable=g-import-not-at-top
  from albert_tf.export.precision import serving_copy  # pylint: disable=g-import-not-at-top
  from albert_tf.models.classifier import AlbertClassifier  # pylint: disable=g-import-not-at-top

  class XlaClassifierServing(serving.ClassifierServing):
    """The export's signatures with the model call compiled by XLA (the input checks are
    Assert ops, which XLA cannot compile, so they stay outside)."""

    def __init__(self, *args, **kwargs):
      super().__init__(*args, **kwargs)
      self._run_model = tf.function(self._run_model, jit_compile=True)

  model = AlbertClassifier(config, num_classes=2)
  paths = {}
  for variant in variants:
    precision, xla = _split(variant)
    base = os.path.join(work_dir, variant.replace("+", "_"))
    if xla:
      module = XlaClassifierServing(serving_copy(model, precision), ["0", "1"], SEQ_LENGTH)
      identity = serving.model_identity("albert_classifier", model, SEQ_LENGTH, None,
                                        precision=variant)
      paths[variant] = serving.write_serving_savedmodel(module, base, identity)
    else:
      paths[variant] = export_classifier(model, base, ["0", "1"], SEQ_LENGTH, None,
                                         precision=precision)
  return paths


def _request(batch):
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(batch)
  segments = (np.arange(SEQ_LENGTH) >= SEQ_LENGTH // 2).astype(np.int32)
  ids = rng.integers(5, 30000, size=(batch, SEQ_LENGTH), dtype=np.int32)
  return {"input_ids": tf.constant(ids),
          "input_mask": tf.ones((batch, SEQ_LENGTH), tf.int32),
          "segment_ids": tf.constant(np.repeat(segments[None], batch, 0))}


def time_serving_here(paths):
  """Child process: prints {batch: {"times": {variant: [ms]}, "differences": {variant: max
  |probability - fp32|}}} as JSON, the variants interleaved at every batch size."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  functions = {v: tf.saved_model.load(p).signatures["token_ids"] for v, p in paths.items()}
  results = {}
  for batch in (int(b) for b in FLAGS.batch_sizes):
    request = _request(batch)
    calls = {v: (lambda f=f: f(**request)) for v, f in functions.items()}
    rounds = FLAGS.serving_rounds if batch == 1 else max(4, FLAGS.serving_rounds // 5)
    times = common.time_interleaved(calls, rounds, warmup=2)
    probabilities = {v: call()["probabilities"].numpy() for v, call in calls.items()}
    differences = {v: float(np.abs(p - probabilities["fp32"]).max())
                   for v, p in probabilities.items()}
    results[batch] = {"times": times, "differences": differences}
  print(json.dumps(results))


def _run_child(child, **env):
  """stdout of this bench run as `--child=<child>` in a fresh interpreter, as a server loads the
  exports (the exporting process's state does not carry over)."""
  args = common.module_command(__spec__.name, f"--child={child}",
                               f"--batch_sizes={','.join(FLAGS.batch_sizes)}",
                               f"--serving_rounds={FLAGS.serving_rounds}")
  proc = subprocess.run(args, capture_output=True, text=True, env=common.child_env(**env),
                        check=False)
  if proc.returncode:
    raise RuntimeError(f"{' '.join(args)} failed:\n{proc.stderr[-3000:]}")
  return proc.stdout


def time_serving(paths):
  """{batch: {"times": ..., "differences": ...}} measured in a fresh process."""
  output = _run_child("time:" + json.dumps(paths))
  return {int(batch): value for batch, value in json.loads(output.splitlines()[-1]).items()}


# --------------------------------------------------------------------------- oneDNN kernels
def trace_kernels_here(export_dir):
  """Child process: one batch-1 request after two warm-up ones, between markers."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  function = tf.saved_model.load(export_dir).signatures["token_ids"]
  request = _request(1)
  for _ in range(2):
    function(**request)
  print("=== request ===", flush=True)
  function(**request)
  print("=== end ===", flush=True)


def kernel_summary(export_dir):
  """[("primitive impl data-types", count)] of one request, from ONEDNN_VERBOSE=1."""
  output = _run_child(f"kernels:{export_dir}", ONEDNN_VERBOSE="1", TF_CPP_MIN_LOG_LEVEL="3")
  request = output.split("=== request ===", 1)[1].split("=== end ===", 1)[0]
  counts = collections.Counter()
  for line in request.splitlines():
    fields = line.split(",")
    # onednn_verbose,v1,primitive,exec,cpu,<primitive>,<impl>,<prop>,<memory descriptors>,...
    if len(fields) > 8 and fields[2:4] == ["primitive", "exec"]:
      # "src:bf16::blocked:ab::f0" (gemm_api: "src_bf16::blocked:ab:f0")
      dtypes = sorted({md.split(":")[0].partition("_")[2] or md.split(":")[1]
                       for md in fields[8].split() if ":" in md})
      counts[f"{fields[5]} {fields[6]} {'/'.join(dtypes)}"] += 1
  return counts.most_common()


# --------------------------------------------------------------------------- report
def _value(number, unit):
  return f"{number:.{1 if unit == 'ms' else 2}f}"


def _cell(times, reference, unit):
  """"median unit (ratio to fp32)" of one variant."""
  text = f"{_value(common.summarize(times)['median'], unit)} {unit}"
  if times is not reference:
    text += f" ({common.paired_ratio(times, reference):.2f}x)"
  return text


def print_machine():
  from albert_tf.export import precision  # pylint: disable=g-import-not-at-top
  settings = ", ".join(f"{name}={os.environ.get(name, 'unset')}"
                       for name in ("TF_ENABLE_ONEDNN_OPTS", "ONEDNN_MAX_CPU_ISA"))
  print(f"CPU: {precision.machine_summary()} ({settings}), {os.cpu_count()} CPUs")
  reason = precision.bf16_slowdown(precision.cpu_info(), precision.onednn_enabled())
  if reason:
    print(f"note: {reason}")


def main(_):
  if FLAGS.child:
    kind, _, argument = FLAGS.child.partition(":")
    if kind == "time":
      time_serving_here(json.loads(argument))
    else:
      trace_kernels_here(argument)
    return
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.WARNING)  # the exports' SavedModel notices
  variants = list(FLAGS.variants)
  if "fp32" not in variants:
    variants.insert(0, "fp32")  # the reference of every ratio
  config = AlbertConfig.from_dict(common.ALBERT_BASE)
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="precision_bench_")
  rows = []  # (label, {variant: [times]}, unit)
  load_before = common.uptime()
  paths = export_variants(work_dir, config, variants)
  serving = time_serving(paths)
  for batch, result in serving.items():
    rows.append((f"serving `token_ids`, batch {batch}, seq {SEQ_LENGTH}", result["times"], "ms"))
  if FLAGS.training:
    rows.insert(0, (f"training step, batch {TRAIN_BATCH}, seq {SEQ_LENGTH}, LAMB",
                    time_training(config, variants), "s"))
  load_after = common.uptime()
  print()
  print_machine()
  print(f"uptime before: {load_before}\nuptime after:  {load_after}")
  print()
  print("| workload | " + " | ".join(variants) + " |")
  print("|---|" + "---|" * len(variants))
  for label, times, unit in rows:
    print(f"| {label} | " + " | ".join(_cell(times[v], times["fp32"], unit)
                                       for v in variants) + " |")
  print()
  print("median per step / request; (x) = paired ratio to fp32, below 1 is faster. "
        "10th-90th percentiles:")
  for label, times, unit in rows:
    ranges = ", ".join(f"{v} {_value(common.summarize(t)['p10'], unit)}-"
                       f"{_value(common.summarize(t)['p90'], unit)} {unit} ({len(t)} rounds)"
                       for v, t in times.items())
    print(f"  {label}: {ranges}")
  for batch, result in serving.items():
    print(f"  max |probability - fp32| at batch {batch}: " +
          ", ".join(f"{v} {d:.4f}" for v, d in result["differences"].items() if v != "fp32"))
  if FLAGS.kernels:
    for variant in ("fp32", "bf16"):
      if variant in paths:
        print(f"\noneDNN primitives of one batch-1 request, {variant} export:")
        for kernel, count in kernel_summary(paths[variant]):
          print(f"  {count:4d} x {kernel}")
  print(f"\nexports in {work_dir}")


if __name__ == "__main__":
  app.run(main)
