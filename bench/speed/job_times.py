"""What the README's three jobs cost on this CPU: measured step times of the shapes they run, and
the hours each recipe takes from them (README "Job 1", docs/hardware_and_time.md).

Measured here, each shape in this one process, one after the other (the machine's load is
recorded before and after):
  pretraining (the Trainer's compiled loop: MLM + SOP, global-norm clip, LAMB), per step:
    quickstart  the quickstart's model (configs/albert_quickstart.json with 2 layers and 3000
                pieces), batch 32 x 64 tokens: what `make quickstart` trains
    base_128    ALBERT-base, 8 x 128: one micro-batch of a single-machine recipe
    base_512    ALBERT-base, 8 x 512: one micro-batch of the official run (4096 x 512)
  fine-tuning (AlbertClassifier / AlbertSquadModel, cross-entropy, AdamW), per step:
    job2_base_128        ALBERT-base classifier, 32 x 128 (README Job 2)
    classifier_base_512  ALBERT-base classifier, 8 x 512 (a micro-batch of the GLUE recipes)
    squad_base_384       ALBERT-base SQuAD v1.1 model, 8 x 384 (a micro-batch of its recipe)

From them, time = steps x micro-batches per step x the micro-batch's step time (a larger batch
split with --gradient_accumulation_steps costs the sum of its micro-batches; attention makes a
longer sequence cost more than its tokens, which is why 512 is measured rather than scaled).
The recipes are priced in CPU seconds (all threads of the process), not wall seconds: on a
machine shared with other work the wall time of a step grows with the load, its CPU time hardly
does. Hours on 2 cores are the CPU time over 2, as a quiet 2-core machine runs a step on both.

  python -m bench.speed.job_times                # all shapes (~10 min on 2 cores)
  python -m bench.speed.job_times --steps=2      # quicker, noisier
"""

import json
import os
import time

from absl import app
from absl import flags

from bench import common

FLAGS = flags.FLAGS


def define_flags():
  """The command line's flags: defined when run as a script only, so that tests import this
  module beside the other benches (whose flags share names) without a DuplicateFlagError."""
  flags.DEFINE_integer("steps", 3, "Timed steps per shape (after one untimed step that traces).")
  flags.DEFINE_list("shapes", None, "Only these shapes (default: all; recipes of other shapes "
                    "are left out).")
  flags.DEFINE_string("output", os.path.join(common.REPO, "bench", "speed", "results",
                                             "job_times.json"), "The results file.")


# name: (config overrides or "base", batch, seq, predictions)
PRETRAINING = {
    "quickstart": ("quickstart", 32, 64, 10),
    "base_128": ("base", 8, 128, 20),
    "base_512": ("base", 8, 512, 20),
}
FINETUNING = {
    "job2_base_128": ("classifier", 32, 128),
    "classifier_base_512": ("classifier", 8, 512),
    "squad_base_384": ("squad", 8, 384),
}

# The recipes whose time the results give: the micro-batch shape measured, the steps and the
# micro-batches of one step (--gradient_accumulation_steps, or the batch over the measured one).
RECIPES = {
    "official_base_pretraining": dict(
        shape="base_512", steps=125000, micro_batches=4096 // 8,
        what="the official ALBERT-base run: batch 4096 x 512, 125k steps (512 micro-batches of 8)"),
    "single_machine_base_pretraining": dict(
        shape="base_128", steps=10000, micro_batches=64 // 8,
        what="continued pretraining of ALBERT-base on your domain: batch 64 x 128 (8 micro-"
             "batches of 8), 10k steps"),
    "small_model_pretraining": dict(
        shape="quickstart", steps=100000, micro_batches=1,
        what="a small ALBERT (the quickstart's: H 128, 2 layers) from scratch: batch 32 x 64, "
             "100k steps"),
    "quickstart_pretraining": dict(
        shape="quickstart", steps=9600, micro_batches=1,
        what="make quickstart's pretraining: 9600 steps of 32 x 64"),
    "job2_custom": dict(
        shape="job2_base_128", steps=2000, micro_batches=1,
        what="README Job 2: ALBERT-base on your CSV, 2000 steps of 32 x 128"),
    "glue_mnli_base": dict(
        shape="classifier_base_512", steps=10000, micro_batches=128 // 8,
        what="run_glue.sh's MNLI: batch 128 x 512 (16 micro-batches of 8), 10k steps"),
    "squad_v1_base": dict(
        shape="squad_base_384", steps=3649, micro_batches=48 // 8,
        what="recipes' SQuAD v1.1: batch 48 x 384 (6 micro-batches of 8), 3649 steps"),
}


def _config(kind):
  from albert_tf.config import AlbertConfig  # lazy: the parent prints before TensorFlow loads
  if kind == "base":
    return AlbertConfig(**common.ALBERT_BASE)
  with open(os.path.join(common.REPO, "configs", "albert_quickstart.json"), encoding="utf-8") as f:
    values = json.load(f)
  values.update(vocab_size=3000, num_hidden_layers=2)
  return AlbertConfig(**values)


