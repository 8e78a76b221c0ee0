"""Benchmark of create_pretraining_data: input MB/s, instances/s and peak memory.

Generates a corpus of at least --corpus_mb MB (docstrings of the installed packages, documents
repeated in a fresh order on each pass), trains a SentencePiece model like the released ones,
then runs the data creation with each --workers count in a fresh process and reports throughput
and peak resident memory (main process and the largest worker). A run on a quarter-size corpus
shows that peak memory does not grow with the corpus size.

  python -m bench.speed.create_data --corpus_mb=50 --workers=1,2

With --official_dir (a folder holding the official `albert/` package: create_pretraining_data.py
and tokenization.py of google-research/albert, which run on TensorFlow 2 through
tensorflow.compat.v1), the official tool runs on the first --official_corpus_mb MB of the same
corpus with the same SentencePiece model and flags, between two runs of ours with 2 workers on
that text, and the throughput ratio is printed. Both sides are timed after their imports.
Nothing of the official tool is in this repository: bring it yourself.

  python -m bench.speed.create_data --corpus_mb=20 --workers=2 --official_dir=/tmp/official
"""

import json
import os
import random
import resource
import subprocess
import sys
import time

from absl import app
from absl import flags

from bench import common

FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", "/tmp/albert_tf_bench_create_data", "Corpus, model and outputs "
                    "(reused across runs).")
