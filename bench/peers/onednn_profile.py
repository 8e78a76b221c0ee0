"""Where our time goes: one `token_ids` request of an exported classifier (ALBERT-base, seq 128,
every position real, batch 1), or one pretraining step of the bench's (batch 8, MLM + SOP, LAMB),
under ONEDNN_VERBOSE=1: its oneDNN primitives' time summed by kind (matmul, eltwise, softmax,
layer norm, reorder, ...) against the wall time; the rest runs outside oneDNN (TensorFlow's own
kernels: the optimizer update, gathers, casts; and the executor).

  .venv/bin/python -m bench.peers.onednn_profile [--export_dir=<a classifier export>]
      [--precision=fp32]
  .venv/bin/python -m bench.peers.onednn_profile --what=train [--precision=bf16] [--size=large]
"""

import collections
import subprocess
import tempfile
import time

from absl import app
from absl import flags

from bench import common

FLAGS = flags.FLAGS
flags.DEFINE_string("export_dir", None, "An exported classifier version directory (default: "
                    "export a random ALBERT-base one).")
flags.DEFINE_enum("precision", "fp32", ["fp32", "bf16"], "Export precision when exporting; "
                  "the Trainer's --precision with --what=train.")
flags.DEFINE_enum("what", "serving", ["serving", "train"], "A serving request or a train step.")
flags.DEFINE_enum("size", "base", ["base", "large"], "With --what=train: the model size "
                  "(bench/peers/sizes.py's v2 configs; the bench's train step runs at large).")
flags.DEFINE_integer("requests", 5, "Profiled requests (after three warm-up ones).")
flags.DEFINE_bool("child", False, "Internal: run the requests in this (traced) process.")


def run_requests(export_dir, requests):
  """Child: warm-up, then `requests` timed requests between markers; prints the wall times."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  function = tf.saved_model.load(export_dir).signatures["token_ids"]
  ids = np.random.default_rng(0).integers(5, 30000, size=(1, 128)).astype(np.int32)
  request = {"input_ids": tf.constant(ids), "input_mask": tf.ones_like(ids),
             "segment_ids": tf.constant((np.arange(128) >= 64).astype(np.int32)[None])}
  for _ in range(3):
    function(**request)
  walls = []
  print("=== requests ===", flush=True)
  for _ in range(requests):
    start = time.perf_counter()
    function(**request)
    walls.append((time.perf_counter() - start) * 1000)
  print("=== end ===", flush=True)
  print("walls " + " ".join(f"{w:.3f}" for w in walls), flush=True)


def run_train_steps(precision, requests, size="base"):
  """Child: our pretraining step (bench/common.py's, ALBERT-`size`, batch 8), two warm-up steps,
  then `requests` timed steps between markers; prints the wall times."""
  from albert_tf import AlbertConfig  # pylint: disable=g-import-not-at-top
  from bench.peers import sizes  # pylint: disable=g-import-not-at-top
  features, labels = common.synthetic_pretraining_batch(8, 128, 20, 30000)
  run, _ = common.build_our_pretraining_step(AlbertConfig.from_dict(sizes.SIZES[size]),
                                             features, labels, 8, 128, 20, precision=precision)
  for _ in range(2):
    run(1)
  walls = []
  print("=== requests ===", flush=True)
  for _ in range(requests):
    start = time.perf_counter()
    run(1)
    walls.append((time.perf_counter() - start) * 1000)
  print("=== end ===", flush=True)
  print("walls " + " ".join(f"{w:.3f}" for w in walls), flush=True)


def summarize(output, requests):
  """(ms per request by primitive kind, wall ms per request) from the child's output."""
  traced = output.split("=== requests ===", 1)[1].split("=== end ===", 1)[0]
  by_kind = collections.Counter()
  for line in traced.splitlines():
    fields = line.split(",")
    # onednn_verbose,<time stamp>?,primitive,exec,cpu,<kind>,<impl>,...,<ms>
    if "primitive" in fields and "exec" in fields:
      at = fields.index("exec")
      try:
        by_kind[f"{fields[at + 2]} ({fields[at + 3]})"] += float(fields[-1]) / requests
      except (ValueError, IndexError):
        continue
  walls = [float(w) for w in output.rsplit("walls ", 1)[1].split()]
  return by_kind, sorted(walls)[len(walls) // 2]


def main(_):
  if FLAGS.child:
    if FLAGS.what == "train":
      run_train_steps(FLAGS.precision, FLAGS.requests, FLAGS.size)
    else:
      run_requests(FLAGS.export_dir, FLAGS.requests)
    return
  export_dir = FLAGS.export_dir
  if not export_dir and FLAGS.what == "serving":
    from albert_tf import AlbertConfig  # pylint: disable=g-import-not-at-top
    from albert_tf.export import export_classifier  # pylint: disable=g-import-not-at-top
    from albert_tf.models.classifier import AlbertClassifier  # pylint: disable=g-import-not-at-top
    model = AlbertClassifier(AlbertConfig.from_dict(common.ALBERT_BASE), num_classes=2)
    export_dir = export_classifier(model, tempfile.mkdtemp(prefix="albert_tf_profile_"),
                                   ["0", "1"], 128, precision=FLAGS.precision)
  env = common.child_env(ONEDNN_VERBOSE="1", TF_CPP_MIN_LOG_LEVEL="3")
  child = common.module_command(
      __spec__.name, "--child", f"--what={FLAGS.what}", f"--precision={FLAGS.precision}",
      f"--requests={FLAGS.requests}", f"--size={FLAGS.size}",
      *([f"--export_dir={export_dir}"] if export_dir else []))
  proc = subprocess.run(child, capture_output=True, text=True, env=env, check=True)
  by_kind, wall = summarize(proc.stdout, FLAGS.requests)
  # A second run without the verbose output: its printing slows the traced requests.
  quiet = subprocess.run(child, capture_output=True, text=True,
                         env=common.child_env(TF_CPP_MIN_LOG_LEVEL="3"), check=True)
  _, quiet_wall = summarize(quiet.stdout, FLAGS.requests)
  inside = sum(by_kind.values())
  what = ("batch 1 request" if FLAGS.what == "serving"
          else f"ALBERT-{FLAGS.size} train step (batch 8)")
  print(f"{what}, seq 128, {FLAGS.precision}: {quiet_wall:.1f} ms untraced, "
        f"{wall:.1f} ms traced; oneDNN primitives {inside:.1f} ms ({inside / wall:.0%} of the "
        f"traced request), outside oneDNN {wall - inside:.1f} ms")
  for kind, ms in by_kind.most_common():
    print(f"  {kind:<48} {ms:7.2f} ms  {ms / wall:6.1%}")


if __name__ == "__main__":
  app.run(main)
