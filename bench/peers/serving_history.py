"""Bisecting the batch-1 serving time over the landed history, on one machine in one run.

Each commit's own code exports the same ALBERT-base classifier (fp32, seq 128; random weights:
latency does not depend on them) in its own subprocess; one timing process then loads every
export and the model garden's encoder and calls them interleaved (batch 1, 128 real tokens), so
all versions see the same machine state. The timing runs twice: with TensorFlow's oneDNN graph
rewrites (MatMul+BiasAdd+GELU fusions; TensorFlow's default on x86 CPUs with AVX512-VNNI/BF16 or
AMX) and without them (TF_ENABLE_ONEDNN_OPTS=0), since which one a CPU gets decides the ratio.

  .venv/bin/python -m bench.peers.serving_history [--commits=a4d9a9f,bc86b41,HEAD] [--rounds=20]

Prints one table per oneDNN setting: median ms and the paired ratio to the model garden.
"""

import json
import os
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

from bench import common

flags.DEFINE_list("commits", ["029fd32", "4163cfd", "9b40de5", "a4d9a9f", "bc86b41", "e29cbba",
                              "48a1f24", "HEAD"],
                  "Commits to compare (the serving changes of the history, oldest first).")
flags.DEFINE_integer("rounds", 20, "Interleaved rounds per setting.")
flags.DEFINE_string("work_dir", None, "Where the exports go (default: a temp dir).")
FLAGS = flags.FLAGS

_EXPORT = """
import os, sys
sys.path.insert(0, sys.argv[1])
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
from albert_tf import AlbertConfig
from albert_tf.export import export_classifier
from albert_tf.models.classifier import AlbertClassifier
from bench import common
model = AlbertClassifier(AlbertConfig.from_dict(common.ALBERT_BASE), num_classes=2)
export_classifier(model, sys.argv[2], ["0", "1"], 128)
"""

_TIME = """
import json, os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, tensorflow as tf
from bench import common
paths, rounds = json.loads(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(1)
ids = tf.constant(rng.integers(5, 30000, size=(1, 128)).astype(np.int32))
mask = tf.ones_like(ids)
segments = tf.constant((np.arange(128) >= 64).astype(np.int32)[None])
calls = {}
for name, path in paths.items():
  if name == "model garden":
    s = tf.saved_model.load(path).signatures["serving_default"]
    calls[name] = lambda s=s: s(input_word_ids=ids, input_mask=mask, input_type_ids=segments)
  else:
    s = tf.saved_model.load(path).signatures["token_ids"]
    calls[name] = lambda s=s: s(input_ids=ids, input_mask=mask, segment_ids=segments)
times = common.time_interleaved(calls, rounds, warmup=3)
print(json.dumps({n: [common.summarize(t)["median"], common.paired_ratio(t, times["model garden"])]
                  for n, t in times.items()}))
"""


def _saved_model_dir(root):
  """The directory holding saved_model.pb below `root` (a version folder in newer exports)."""
  for directory, _, files in sorted(os.walk(root)):
    if "saved_model.pb" in files and "core_ops" not in directory.split(os.sep):
      return directory
  raise FileNotFoundError(f"no saved_model.pb below {root}")


def export_commit(commit, work_dir):
  """Exports the classifier with `commit`'s code; returns the SavedModel directory."""
  source = os.path.join(work_dir, f"src_{commit}")
  os.makedirs(source, exist_ok=True)
  archive = subprocess.run(["git", "-C", common.REPO, "archive", commit, "albert_tf"],
                           capture_output=True, check=True).stdout
  subprocess.run(["tar", "-x", "-C", source], input=archive, check=True)
  target = os.path.join(work_dir, f"export_{commit}")
  # The commit's albert_tf goes first on the child's path (its own code exports); `bench` comes
  # from this checkout (PYTHONPATH).
  subprocess.run([sys.executable, "-c", _EXPORT, source, target], check=True,
                 env=common.child_env(), stderr=subprocess.DEVNULL)
  return _saved_model_dir(target)


def main(_):
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="albert_tf_history_")
  paths = {f"ours @ {c}": export_commit(c, work_dir) for c in FLAGS.commits}
  paths["model garden"] = common.export_model_garden_encoder(work_dir)
  print(f"CPU: {common.cpu_model()}; {common.uptime()}")
  for onednn in ("1", "0"):
    env = common.child_env(TF_ENABLE_ONEDNN_OPTS=onednn)
    out = subprocess.run([sys.executable, "-c", _TIME, json.dumps(paths),
                          str(FLAGS.rounds)], env=env, capture_output=True, text=True,
                         check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    print(f"\nTF_ENABLE_ONEDNN_OPTS={onednn}: batch 1, seq 128, fp32\n"
          "| model | median | vs model garden (paired) |\n|---|---|---|")
    for name, (median, ratio) in result.items():
      print(f"| {name} | {median:.1f} ms | {ratio:.2f}x |")
  print(f"\n{common.uptime()}")


if __name__ == "__main__":
  app.run(main)
