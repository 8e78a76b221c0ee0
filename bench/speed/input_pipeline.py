"""Training input throughput (examples/s): the per-host input against the client pipeline.

"per_host" is the Trainer's training input (`DistributedInput.training`): every input pipeline
built by `strategy.distribute_datasets_from_function` from a `tf.distribute.InputContext`, its
batches cut into one [K, b, ...] element per local replica in the pipeline. "client" is the
input before it: one pipeline of the whole global batch iterated on the client, split between
the replicas inside the step by `experimental_distribute_values_from_function`. With several
devices and --per_replica_parsing, "per_replica_parsing" is the per-host input batched (parsed,
checked) at the per-replica size instead of the host's, as a first attempt had it. With several
devices and --plain_iterator, "plain_iterator" is the per-host input's pipeline (host batch cut
into per-replica elements) read by a plain iterator on the client, the step taking one element
per replica (`experimental_distribute_values_from_function`): the same elements as per_host
without TensorFlow's distributed iterator, so the two rows tell the iterator's own cost apart.

Both read the same official-format pretraining TFRecords (ALBERT-base shapes: sequence 128, 20
predictions, random ids) through the same `PretrainingTask.build_inputs` (every record
checked), and feed the same consumer: a compiled loop whose replicas only sum every feature
(no model), so the input is all that is timed. Each round makes a fresh iterator of each input
in turn, runs --warmup_steps untimed (start-up, buffers filled), times --steps_per_round steps
and drops it before the next: a live iterator of the other input would fill its prefetch
buffers in the background, taking the CPU from the one timed. Rounds are interleaved in one
process per device count: 1 device (the default strategy) and 8 logical CPU devices under
MirroredStrategy (a v3-8's core count). Writes bench/speed/results/input_pipeline.json with the CPU,
the date and the load before and after.

Run: .venv/bin/python -m bench.speed.input_pipeline [--rounds 6 --steps_per_round 150
       --per_replica_parsing --plain_iterator]
     .venv/bin/python -m bench.speed.input_pipeline --model_step --global_batch=64 \
       --steps_per_round=15 --warmup_steps=3 --rounds=5
       (replicas run a small model's forward+backward: the input's cost inside a training step;
       bench/speed/results/input_pipeline_model_step.json)
"""

import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from bench import common

flags.DEFINE_integer("global_batch", 256, "Examples per step (all replicas).")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("num_predictions", 20, "Masked positions per sequence.")
flags.DEFINE_integer("num_files", 4, "Input TFRecord files.")
flags.DEFINE_integer("records_per_file", 2000, "Records per file.")
flags.DEFINE_integer("rounds", 6, "Interleaved timing rounds.")
flags.DEFINE_integer("steps_per_round", 150, "Steps per round and input.")
flags.DEFINE_integer("warmup_steps", 30, "Untimed steps of each fresh iterator.")
flags.DEFINE_bool("per_replica_parsing", False, "Also time parsing at the per-replica batch.")
flags.DEFINE_bool("plain_iterator", False, "Also time the per-host elements through a plain "
                  "iterator instead of the distributed one.")
flags.DEFINE_bool("model_step", False,
                  "Replicas run a forward and backward pass of a small ALBERT (the quickstart's "
                  "shape: H 128, 2 layers) on their batch instead of summing it: what the input's "
                  "cost is in a training step. Results go to input_pipeline_model_step.json.")
flags.DEFINE_list("devices", ["1", "8"], "Logical CPU device counts, one process each.")
flags.DEFINE_string("output", None, "Results file (default: "
                    "bench/speed/results/input_pipeline.json, or input_pipeline_model_step.json "
                    "with --model_step).")
# Internal: one device count's measurement, in a child process (devices are fixed at start-up).
flags.DEFINE_integer("child_devices", 0, "Internal.")
flags.DEFINE_string("child_files", None, "Internal.")
FLAGS = flags.FLAGS

