"""Latency of the exported classifier SavedModel vs the model garden's exported AlbertEncoder.

ALBERT-base shape (V 30000, E 128, H 768, L 12, 12 heads, I 3072), sequence length 128, random
weights (latency does not depend on them). Every SavedModel is loaded back with
tf.saved_model.load and called through its signature, as a TF Serving process would.

  .venv/bin/python -m bench.speed.serving_latency [--batch_sizes=1,32] [--rounds=60]

Rows:
  ours fp32       exported classifier (--export_precision=fp32, the default), token-id signature
  ours bf16       the same weights exported with --export_precision=bf16, token-id signature
  garden fp32     official.nlp.modeling.networks.AlbertEncoder exported with a token-id
                  signature (encoder + pooler only: no classification head)
  ours * raw      serving_default: raw text in, in-graph SentencePiece + packing
Inputs: full-length sequences (all 128 positions real), and the same with only 32 real tokens
(input_mask 0 after), reported separately.

Timing: the models are called in interleaved rounds (one call of each per round, the order
rotated every round), so drifts in machine speed hit all of them alike. The goal row (batch 1,
128 real tokens) is also timed back to back, as a server running one model sees it: blocks of
10 consecutive calls per model, the models taking turns block by block; interleaving instead
makes every call start with the other models' weights in the shared CPU caches. Reported per model:
median, 10th-90th percentile and min over the rounds; the ratio to the model garden is the
median over rounds of the per-round ratio (paired), with the ratio of medians beside it.
"""

import os
import tempfile
import time

from absl import app
from absl import flags

from bench import common

