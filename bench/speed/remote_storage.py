"""What going through tf.io.gfile costs: pretraining records read and checkpoints written and
read on `ram://` (TensorFlow's in-memory filesystem, the suite's stand-in for gs://) against the
local disk, side by side in one process.

A TPU run reads its records and writes its checkpoints on Cloud Storage, through the same
tf.io.gfile calls as ram://; this bench tells the cost of that layer (the filesystem plumbing,
buffer copies) apart from the network, which no machine here has. Both sides start warm: the
local files are in the page cache after their first read, as ram:// always is, so the ratio is
the plumbing, not the disk.

* records: the pretraining input (`albert_tf.data.pretraining.dataset`, every record checked)
  over --num_files official-format TFRecord files of ALBERT-base shapes (sequence 128, 20
  predictions), one full pass per round, examples/s;
* checkpoint write / read: an ALBERT-base AlbertPretrainer's variables (11.7M encoder weights +
  heads) and two optimizer-slot copies (as LAMB's m and v), written with tf.train.Checkpoint and
  read back (restore), seconds.

Rounds alternate local and ram:// so load drifts hit both. Writes bench/speed/results/remote_storage.json
with the CPU, the date and the load before and after.

Run: .venv/bin/python -m bench.speed.remote_storage [--rounds 5 --num_files 4 --records_per_file 2000]
"""

from albert_tf.common import console  # first: quiets TensorFlow before anything imports it
console.quiet_startup()

import datetime  # pylint: disable=g-import-not-at-top,g-bad-import-order
import json
import os
import statistics
import tempfile
import time

from absl import app
from absl import flags

from bench import common

flags.DEFINE_integer("rounds", 5, "Interleaved rounds (each: local, then ram://).")
flags.DEFINE_integer("num_files", 4, "Pretraining TFRecord files.")
flags.DEFINE_integer("records_per_file", 2000, "Records per file.")
flags.DEFINE_integer("batch", 256, "Batch size of the record reads.")
flags.DEFINE_string("output", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                           "remote_storage.json"), "Results file.")
FLAGS = flags.FLAGS

SEQ, PREDS = 128, 20


def _read_records(patterns, batch, vocab_size):
  from albert_tf.data.pretraining import dataset  # pylint: disable=g-import-not-at-top
  ds = dataset.pretraining_dataset(patterns, SEQ, PREDS, batch, is_training=False,
                                   vocab_size=vocab_size, type_vocab_size=2)
  start, examples = time.perf_counter(), 0
  for features in ds:
    examples += int(features["input_ids"].shape[0])
  return examples / (time.perf_counter() - start), examples


def _checkpoint(variables):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.train.Checkpoint(**{f"v{i}": v for i, v in enumerate(variables)})


def _write_and_read(variables, prefix):
  checkpoint = _checkpoint(variables)
  start = time.perf_counter()
  path = checkpoint.write(prefix)
  written = time.perf_counter() - start
  start = time.perf_counter()
  checkpoint.read(path).assert_consumed()
  return written, time.perf_counter() - start


def main(_):
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import albert_tf  # pylint: disable=g-import-not-at-top
  from albert_tf.common import fileio  # pylint: disable=g-import-not-at-top

  load_before = common.uptime()
  config = albert_tf.AlbertConfig(**common.ALBERT_BASE)
  local_dir = tempfile.mkdtemp(prefix="remote_storage_")
  ram_dir = "ram://bench-remote-storage"
  files = common.write_pretraining_records(local_dir, config.vocab_size, SEQ, PREDS,
                                           FLAGS.num_files, FLAGS.records_per_file)
  fileio.makedirs(ram_dir)
  for path in files:
    fileio.copy(path, f"{ram_dir}/{os.path.basename(path)}")
  patterns = {"local": os.path.join(local_dir, "*.tfrecord"), "ram": f"{ram_dir}/*.tfrecord"}

  model = albert_tf.AlbertPretrainer(config)
  features, _ = common.synthetic_pretraining_batch(2, SEQ, PREDS, config.vocab_size)
  model(features, training=False)
  slots = [tf.Variable(tf.zeros_like(v)) for v in model.trainable_variables for _ in range(2)]
  variables = list(model.variables) + slots
  megabytes = sum(int(np.prod(v.shape)) * v.dtype.size for v in variables) / 1e6

  _read_records(patterns["local"], FLAGS.batch, config.vocab_size)  # warm the page cache
  rows = {side: {"examples_per_s": [], "write_s": [], "read_s": []} for side in patterns}
  for round_index in range(FLAGS.rounds):
    for side in ("local", "ram"):
      rate, examples = _read_records(patterns[side], FLAGS.batch, config.vocab_size)
      prefix = (os.path.join(local_dir, "ckpt", f"ckpt-{round_index}") if side == "local" else
                f"{ram_dir}/ckpt/ckpt-{round_index}")
      written, read = _write_and_read(variables, prefix)
      rows[side]["examples_per_s"].append(rate)
      rows[side]["write_s"].append(written)
      rows[side]["read_s"].append(read)
      print(f"round {round_index + 1}/{FLAGS.rounds} {side:5s}: {rate:8.0f} examples/s "
            f"({examples} records), checkpoint write {written:.3f} s, read {read:.3f} s "
            f"({megabytes:.0f} MB)", flush=True)
  fileio.remove(local_dir)

  medians = {side: {key: statistics.median(values) for key, values in row.items()}
             for side, row in rows.items()}
  ratios = {
      "records_ram_vs_local": medians["ram"]["examples_per_s"] / medians["local"]["examples_per_s"],
      "checkpoint_write_time_ram_vs_local": medians["ram"]["write_s"] / medians["local"]["write_s"],
      "checkpoint_read_time_ram_vs_local": medians["ram"]["read_s"] / medians["local"]["read_s"],
  }
  result = {
      "question": "the cost of reading records and writing checkpoints through tf.io.gfile "
                  "(ram://, the stand-in for gs://) against the local disk",
      "cpu": common.cpu_model(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
          timespec="seconds"),
      "load_before": load_before, "load_after": common.uptime(),
      "settings": {"rounds": FLAGS.rounds, "files": FLAGS.num_files,
                   "records": FLAGS.num_files * FLAGS.records_per_file, "batch": FLAGS.batch,
                   "seq_length": SEQ, "predictions": PREDS, "checkpoint_mb": round(megabytes, 1)},
      "median": medians, "rounds": rows, "ratios": ratios,
  }
  os.makedirs(os.path.dirname(FLAGS.output), exist_ok=True)
  with open(FLAGS.output, "w", encoding="utf-8") as f:
    json.dump(result, f, indent=2)
  print(f"records: ram:// {medians['ram']['examples_per_s']:.0f} examples/s vs local "
        f"{medians['local']['examples_per_s']:.0f} ({ratios['records_ram_vs_local']:.2f}x); "
        f"checkpoint write {medians['ram']['write_s']:.3f} s vs {medians['local']['write_s']:.3f}"
        f" s ({ratios['checkpoint_write_time_ram_vs_local']:.2f}x the time), read "
        f"{medians['ram']['read_s']:.3f} s vs {medians['local']['read_s']:.3f} s "
        f"({ratios['checkpoint_read_time_ram_vs_local']:.2f}x); {FLAGS.output}")


if __name__ == "__main__":
  app.run(main)
