"""What checking every input record costs: ALBERT-base pretraining steps with and without it.

The checks (albert_tf/data/record_checks.py) run in the tf.data pipeline: every record is
tagged with its file and index, parsed tolerantly (ragged, so a record of another length is
named instead of failing inside parse_example) and each feature's length and id range is
checked with one reduction per batch. They run on the CPU threads that feed the step, so what
matters is the step time of the real train loop reading real TFRecord files.

Measured: the Trainer's compiled train loop (ALBERT-base, batch 8, seq 128, 20 predictions by
default) fed by `pretraining_dataset(..., check_records=True)` and by the unchecked pipeline
(`check_records=False`: plain FixedLenFeature parsing, as before the checks), rounds
interleaved on one model so machine drift hits both alike; and the input pipelines alone
(ms per batch, no model). Prints medians, the paired ratio checked / unchecked and the CPU.

Run: .venv/bin/python -m bench.speed.input_checks [--rounds 8 --steps_per_round 3]
"""

import os
import statistics
import tempfile
import time

from absl import app
from absl import flags
import tensorflow as tf

from albert_tf.config import AlbertConfig
from bench import common

flags.DEFINE_integer("batch_size", 8, "Examples per step.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("num_predictions", 20, "Masked positions per sequence.")
flags.DEFINE_integer("rounds", 8, "Interleaved timing rounds.")
flags.DEFINE_integer("steps_per_round", 3, "Train steps per round and pipeline.")
flags.DEFINE_integer("num_files", 4, "Input TFRecord files.")
flags.DEFINE_integer("records_per_file", 2000, "Records per file.")
flags.DEFINE_integer("pipeline_batches", 400, "Batches per round of the pipeline-only timing.")
flags.DEFINE_string("work_dir", None, "Where the records go (default: a temporary directory).")
FLAGS = flags.FLAGS


def make_dataset(files, config, check_records):
  from albert_tf.data.pretraining import dataset as pretraining_dataset  # pylint: disable=g-import-not-at-top
  return pretraining_dataset.pretraining_dataset(
      files, FLAGS.seq_length, FLAGS.num_predictions, FLAGS.batch_size, is_training=True,
      seed=1, vocab_size=config.vocab_size, type_vocab_size=config.type_vocab_size,
      check_records=check_records)


def build_train_loops(files, config):
  """One Trainer (one model and optimizer) and its compiled train loop over each pipeline.

  Returns {"checked": run, "unchecked": run}: run() trains --steps_per_round steps.
  """
  from albert_tf.tasks import pretraining as pretraining_task  # pylint: disable=g-import-not-at-top
  from albert_tf.training import optimizer as opt_lib  # pylint: disable=g-import-not-at-top
  from albert_tf.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top

  class BenchTask(pretraining_task.PretrainingTask):
    check_records = True

    def build_inputs(self, mode, batch_size, input_context=None):
      return make_dataset(files, config, self.check_records).map(
          pretraining_task.features_and_labels)

  task = BenchTask(pretraining_task.PretrainingConfig(
      config, max_seq_length=FLAGS.seq_length, max_predictions_per_seq=FLAGS.num_predictions))
  trainer = trainer_lib.Trainer(
      task, None, None, optimizer_fn=lambda: opt_lib.create_optimizer("lamb", 1e-4, 1000, 10))
  runs = {}
  for name, checked in (("checked", True), ("unchecked", False)):
    task.check_records = checked
    # The Trainer's own compiled loop, without its checkpointing and logging around it.
    dataset, spec = trainer.inputs.training(FLAGS.batch_size)
    iterator = iter(dataset)
    trainer.build(spec)
    train_fn = trainer.train_loop(FLAGS.batch_size)
    steps = tf.constant(FLAGS.steps_per_round)
    runs[name] = (lambda fn=train_fn, it=iterator:
                  float(fn(it, steps)[0].numpy()))
  return runs


def build_pipeline_reads(files, config):
  """{"checked": read, "unchecked": read}: read() pulls --pipeline_batches batches."""
  reads = {}
  for name, checked in (("checked", True), ("unchecked", False)):
    iterator = iter(make_dataset(files, config, checked))

    def read(it=iterator):
      for _ in range(FLAGS.pipeline_batches):
        next(it)
    reads[name] = read
  return reads


def report(title, times, per):
  ratio = common.paired_ratio(times["checked"], times["unchecked"])
  print(title)
  for name in ("unchecked", "checked"):
    s = common.summarize([t / per for t in times[name]])
    print(f"  {name:9s} median {s['median']:8.3f} ms (p10 {s['p10']:.3f}, p90 {s['p90']:.3f})")
  print(f"  ratio checked / unchecked (median of paired rounds): {ratio:.4f} "
        f"({(ratio - 1) * 100:+.2f} %)")
  return ratio


def main(argv):
  del argv
  if FLAGS.work_dir:
    os.makedirs(FLAGS.work_dir, exist_ok=True)
    run(FLAGS.work_dir)
  else:
    with tempfile.TemporaryDirectory(prefix="albert_tf_bench_input_checks_") as work_dir:
      run(work_dir)


def run(work_dir):
  config = AlbertConfig(**common.ALBERT_BASE)
  files = common.write_pretraining_records(
      work_dir, config.vocab_size, FLAGS.seq_length, FLAGS.num_predictions, FLAGS.num_files,
      FLAGS.records_per_file)
  print(f"CPU: {common.cpu_model()} ({os.cpu_count()} cores); {common.uptime()}")
  print(f"ALBERT-base pretraining, batch {FLAGS.batch_size}, seq {FLAGS.seq_length}, "
        f"{FLAGS.num_predictions} predictions; {FLAGS.num_files} files x "
        f"{FLAGS.records_per_file} records")

  reads = build_pipeline_reads(files, config)
  pipeline_times = common.time_interleaved(reads, rounds=FLAGS.rounds, warmup=1)
  report(f"input pipeline alone, per batch ({FLAGS.pipeline_batches} batches per round):",
         pipeline_times, FLAGS.pipeline_batches)

  runs = build_train_loops(files, config)
  started = time.time()
  step_times = common.time_interleaved(runs, rounds=FLAGS.rounds, warmup=1)
  ratio = report(f"train step, per step ({FLAGS.steps_per_round} steps per round, "
                 f"{FLAGS.rounds} rounds, {time.time() - started:.0f} s):",
                 step_times, FLAGS.steps_per_round)
  unchecked_step = statistics.median(step_times["unchecked"]) / FLAGS.steps_per_round
  checked_batch = statistics.median(pipeline_times["checked"]) / FLAGS.pipeline_batches
  unchecked_batch = statistics.median(pipeline_times["unchecked"]) / FLAGS.pipeline_batches
  print(f"pipeline cost of the checks per batch: {checked_batch - unchecked_batch:+.3f} ms = "
        f"{(checked_batch - unchecked_batch) / unchecked_step * 100:+.3f} % of a step; "
        f"step ratio {ratio:.4f} (budget: < 1.02)")
  print(f"load: {common.uptime()}")


if __name__ == "__main__":
  app.run(main)