VOCAB_SIZE = 30000


def _client_split(strategy, batch):
  """The client input's split (as the Trainer had it): [R * b, ...] -> replica r's [1, b, ...]."""
  replicas = strategy.num_replicas_in_sync

  def value_fn(ctx):
    def take(t):
      rows = t.shape[0] // replicas
      return tf.reshape(t, [1, replicas, rows] + t.shape.as_list()[1:])[:, ctx.replica_id_in_sync_group]
    return tf.nest.map_structure(take, batch)
  return strategy.experimental_distribute_values_from_function(value_fn)


def _measure_child(devices, files):
  """{input: {"ms": [...], "examples_per_second": median}} for `devices` logical CPUs."""
  global tf  # pylint: disable=global-variable-undefined,invalid-name
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,redefined-outer-name
  cpu = tf.config.list_physical_devices("CPU")[0]
  if devices > 1:
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * devices)
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks import pretraining  # pylint: disable=g-import-not-at-top
  from albert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top
  strategy = (tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(devices)])
              if devices > 1 else tf.distribute.get_strategy())
  # Without --model_step the model is never run: a tiny one with the records' vocabulary.
  config = (AlbertConfig(vocab_size=VOCAB_SIZE, embedding_size=128, hidden_size=128,
                         num_hidden_layers=2, num_attention_heads=2, intermediate_size=512)
            if FLAGS.model_step else
            AlbertConfig(vocab_size=VOCAB_SIZE, embedding_size=16, hidden_size=32,
                         num_hidden_layers=1, num_attention_heads=2, intermediate_size=64))
  task = pretraining.PretrainingTask(pretraining.PretrainingConfig(
      albert_config=config, input_file=",".join(files), max_seq_length=FLAGS.seq_length,
      max_predictions_per_seq=FLAGS.num_predictions, shuffle_seed=1))
  trainer = Trainer(task, strategy)
  batch = FLAGS.global_batch

  if FLAGS.model_step:
    with strategy.scope():
      model = task.build_model()

  def consume(features, labels, client=False):
    if not FLAGS.model_step:
      return tf.add_n([tf.reduce_sum(tf.cast(t, tf.float32))
                       for t in tf.nest.flatten((features, labels))])
    if client:  # the client split's [1, b, ...] -> [b, ...], as the per-host input's
      features, labels = tf.nest.map_structure(lambda t: t[0], (features, labels))
    with tf.GradientTape() as tape:
      loss, _ = task.build_losses(labels, model(features, training=True), batch)
    grads = tape.gradient(loss, model.trainable_variables)
    return loss + tf.add_n([tf.reduce_sum(g) for g in grads if g is not None]) * 0.0

  def loop(step):
    @tf.function
    def run(iterator, steps):
      total = tf.constant(0.0)
      for _ in tf.range(steps):
        total += strategy.reduce(tf.distribute.ReduceOp.SUM, step(iterator), axis=None)
      return total
    return run

  def per_host_step(iterator):
    features, labels = next(iterator)
    return strategy.run(consume, args=(features, labels))

  def client_step(iterator):
    features, labels = _client_split(strategy, next(iterator))
    return strategy.run(consume, args=(features, labels, True))

  def plain_iterator_step(iterator):
    elements = [next(iterator) for _ in range(strategy.num_replicas_in_sync)]
    features, labels = strategy.experimental_distribute_values_from_function(
        lambda ctx: elements[ctx.replica_id_in_sync_group])
    return strategy.run(consume, args=(features, labels))

  def per_replica_parsing(ctx):
    return task.build_inputs("train", ctx.get_per_replica_batch_size(batch), ctx)

  steps = tf.constant(FLAGS.steps_per_round)
  runs = {"client": (loop(client_step),
                     task.build_inputs("train", batch, tf.distribute.InputContext())),
          "per_host": (loop(per_host_step), trainer.inputs.training(batch)[0])}
  if devices > 1 and FLAGS.per_replica_parsing:
    runs["per_replica_parsing"] = (
        loop(per_host_step), strategy.distribute_datasets_from_function(per_replica_parsing))
  if devices > 1 and FLAGS.plain_iterator:  # as DistributedInput.training's one pipeline
    runs["plain_iterator"] = (loop(plain_iterator_step), task.build_inputs(
        "train", batch, tf.distribute.InputContext()).rebatch(
            batch // devices, drop_remainder=True).prefetch(tf.data.AUTOTUNE))
  warmup = tf.constant(FLAGS.warmup_steps)
  times = {name: [] for name in runs}
  for r in range(FLAGS.rounds):
    names = list(runs)[r % len(runs):] + list(runs)[:r % len(runs)]
    for name in names:
      fn, dataset = runs[name]
      iterator = iter(dataset)
      fn(iterator, warmup).numpy()
      start = time.perf_counter()
      fn(iterator, steps).numpy()
      times[name].append((time.perf_counter() - start) * 1000)
      del iterator
  examples = FLAGS.steps_per_round * batch
  out = {name: dict(common.summarize(ms), ms=[round(t, 2) for t in ms],
                    examples_per_second=round(examples / (common.summarize(ms)["median"] / 1e3)))
         for name, ms in times.items()}
  for name in times:
    if name != "client":  # throughput ratio, the median over rounds
      out[f"{name}_over_client"] = round(1 / common.paired_ratio(times[name], times["client"]), 3)
  return out


def main(_):
  if FLAGS.child_devices:
    print(json.dumps(_measure_child(FLAGS.child_devices, FLAGS.child_files.split(","))))
    return
  load_before = common.uptime()
  started = datetime.datetime.now(datetime.timezone.utc)
  results = {}
  with tempfile.TemporaryDirectory() as work_dir:
    files = common.write_pretraining_records(work_dir, VOCAB_SIZE, FLAGS.seq_length,
                                             FLAGS.num_predictions, FLAGS.num_files,
                                             FLAGS.records_per_file)
    for devices in FLAGS.devices:
      args = common.module_command(
          __spec__.name, f"--child_devices={devices}", f"--child_files={','.join(files)}", *(
              f"--{name}={getattr(FLAGS, name)}" for name in (
                  "global_batch", "seq_length", "num_predictions", "rounds",
                  "steps_per_round", "warmup_steps", "per_replica_parsing",
                  "plain_iterator", "model_step")))
      proc = subprocess.run(args, capture_output=True, text=True, env=common.child_env(),
                            check=False)
      if proc.returncode:
        sys.exit(f"{devices} devices failed:\n{proc.stderr[-3000:]}")
      results[f"{devices}_devices"] = json.loads(proc.stdout.strip().splitlines()[-1])
      print(devices, "devices:", {k: v["examples_per_second"] if isinstance(v, dict) else v
                                  for k, v in results[f"{devices}_devices"].items()}, flush=True)
  report = dict(cpu=common.cpu_model(), cores=os.cpu_count(), date=started.isoformat(
      timespec="seconds"), load_before=load_before, load_after=common.uptime(),
      settings={name: getattr(FLAGS, name) for name in (
          "global_batch", "seq_length", "num_predictions", "num_files", "records_per_file",
          "rounds", "steps_per_round", "warmup_steps", "per_replica_parsing", "plain_iterator",
          "model_step")},
      results=results)
  output = FLAGS.output or os.path.join(
      os.path.dirname(os.path.abspath(__file__)), "results",
      "input_pipeline_model_step.json" if FLAGS.model_step else "input_pipeline.json")
  os.makedirs(os.path.dirname(output), exist_ok=True)
  with open(output, "w", encoding="utf-8") as f:
    json.dump(report, f, indent=1)
  print(f"{report['cpu']}; {load_before} -> {report['load_after']}; wrote {output}")


if __name__ == "__main__":
  app.run(main)