def _time(run, steps):
  """(wall seconds, CPU seconds of all this process's threads) per step, after one step that
  traces and compiles. CPU seconds barely depend on what else the machine runs; wall seconds do."""
  run(1)
  wall, cpu = time.perf_counter(), time.process_time()
  run(steps)
  return (time.perf_counter() - wall) / steps, (time.process_time() - cpu) / steps


def time_pretraining(kind, batch, seq, preds, steps):
  """(wall, CPU) seconds per step of our Trainer's pretraining loop on one in-memory batch."""
  config = _config(kind)
  features, labels = common.synthetic_pretraining_batch(batch, seq, preds, config.vocab_size)
  run, _ = common.build_our_pretraining_step(config, features, labels, batch, seq, preds)
  return _time(run, steps)


def time_finetuning(kind, batch, seq, steps):
  """(wall, CPU) seconds per step of a fine-tuning model (cross-entropy, AdamW with the
  official exclusions) on one in-memory batch."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.models import AlbertClassifier, AlbertSquadModel  # pylint: disable=g-import-not-at-top
  from albert_tf.training import optimizer as opt_lib  # pylint: disable=g-import-not-at-top
  config = _config("base")
  rng = np.random.default_rng(0)
  features = {"input_ids": tf.constant(rng.integers(5, config.vocab_size, (batch, seq)), tf.int32),
              "input_mask": tf.ones((batch, seq), tf.int32),
              "segment_ids": tf.zeros((batch, seq), tf.int32)}
  if kind == "classifier":
    model = AlbertClassifier(config, num_classes=3, dropout_rate=0.0)
    labels = [tf.constant(rng.integers(0, 3, batch), tf.int32)]
    outputs = lambda out: [out["logits"]]
  else:
    model = AlbertSquadModel(config)
    labels = [tf.constant(rng.integers(0, seq, batch), tf.int32) for _ in range(2)]
    outputs = lambda out: [out["start_logits"], out["end_logits"]]
  model(features, training=False)
  optimizer = opt_lib.create_optimizer("adamw", 3e-5, 1000, 100)
  optimizer.bind_model(model)  # the official exclusions go by variable name

  @tf.function
  def step():
    with tf.GradientTape() as tape:
      logits = outputs(model(features, training=True))
      loss = tf.add_n([tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          y, tf.cast(x, tf.float32))) for x, y in zip(logits, labels)])
    grads = tape.gradient(loss, model.trainable_variables)
    grads, _ = tf.clip_by_global_norm(grads, 1.0)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  def run(n):
    for _ in range(n):
      step().numpy()
  return _time(run, steps)


def recipe_hours(cpu_seconds):
  """{recipe: RECIPES' entry + its CPU time} from the measured CPU seconds per step: core_hours
  (all cores' time), hours_on_2_cores and days/years on 2 cores (both cores busy throughout, as
  a quiet machine keeps them), hours_per_1000_steps on 2 cores."""
  table = {}
  for name, recipe in RECIPES.items():
    if recipe["shape"] not in cpu_seconds:
      continue
    core_seconds = recipe["steps"] * recipe["micro_batches"] * cpu_seconds[recipe["shape"]]
    two_cores = core_seconds / 2
    table[name] = dict(recipe, core_hours=round(core_seconds / 3600, 1),
                       hours_on_2_cores=round(two_cores / 3600, 2),
                       days_on_2_cores=round(two_cores / 86400, 2),
                       years_on_2_cores=round(two_cores / (365.25 * 86400), 2),
                       hours_per_1000_steps_on_2_cores=round(two_cores / recipe["steps"]
                                                             * 1000 / 3600, 2))
  return table


def main(_):
  results = {"what": __doc__.split("\n\n")[0], "machine": common.machine(),
             "steps_timed": FLAGS.steps, "step_seconds": {}, "step_cpu_seconds": {},
             "shapes": {}}
  wanted = lambda name: not FLAGS.shapes or name in FLAGS.shapes
  shapes = [(name, "pretraining", lambda v=v: time_pretraining(*v, FLAGS.steps), v)
            for name, v in PRETRAINING.items()]
  shapes += [(name, "fine-tuning", lambda v=v: time_finetuning(*v, FLAGS.steps), v)
             for name, v in FINETUNING.items()]
  for name, job, measure, values in shapes:
    if not wanted(name):
      continue
    wall, cpu = measure()
    kind, batch, seq = values[:3]
    results["step_seconds"][name] = round(wall, 4)
    results["step_cpu_seconds"][name] = round(cpu, 4)
    results["shapes"][name] = dict(job=job, model=kind, batch=batch, seq=seq)
    print(f"{name}: {wall:.3f} s/step wall, {cpu:.3f} CPU s/step", flush=True)
  results["recipes"] = recipe_hours(results["step_cpu_seconds"])
  for name, recipe in results["recipes"].items():
    print(f"{name}: {recipe['hours_on_2_cores']} h on 2 cores ({recipe['what']})")
  results["uptime_after"] = common.uptime()
  common.write_results(FLAGS.output, results)


if __name__ == "__main__":
  define_flags()
  app.run(main)
