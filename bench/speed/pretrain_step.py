"""Times one pretraining step of ALBERT-base (seq 128, 20 predictions, batch 8) on CPU.

Ours: the shared Trainer's train loop (AlbertPretrainer + MLM/SOP loss + global-norm clip +
official LAMB). Reference: the model garden's AlbertEncoder + BertPretrainerV2 (SOP as a
ClassificationHead) + its LAMB, in a tf.function (graph mode; --model_garden_jit adds XLA).
Rounds of the two are interleaved in one process so CPU contention hits both alike.

Prints per-step time, examples/s, the speed ratio (model garden time / ours), and the fraction
of the measured fp32 matmul peak: model FLOPs per step (3 x forward matmul FLOPs) / time / peak.
Run: .venv/bin/python -m bench.speed.pretrain_step [--rounds 4 --steps_per_round 3]
"""

import os
import statistics
import time

from absl import app
from absl import flags
import tensorflow as tf

from albert_tf.config import AlbertConfig
from bench import common

flags.DEFINE_integer("batch_size", 8, "Examples per step.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("num_predictions", 20, "Masked positions per sequence.")
flags.DEFINE_integer("rounds", 4, "Interleaved timing rounds.")
flags.DEFINE_integer("steps_per_round", 3, "Steps per round and model.")
flags.DEFINE_bool("jit_compile", False, "XLA for our step.")
flags.DEFINE_bool("model_garden_jit", False, "XLA for the model garden step.")
FLAGS = flags.FLAGS


def forward_matmul_flops(batch, seq, preds, c):
  """Multiply-add FLOPs (x2) of the forward pass: encoder, pooler, gathered MLM head, SOP."""
  h, e, i, v, layers = (c["hidden_size"], c["embedding_size"], c["intermediate_size"],
                        c["vocab_size"], c["num_hidden_layers"])
  per_layer = 2 * seq * h * h * 4 + 2 * seq * seq * h * 2 + 2 * seq * h * i * 2
  per_example = (2 * seq * e * h + layers * per_layer + 2 * h * h + 2 * h * 2
                 + 2 * preds * h * e + 2 * preds * e * v)
  return batch * per_example


def measure_matmul_peak(n=2048, repeats=10):
  a = tf.random.normal([n, n])
  b = tf.random.normal([n, n])

  @tf.function
  def mm(a, b):
    return tf.reduce_sum(tf.matmul(a, b))
  mm(a, b).numpy()
  best = float("inf")
  for _ in range(repeats):
    t = time.perf_counter()
    mm(a, b).numpy()
    best = min(best, time.perf_counter() - t)
  return 2.0 * n ** 3 / best


def build_ours(config, features, labels):
  """(run(steps) -> loss, parameter count) of our Trainer's train loop."""
  run, trainer = common.build_our_pretraining_step(
      config, features, labels, FLAGS.batch_size, FLAGS.seq_length, FLAGS.num_predictions,
      jit_compile=FLAGS.jit_compile)
  return run, trainer.model.count_params()


def build_model_garden(config, features, labels):
  """(run(steps) -> loss, encoder parameter count) of the model garden's step, run `steps`
  times in one tf.function loop as our Trainer's loop does."""
  step, inputs, encoder = common.build_model_garden_step(config, features, labels,
                                                         jit_compile=FLAGS.model_garden_jit)

  @tf.function
  def loop(inputs, labels, steps):
    loss = tf.constant(0.0)
    for _ in tf.range(steps):
      loss = step(inputs, labels)
    return loss

  def run(steps):
    return float(loop(inputs, labels, tf.constant(steps)).numpy())
  return run, encoder.count_params()


def main(argv):
  del argv
  config = AlbertConfig(**common.ALBERT_BASE)
  features, labels = common.synthetic_pretraining_batch(
      FLAGS.batch_size, FLAGS.seq_length, FLAGS.num_predictions, config.vocab_size)
  load_before = os.getloadavg()
  peak = measure_matmul_peak()
  ours, our_params = build_ours(config, features, labels)
  garden, garden_params = build_model_garden(config, features, labels)
  for run in (ours, garden):   # trace + warm up
    run(1)
    run(1)
  times = {"ours": [], "model_garden": []}
  for _ in range(FLAGS.rounds):
    for name, run in (("ours", ours), ("model_garden", garden)):
      t = time.perf_counter()
      run(FLAGS.steps_per_round)
      times[name].append((time.perf_counter() - t) / FLAGS.steps_per_round)
  peak_after = measure_matmul_peak()
  load_after = os.getloadavg()
  flops = 3 * forward_matmul_flops(FLAGS.batch_size, FLAGS.seq_length, FLAGS.num_predictions,
                                   common.ALBERT_BASE)
  peak = max(peak, peak_after)
  print(f"ALBERT-base train step: batch {FLAGS.batch_size}, seq {FLAGS.seq_length}, "
        f"{FLAGS.num_predictions} predictions, CPU ({os.cpu_count()} cores)")
  print(f"params: ours {our_params:,} (full pretrainer); model garden encoder {garden_params:,}")
  print(f"measured fp32 matmul peak: {peak / 1e9:.1f} GFLOP/s; model FLOPs/step "
        f"{flops / 1e9:.1f} G")
  result = {}
  for name, values in times.items():
    t = statistics.median(values)
    result[name] = t
    print(f"{name:13s} median {t * 1000:8.1f} ms/step (min {min(values) * 1000:.1f}) | "
          f"{FLAGS.batch_size / t:6.2f} examples/s | {flops / t / peak * 100:5.1f}% of peak"
          f"{' (XLA)' if (name == 'ours' and FLAGS.jit_compile) or (name == 'model_garden' and FLAGS.model_garden_jit) else ''}")
  print(f"speed ratio (model garden time / ours): {result['model_garden'] / result['ours']:.2f}x")
  print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
        "(other work shares this CPU)")


if __name__ == "__main__":
  app.run(main)