flags.DEFINE_integer("corpus_mb", 50, "Size of the generated corpus in MB.")
flags.DEFINE_integer("vocab_size", 30000, "SentencePiece vocabulary size.")
flags.DEFINE_integer("max_seq_length", 128, "As the official flag.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "As the official flag.")
flags.DEFINE_integer("dupe_factor", 1, "As the official flag (1: measures the text path).")
flags.DEFINE_string("workers", "1,2", "Comma-separated --num_workers values to run.")
flags.DEFINE_bool("memory_check", True, "Also run 1 worker on a quarter-size corpus.")
flags.DEFINE_string("official_dir", None, "A folder holding the official albert/ package; "
                    "also time the official create_pretraining_data.py on the same text.")
flags.DEFINE_integer("official_corpus_mb", 5, "MB of the corpus given to the official tool "
                     "(it holds every instance in memory and runs at ~0.2 MB/s).")
flags.DEFINE_string("single_run", None, "Internal: JSON arguments of one measured run.")


def _vm_kb(field):
  """VmHWM (peak) / VmRSS of this process in kB: unlike ru_maxrss, reset by exec."""
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(field + ":"):
        return int(line.split()[1])
  return 0


def _load():
  return os.getloadavg()


def make_corpus(work_dir, corpus_mb):
  """Docstring documents, repeated in a new order each pass, up to corpus_mb MB. Cached."""
  from albert_tf.tools.docstring_corpus import build_docstring_corpus  # pylint: disable=g-import-not-at-top
  base = os.path.join(work_dir, "docstrings.txt")
  if not os.path.exists(base):
    build_docstring_corpus(base, max_bytes=20_000_000)
  path = os.path.join(work_dir, f"corpus_{corpus_mb}mb.txt")
  if os.path.exists(path):
    return base, path
  with open(base, encoding="utf-8") as f:
    documents = [d for d in f.read().split("\n\n") if d.strip()]
  target = corpus_mb * 1_000_000
  written = 0
  rng = random.Random(0)
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    while written < target:
      order = list(range(len(documents)))
      rng.shuffle(order)
      for i in order:
        block = documents[i] + "\n\n"
        f.write(block)
        written += len(block.encode("utf-8"))
        if written >= target:
          break
  os.replace(path + ".tmp", path)
  return base, path


def make_model(work_dir, base_corpus, vocab_size):
  from albert_tf.text.sentencepiece_training import train_sentencepiece  # pylint: disable=g-import-not-at-top
  prefix = os.path.join(work_dir, f"spm_{vocab_size}")
  if not os.path.exists(prefix + ".model"):
    train_sentencepiece([base_corpus], prefix, vocab_size=vocab_size,
                        input_sentence_size=300_000, num_threads=2)
  return prefix + ".model"


def single_run(args):
  """Runs create_pretraining_data once in this process and prints one JSON line."""
  from albert_tf.data.pretraining import creation as pretraining_data_creation  # pylint: disable=g-import-not-at-top
  from albert_tf.data.pretraining import instances as pretraining_instances  # pylint: disable=g-import-not-at-top
  import tensorflow  # pylint: disable=g-import-not-at-top,unused-import
  usage = resource.getrusage(resource.RUSAGE_SELF)
  args["cpu_before"] = usage.ru_utime + usage.ru_stime  # imports are not part of the run
  rss_after_imports = _vm_kb("VmRSS") / 1024
  options = pretraining_instances.InstanceOptions(
      max_seq_length=args["max_seq_length"],
      max_predictions_per_seq=args["max_predictions_per_seq"], dupe_factor=args["dupe_factor"])
  report = pretraining_data_creation.create_pretraining_data(
      args["input_file"], args["output_file"], spm_model_file=args["spm_model_file"],
      options=options, num_workers=args["num_workers"], show_progress=True)
  me = resource.getrusage(resource.RUSAGE_SELF)
  children = resource.getrusage(resource.RUSAGE_CHILDREN)
  print(json.dumps({"report": {k: v for k, v in report.items() if not isinstance(v, dict)},
                    "peak_rss_main_mb": _vm_kb("VmHWM") / 1024,
                    "rss_after_imports_mb": rss_after_imports,
                    "peak_worker_private_mb": report.get("peak_worker_private_mb", 0.0),
                    "cpu_main": me.ru_utime + me.ru_stime - args["cpu_before"],
                    "cpu_workers": children.ru_utime + children.ru_stime}))


def measure(corpus, model, num_workers, output):
  args = dict(input_file=corpus, output_file=output, spm_model_file=model,
              num_workers=num_workers, max_seq_length=FLAGS.max_seq_length,
              max_predictions_per_seq=FLAGS.max_predictions_per_seq,
              dupe_factor=FLAGS.dupe_factor)
  load_before = _load()
  start = time.time()
  env = common.child_env(TF_CPP_MIN_LOG_LEVEL="3")
  done = subprocess.run(common.module_command(__spec__.name, f"--single_run={json.dumps(args)}"),
                        capture_output=True, text=True, env=env, check=False)
  if done.returncode != 0:
    raise RuntimeError(f"benchmark run failed:\n{done.stderr[-2000:]}")
  result = json.loads(done.stdout.strip().splitlines()[-1])
  result["process_seconds"] = time.time() - start
  result["load_before"] = load_before
  result["load_after"] = _load()
  os.remove(output)
  return result


# Runs in a fresh interpreter: the official module defines absl flags that clash with ours.
_OFFICIAL_RUNNER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from absl import flags
from albert import create_pretraining_data as official
flags.FLAGS(["create_pretraining_data.py"] + sys.argv[2:])
official.tf.logging.set_verbosity(official.tf.logging.ERROR)
official.tf.logging.set_verbosity = lambda level: None  # main() would turn INFO back on
start = time.time()
official.main(None)
print(json.dumps({"seconds": time.time() - start}))
"""


def measure_official(corpus, model, output):
  """The official tool on `corpus`: seconds after imports (one JSON line from the runner)."""
  argv = [f"--input_file={corpus}", f"--output_file={output}", f"--spm_model_file={model}",
          f"--vocab_file={model[:-len('.model')]}.vocab", "--do_lower_case",
          f"--max_seq_length={FLAGS.max_seq_length}",
          f"--max_predictions_per_seq={FLAGS.max_predictions_per_seq}",
          f"--dupe_factor={FLAGS.dupe_factor}", "--random_seed=12345"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  done = subprocess.run([sys.executable, "-c", _OFFICIAL_RUNNER, FLAGS.official_dir] + argv,
                        capture_output=True, text=True, env=env, check=False)
  if done.returncode != 0:
    raise RuntimeError(f"the official tool failed:\n{done.stderr[-2000:]}")
  os.remove(output)
  return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def compare_with_official(corpus, model):
  """Ours (2 workers) before and after the official tool on the same first MB of `corpus`."""
  head = os.path.join(FLAGS.work_dir, f"corpus_head_{FLAGS.official_corpus_mb}mb.txt")
  with open(corpus, "rb") as source, open(head, "wb") as target:
    target.write(source.read(FLAGS.official_corpus_mb * 1_000_000))
  size_mb = os.path.getsize(head) / 1e6
  output = os.path.join(FLAGS.work_dir, "out.tfrecord")
  ours_before = measure(head, model, 2, output)["report"]["mb_per_second"]
  official_seconds = measure_official(head, model, output)
  ours_after = measure(head, model, 2, output)["report"]["mb_per_second"]
  official = size_mb / official_seconds
  ours = (ours_before + ours_after) / 2
  print(f"same {size_mb:.1f} MB: official tool {official:.3f} MB/s ({official_seconds:.1f} s); "
        f"ours, 2 workers, before/after it {ours_before:.2f}/{ours_after:.2f} MB/s: "
        f"**{ours / official:.1f}x** the official throughput (load "
        f"{' '.join(f'{x:.1f}' for x in _load())})", flush=True)


def main(argv):
  del argv
  if FLAGS.single_run:
    single_run(json.loads(FLAGS.single_run))
    return
  os.makedirs(FLAGS.work_dir, exist_ok=True)
  t = time.time()
  base, corpus = make_corpus(FLAGS.work_dir, FLAGS.corpus_mb)
  model = make_model(FLAGS.work_dir, base, FLAGS.vocab_size)
  print(f"CPU: {common.cpu_model()}")
  print(f"corpus {os.path.getsize(corpus) / 1e6:.1f} MB, model {model} "
        f"(prepared in {time.time() - t:.0f}s)")
  runs = [(corpus, int(w)) for w in FLAGS.workers.split(",")]
  if FLAGS.memory_check:
    _, small = make_corpus(FLAGS.work_dir, max(1, FLAGS.corpus_mb // 4))
    runs.append((small, 1))
  print(f"max_seq_length={FLAGS.max_seq_length} max_predictions_per_seq="
        f"{FLAGS.max_predictions_per_seq} dupe_factor={FLAGS.dupe_factor}")
  print(f"{'corpus MB':>9} {'workers':>7} {'MB/s':>6} {'inst/s':>8} {'instances':>10} "
        f"{'seconds':>8} {'CPU s main+workers':>18} {'MB/CPU-s':>8} "
        f"{'main peak RSS MB (imports)':>26} {'worker private MB':>17}  "
        f"load(1,5,15) before->after")
  for path, workers in runs:
    r = measure(path, model, workers, os.path.join(FLAGS.work_dir, "out.tfrecord"))
    rep = r["report"]
    load = " ".join(f"{x:.1f}" for x in r["load_before"]) + " -> " + " ".join(
        f"{x:.1f}" for x in r["load_after"])
    print(f"{rep['input_bytes'] / 1e6:9.1f} {workers:7d} {rep['mb_per_second']:6.2f} "
          f"{rep['instances_per_second']:8.0f} {rep['instances']:10d} {rep['seconds']:8.1f} "
          f"{r['cpu_main']:8.1f} + {r['cpu_workers']:7.1f} "
          f"{rep['input_bytes'] / 1e6 / (r['cpu_main'] + r['cpu_workers']):8.2f} "
          f"{r['peak_rss_main_mb']:18.0f} ({r['rss_after_imports_mb']:4.0f}) "
          f"{r['peak_worker_private_mb']:17.0f}  {load}", flush=True)
  if FLAGS.official_dir:
    compare_with_official(corpus, model)


if __name__ == "__main__":
  app.run(main)
