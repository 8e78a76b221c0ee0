"""create_pretraining_data: the Apache Beam DirectRunner path against the local tool, side by side.

Builds (once) a ~20 MB corpus with `python -m albert_tf.cli.build_corpus` and a SentencePiece
model on it, then runs the real script in a fresh process per variant, interleaved round by round
so both paths share the machine's load:
  local --num_workers=1 / 2, and --runner=DirectRunner in-process (in_memory) and with
  --direct_running_mode=multi_processing --direct_num_workers=2,
each at --dupe_factor 1 and --dupe_factor 4 (the per-pass cost, to extrapolate to 40), and
checks that every Beam output is byte-identical to the local one. Writes a JSON with MB/s per
variant (wall time of the whole command, imports included) and per CPU second (the per-core
cost, which the machine's load moves far less), the CPU model and the load average, and a
capacity plan from the measured per-worker rate (see `capacity_plan`).

  python -m bench.speed.beam_data --output_json=bench/speed/results/beam_data.json
"""

import hashlib
import json
import os
import platform
import resource
import subprocess
import sys
import time

from absl import app
from absl import flags

from bench import common

FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", "/tmp/albert_tf_bench_beam_data", "Corpus, model, outputs.")
flags.DEFINE_integer("corpus_mb", 20, "Size of the corpus in MB.")
flags.DEFINE_integer("vocab_size", 8000, "SentencePiece vocabulary size.")
flags.DEFINE_integer("max_seq_length", 128, "As the official flag.")
flags.DEFINE_string("dupe_factors", "1,4", "Comma-separated --dupe_factor values.")
flags.DEFINE_integer("rounds", 1, "Rounds of all variants (the best round is reported).")
flags.DEFINE_integer("output_shards", 4, "--output_shards of every run.")
flags.DEFINE_string("output_json", None, "Where to write the results.")

VARIANTS = {
    "local, 1 worker": ["--num_workers=1"],
    "local, 2 workers": ["--num_workers=2"],
    "beam DirectRunner in_memory": ["--runner=DirectRunner"],
    "beam DirectRunner multi_processing x2": [
        "--runner=DirectRunner", "--direct_running_mode=multi_processing",
        "--direct_num_workers=2"],
}


def _run(args, **kwargs):
  env = common.child_env(TF_CPP_MIN_LOG_LEVEL="2")
  return subprocess.run([sys.executable] + args, check=True, env=env, capture_output=True,
                        text=True, **kwargs)


def _prepare(work):
  corpus = os.path.join(work, "corpus.txt")
  model = os.path.join(work, "spm", "bench.model")
  if not os.path.exists(corpus):
    _run(["-m", "albert_tf.cli.build_corpus", f"--output_file={corpus}",
          f"--max_mb={FLAGS.corpus_mb}"])
  if not os.path.exists(model):
    lower = os.path.join(work, "spm_input.txt")
    with open(corpus, encoding="utf-8") as f, open(lower, "w", encoding="utf-8") as g:
      for line in f:
        g.write(line.lower())
    _run(["-m", "albert_tf.cli.train_spm", f"--input_file={lower}",
          f"--model_prefix={model[:-len('.model')]}", f"--vocab_size={FLAGS.vocab_size}"])
  return corpus, model


def _digest(prefix, shards):
  h = hashlib.sha256()
  for k in range(shards):
    with open(f"{prefix}-{k:05d}-of-{shards:05d}", "rb") as f:
      h.update(f.read())
  return h.hexdigest()


def capacity_plan(per_worker_mb_s_by_dupe):
  """Dataflow workers and hours for 16 GB at dupe factor 40 and for C4 (~750 GB), from the time
  per MB at two dupe factors (a + b * dupe seconds per MB for one worker: tokenizing once, pairs
  and masks every pass), one vCPU per worker."""
  (d1, r1), (d2, r2) = sorted(per_worker_mb_s_by_dupe.items())[:2]
  b = (1 / r2 - 1 / r1) / (d2 - d1)
  a = 1 / r1 - b * d1
  plan = {"seconds_per_mb_per_worker": {"fixed": a, "per_pass": b}}
  for name, mb, dupe in (("16 GB at dupe 40", 16_000, 40), ("C4 ~750 GB at dupe 40", 750_000, 40),
                         ("C4 ~750 GB at dupe 1", 750_000, 1)):
    worker_hours = mb * (a + b * dupe) / 3600
    plan[name] = {
        "worker_hours": worker_hours,
        "hours_with": {str(w): worker_hours / w for w in (100, 500, 1000)},
    }
  return plan


def main(argv):
  del argv
  work = FLAGS.work_dir
  os.makedirs(work, exist_ok=True)
  corpus, model = _prepare(work)
  corpus_mb = os.path.getsize(corpus) / 1e6
  dupes = [int(d) for d in FLAGS.dupe_factors.split(",")]
  times, cpu_times, digests = {}, {}, {}
  load_before = os.getloadavg()
  for _ in range(FLAGS.rounds):
    for dupe in dupes:
      for name, extra in VARIANTS.items():
        prefix = os.path.join(work, "out", f"{abs(hash(name))}_{dupe}", "train")
        started = time.time()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        _run([os.path.join(common.REPO, "create_pretraining_data.py"), f"--input_file={corpus}",
              f"--output_file={prefix}", f"--output_shards={FLAGS.output_shards}",
              f"--spm_model_file={model}", f"--max_seq_length={FLAGS.max_seq_length}",
              f"--dupe_factor={dupe}", "--progress=false"] + extra)
        seconds = time.time() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        key = f"{name}, dupe {dupe}"
        times[key] = min(times.get(key, float("inf")), seconds)
        cpu_times[key] = min(cpu_times.get(key, float("inf")), cpu)
        digests[key] = _digest(prefix, FLAGS.output_shards)
        print(f"{key}: {seconds:.1f}s ({corpus_mb / seconds:.2f} MB/s), CPU {cpu:.1f}s, load "
              f"{os.getloadavg()[0]:.1f}", flush=True)
  same = {dupe: len({digests[f"{n}, dupe {dupe}"] for n in VARIANTS}) == 1 for dupe in dupes}
  results = {
      "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                   if l.startswith("model name")), platform.processor()),
      "cores": os.cpu_count(),
      "load_average_before": load_before,
      "load_average_after": os.getloadavg(),
      "corpus_mb": corpus_mb,
      "max_seq_length": FLAGS.max_seq_length,
      "vocab_size": FLAGS.vocab_size,
      "seconds": times,
      "mb_per_second": {k: corpus_mb / v for k, v in times.items()},
      # CPU seconds of the command and the processes it started and reaped (the local tool's
      # and the DirectRunner's workers): the total cost, far less sensitive to the machine's
      # load than wall time.
      "cpu_seconds": cpu_times,
      "mb_per_cpu_second": {k: corpus_mb / v for k, v in cpu_times.items()},
      "byte_identical_across_variants": same,
  }
  # One Beam worker's rate: the in-process DirectRunner's MB per CPU second (one Python process,
  # as one Dataflow worker harness per vCPU).
  per_worker = {d: corpus_mb / cpu_times[f"beam DirectRunner in_memory, dupe {d}"]
                for d in dupes}
  if len(dupes) >= 2:
    results["capacity_plan_dataflow"] = capacity_plan(per_worker)
  text = json.dumps(results, indent=2)
  print(text)
  if FLAGS.output_json:
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output_json)), exist_ok=True)
    with open(FLAGS.output_json, "w", encoding="utf-8") as f:
      f.write(text + "\n")


if __name__ == "__main__":
  app.run(main)
