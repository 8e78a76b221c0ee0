"""Batch-1 latency of the TFLite export (float32 and dynamic-range int8) vs the SavedModel.

ALBERT-base shape (V 30000, E 128, H 768, L 12, 12 heads, I 3072), a 2-class classifier with
random weights (latency does not depend on them), sequence length 128.

  .venv/bin/python -m bench.speed.tflite_latency [--rounds=40] [--tflite_threads=0]

Rows:
  savedmodel       export_classifier (fp32) loaded with tf.saved_model.load, `token_ids`
                   signature (it drops trailing all-padding positions first)
  tflite fp32      write_tflite(quantize="none"), ai_edge_litert Interpreter signature runner
  tflite dynamic   write_tflite(quantize="dynamic"): int8 weights, float activations
Inputs: all 128 positions real, and only 32 real tokens (mask 0 after): the TFLite file has a
fixed shape and computes all 128 positions either way.

Timing: interleaved rounds (one call of each model per round, the order rotated every round),
so drifts in machine speed hit all alike; per model the median, 10th-90th percentile and min;
ratios are the median over rounds of the per-round ratio to the SavedModel (paired).
"""

import os
import tempfile
import time

from absl import app
from absl import flags
from absl import logging

from bench import common

flags.DEFINE_integer("rounds", 40, "Timed rounds per input kind.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("tflite_threads", 0, "Interpreter threads (0: one per CPU, as TF).")
flags.DEFINE_string("work_dir", None, "Where the exports go (default: a temp dir).")
FLAGS = flags.FLAGS


def export_all(work_dir, seq_length):
  """The SavedModel and both TFLite files of one model. Returns (savedmodel dir, {name: path})."""
  from albert_tf import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.export import export_classifier  # pylint: disable=g-import-not-at-top
  from albert_tf.export.tflite import write_tflite  # pylint: disable=g-import-not-at-top
  from albert_tf.models.classifier import AlbertClassifier  # pylint: disable=g-import-not-at-top
  model = AlbertClassifier(AlbertConfig.from_dict(common.ALBERT_BASE), num_classes=2)
  saved = export_classifier(model, os.path.join(work_dir, "savedmodel"), ["0", "1"], seq_length)
  files = {}
  for quantize in ("none", "dynamic"):
    name = "tflite fp32" if quantize == "none" else "tflite dynamic"
    start = time.time()
    files[name] = write_tflite(model, os.path.join(work_dir, f"albert_{quantize}.tflite"),
                               seq_length, quantize=quantize)
    print(f"{name}: {os.path.getsize(files[name]) / 2**20:.1f} MiB, converted in "
          f"{time.time() - start:.0f} s")
  return saved, files


def main(_):
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from ai_edge_litert.interpreter import Interpreter  # pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.WARNING)  # no per-function export chatter
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="tflite_latency_")
  seq = FLAGS.seq_length
  saved_dir, files = export_all(work_dir, seq)
  signature = tf.saved_model.load(saved_dir).signatures["token_ids"]
  threads = FLAGS.tflite_threads or os.cpu_count()
  runners = {name: Interpreter(model_path=path, num_threads=threads).get_signature_runner()
             for name, path in files.items()}
  print(f"uptime before timing: {common.uptime()}; {os.cpu_count()} CPUs, interpreter threads "
        f"{threads}; exports in {work_dir}")
  print(f"{'inputs':<22} {'model':<16} {'median ms':>10} {'p10-p90 ms':>16} {'min ms':>8} "
        f"{'vs savedmodel':>14}")
  for real in (seq, 32):
    rng = np.random.default_rng(0)
    mask = (np.arange(seq) < real).astype(np.int32)[None]
    ids = rng.integers(5, 30000, size=(1, seq)).astype(np.int32) * mask
    segments = (np.arange(seq) >= real // 2).astype(np.int32)[None] * mask
    feed = dict(input_ids=ids, input_mask=mask, segment_ids=segments)
    tensors = {k: tf.constant(v) for k, v in feed.items()}
    calls = {"savedmodel": lambda: signature(**tensors)}
    for name, runner in runners.items():
      calls[name] = lambda r=runner: r(**feed)
    times = common.time_interleaved(calls, FLAGS.rounds)
    reference = calls["savedmodel"]()["probabilities"].numpy()
    for name, ms in times.items():
      s = common.summarize(ms)
      ratio = common.paired_ratio(ms, times["savedmodel"])
      print(f"batch 1, {real:>3} real tokens {name:<16} {s['median']:>10.1f} "
            f"{s['p10']:>7.1f}-{s['p90']:<8.1f} {s['min']:>8.1f} {ratio:>13.2f}x")
    for name in runners:
      diff = np.abs(calls[name]()["probabilities"] - reference).max()
      print(f"  {name}: max |probability - savedmodel| = {diff:.2e}")
  print(f"uptime after timing: {common.uptime()}")


if __name__ == "__main__":
  app.run(main)
