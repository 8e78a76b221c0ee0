"""Early exit compiled by XLA against uncompiled: the loop as `--xla_whole_step` and every TPU
step run it (the fixed-shape loop, models/early_exit.static_shapes()) against the same model
traced without XLA (the shrinking loop), in process (no export), at batch 1 and 32.

Rows: `full depth` (a plain classifier), `exit at layer k` (internal heads that answer the same
class at every layer: every example leaves at layer --xla_exit_layer) and, at batch > 1,
`mixed batch` (half the rows leave at layer 2, half run all 12: a compiled batch runs as long as
its slowest example). The answers of both forms are compared (exit layers equal, the largest
probability difference). --model_size=small (H 256, 4 heads, I 1024, L 12) fits a shared CPU.

Run: .venv/bin/python -m bench.speed.early_exit_xla [--model_size=small --rounds 12]
Writes bench/speed/results/early_exit_xla.json (machine, date, load before and after).
"""

from albert_tf.common import console  # first: quiets TensorFlow before anything imports it
console.quiet_startup()

import json  # pylint: disable=g-import-not-at-top,g-bad-import-order
import os

from absl import app
from absl import flags

from bench import common
from bench.speed import early_exit as early_exit_bench

flags.DEFINE_enum("model_size", "base", ["base", "small"], "ALBERT-base, or H 256.")
flags.DEFINE_integer("xla_exit_layer", 4, "The forced exit layer timed.")
flags.DEFINE_string("batch_sizes", "1,32", "Comma-separated batch sizes.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("rounds", 30, "Timed rounds at batch 1 (a sixth, at least 4, at larger "
                     "batches).")
flags.DEFINE_string("output_json", os.path.join(early_exit_bench.RESULTS_DIR,
                                                "early_exit_xla.json"), "Results file.")
FLAGS = flags.FLAGS


def _models(config, exit_layer, seq):
  """(plain classifier, early-exit copy with constant heads at patience exit_layer - 1, copy
  with mixed heads at patience 1), sharing the plain one's weights."""
  from albert_tf import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.checkpoints import official_names  # pylint: disable=g-import-not-at-top
  from albert_tf.models.classifier import AlbertClassifier  # pylint: disable=g-import-not-at-top
  config = AlbertConfig.from_dict(config)
  plain = AlbertClassifier(config, 2)
  copies = []
  for patience in (exit_layer - 1, 1):
    model = AlbertClassifier(config, 2, early_exit="patience", patience=patience)
    named = official_names.model_variable_map(model)
    for name, variable in official_names.model_variable_map(plain).items():
      named[name].assign(variable)
    copies.append(model)
  early_exit_bench.set_heads(copies[0], constant=True)
  early_exit_bench.set_mixed_heads(copies[1], seq)
  return plain, copies[0], copies[1]


def measure():
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.models.early_exit import static_shapes  # pylint: disable=g-import-not-at-top
  config = dict(common.ALBERT_BASE)
  if FLAGS.model_size == "small":
    config.update(hidden_size=256, num_attention_heads=4, intermediate_size=1024)
  seq, exit_layer = FLAGS.seq_length, FLAGS.xla_exit_layer
  plain, constant, mixed = _models(config, exit_layer, seq)
  models = {"full depth": plain, f"exit at layer {exit_layer}": constant, "mixed batch": mixed}

  def compiled(model):
    def run(features):
      with static_shapes():
        return model(features, training=False)
    return tf.function(run, jit_compile=True)

  fns = {}
  for name, model in models.items():
    fns[name] = tf.function(lambda f, m=model: m(f, training=False))
    fns[f"{name} (XLA)"] = compiled(model)
  results = {"rows": [], "machine": common.machine(), "seq_length": seq, "config": config,
             "answers": {}}
  for batch in [int(b) for b in FLAGS.batch_sizes.split(",")]:
    inputs = {k: tf.constant(v) for k, v in early_exit_bench.mixed_inputs(batch, seq).items()}
    calls = {name: (lambda f=fn: f(inputs)) for name, fn in fns.items()
             if batch > 1 or not name.startswith("mixed")}
    outputs = {name: {k: v.numpy() for k, v in call().items()} for name, call in calls.items()}
    for name in models:
      if name in calls:
        a, b = outputs[name], outputs[f"{name} (XLA)"]
        results["answers"][f"{batch}/{name}"] = dict(
            exit_layers_equal=bool(np.array_equal(a.get("exit_layer"), b.get("exit_layer"))),
            max_probability_difference=float(np.abs(a["probabilities"] -
                                                    b["probabilities"]).max()))
    rounds = FLAGS.rounds if batch == 1 else max(4, FLAGS.rounds // 6)
    times = common.time_interleaved(calls, rounds, warmup=2)
    results["rows"] += early_exit_bench.latency_rows(times, batch, rounds, outputs)
    for row in results["rows"]:
      if row["batch"] == batch and row["model"].endswith(" (XLA)"):
        uncompiled = row["model"][:-len(" (XLA)")]
        row["vs_uncompiled"] = common.paired_ratio(times[row["model"]], times[uncompiled])
  results["uptime_after"] = common.uptime()
  return results


def main(_):
  results = measure()
  print(f"CPU: {results['machine']['machine']}; {results['machine']['uptime_before']}")
  for r in results["rows"]:
    print(f"{r['batch']:>5} {r['model']:<28} {r['median']:>10.1f} ms  speedup "
          f"{r['speedup']:.2f}  vs uncompiled {r.get('vs_uncompiled', 1.0):.2f}  exit layer "
          f"{r.get('mean_exit_layer', 12):.2f}")
  print(json.dumps(results["answers"], indent=1))
  common.write_results(FLAGS.output_json, results)


if __name__ == "__main__":
  app.run(main)