flags.DEFINE_string("batch_sizes", "1,32", "Comma-separated batch sizes.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("rounds", 60, "Timed rounds at batch 1 (a sixth of them, at least 5, for "
                     "larger batches).")
flags.DEFINE_integer("intra_op_threads", 0, "TF intra-op threads for every model (0: TF's "
                     "default, one per core).")
flags.DEFINE_integer("inter_op_threads", 0, "TF inter-op threads for every model (0: default).")
flags.DEFINE_string("work_dir", None, "Where the SavedModels go (default: a temp dir).")

FLAGS = flags.FLAGS

GOAL_RATIO = 0.7


def export_ours(work_dir, seq_length):
  """One fp32 classifier exported at both serving precisions. Returns {precision: path}."""
  from albert_tf import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.export import export_classifier  # pylint: disable=g-import-not-at-top
  from albert_tf.models.classifier import AlbertClassifier  # pylint: disable=g-import-not-at-top
  spm = common.spm_model(work_dir)
  model = AlbertClassifier(AlbertConfig.from_dict(common.ALBERT_BASE), num_classes=2)
  paths = {}
  for precision in ("fp32", "bf16"):
    # export_classifier writes a TF Serving version below the directory: load that version.
    paths[precision] = export_classifier(model, os.path.join(work_dir, f"ours_{precision}"),
                                         ["0", "1"], seq_length, spm, True, "bench", True,
                                         precision=precision)
  return paths


def time_blocked(calls, rounds, block=10):
  """Like a server running one model: each model is called `block` times back to back (after
  one untimed call), models taking turns block by block. Returns {name: [ms per call]}."""
  names = list(calls)
  times = {name: [] for name in names}
  for b in range(max(1, rounds // block)):
    shift = b % len(names)
    for name in names[shift:] + names[:shift]:
      calls[name]()
      for _ in range(block):
        start = time.perf_counter()
        calls[name]()
        times[name].append((time.perf_counter() - start) * 1000)
  return times


def measure(paths, garden_dir, batch_sizes, seq_length, rounds):
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  ours = {p: tf.saved_model.load(path) for p, path in paths.items()}
  garden_fn = tf.saved_model.load(garden_dir).signatures["serving_default"]
  words = ("the quick brown fox jumps over the lazy dog while rivers flow to the sea and "
           "mountains rise above the clouds").split()
  results = []  # (inputs label, {model: times})
  agreement = []
  for batch in batch_sizes:
    n = rounds if batch == 1 else max(5, rounds // 6)
    for real in (seq_length, 32):
      rng = np.random.default_rng(0)
      ids = rng.integers(5, 4000, size=(batch, seq_length)).astype(np.int32)
      mask = (np.arange(seq_length) < real).astype(np.int32)[None].repeat(batch, 0)
      segments = (np.arange(seq_length) >= real // 2).astype(np.int32)[None] * mask
      ids, mask, segments = (tf.constant(x) for x in (ids * mask, mask, segments))
      calls = {f"ours {p}": (lambda f=m.signatures["token_ids"]: f(
          input_ids=ids, input_mask=mask, segment_ids=segments)) for p, m in ours.items()}
      calls["garden fp32"] = lambda: garden_fn(input_word_ids=ids, input_mask=mask,
                                               input_type_ids=segments)
      results.append((f"batch {batch:>2}, {real:>3} real tokens",
                      common.time_interleaved(calls, n)))
      if batch == 1 and real == seq_length:
        results.append((f"batch {batch:>2}, {real:>3} real, back to back", time_blocked(calls, n)))
      probs = {p: calls[f"ours {p}"]()["probabilities"].numpy() for p in ours}
      agreement.append((float(np.abs(probs["fp32"] - probs["bf16"]).max()),
                        float((probs["fp32"].argmax(-1) == probs["bf16"].argmax(-1)).mean())))
    # Raw text long enough to fill the 128 positions after tokenization.
    text_a = tf.constant([" ".join(words * 4)] * batch)
    text_b = tf.constant([" ".join(reversed(words * 4))] * batch)
    calls = {f"ours {p} raw": (lambda f=m.signatures["serving_default"]: f(
        text_a=text_a, text_b=text_b)) for p, m in ours.items()}
    results.append((f"batch {batch:>2}, raw text (fills {seq_length})",
                    common.time_interleaved(calls, n)))
  return results, agreement


def main(_):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(FLAGS.intra_op_threads)
  tf.config.threading.set_inter_op_parallelism_threads(FLAGS.inter_op_threads)
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="serving_latency_")
  batch_sizes = [int(b) for b in FLAGS.batch_sizes.split(",")]
  paths = export_ours(work_dir, FLAGS.seq_length)
  garden_dir = common.export_model_garden_encoder(work_dir)
  load_before = common.uptime()
  results, agreement = measure(paths, garden_dir, batch_sizes, FLAGS.seq_length, FLAGS.rounds)
  from albert_tf.export.precision import machine_summary  # pylint: disable=g-import-not-at-top
  print(f"\nCPU: {machine_summary()}")
  print(f"uptime before timing: {load_before}")
  print(f"threads: intra_op {FLAGS.intra_op_threads or 'default'}, inter_op "
        f"{FLAGS.inter_op_threads or 'default'}, {os.cpu_count()} CPUs; SavedModels in {work_dir}")
  print(f"{'inputs':<32} {'model':<16} {'rounds':>6} {'median ms':>10} {'p10-p90 ms':>16} "
        f"{'min ms':>8} {'vs garden':>10}")
  goal_lines = []
  for label, times in results:
    garden = times.get("garden fp32")
    for model, ms in times.items():
      s = common.summarize(ms)
      ratio = ""
      if garden is not None and model != "garden fp32":
        paired = common.paired_ratio(ms, garden)
        ratio = f"{paired:.2f}x"
        if label.startswith("batch  1, 128"):
          of_medians = s["median"] / common.summarize(garden)["median"]
          goal_lines.append(
              f"goal (token_ids, batch 1, 128 real tokens, <= {GOAL_RATIO}x the model garden), "
              f"{'back to back' if 'back' in label else 'interleaved'}: "
              f"{model} {paired:.2f}x paired, {of_medians:.2f}x of medians -> "
              f"{'met' if max(paired, of_medians) <= GOAL_RATIO else 'NOT met'}")
      print(f"{label:<32} {model:<16} {len(ms):>6} {s['median']:>10.1f} "
            f"{s['p10']:>7.1f}-{s['p90']:<8.1f} {s['min']:>8.1f} {ratio:>10}")
  for (diff, agree), (label, _) in zip(agreement, [r for r in results if "real tokens" in r[0]]):
    print(f"bf16 vs fp32 export, {label}: max |probability difference| {diff:.4f}, "
          f"same label {agree:.0%}")
  print("\n".join(goal_lines))
  print(f"uptime after timing: {common.uptime()}")


if __name__ == "__main__":
  app.run(main)
