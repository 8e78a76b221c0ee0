"""Times TextClassifier.fit() against run_classifier.py's training step on the same shape.

Both sides train the same model (a pair classifier of the quickstart's config, and of
ALBERT-base with --models=albert_base) on the same 32 text pairs packed to 128 pieces, with
run_classifier.py's recipe: AdamW 5e-5 with the official weight-decay exclusions, warm-up + linear decay, clipping at 1.0,
head dropout 0.1, no XLA.

  fit      TextClassifier.fit() on a tf.data of the raw strings (the preprocessor runs in the
           step, as in a notebook), steps_per_epoch = steps per round, verbose=0.
  script   the Trainer's compiled train loop as run_classifier.py builds it (the same task,
           model and optimizer; the loop runs a round's steps in one call), on the ids the
           preprocessor gives for the same strings, held in memory (the script's TFRecord
           reading is not what is compared).

  keras_hub  (--keras_hub) keras-hub's AlbertTextClassifier.fit on the same weights and tf.data
           (bench/speed/fit_keras_hub.py), its preprocessor mapped over the data as its fit does.

Rounds of the sides alternate (the order rotating), after warm-up rounds that trace and build
everything, so load from the other users of the machine hits them alike. Each is timed in wall
time and in the process's CPU time (time.process_time: every thread, and far less disturbed by
the other jobs of a shared machine), per step ("<side>_call", "<side>_call_cpu"). A fit() call
is also split ("fit_" / "keras_hub_" + setup, first_step, steady, teardown, trained): its set-up
before the first step and its first step (ms per call), its steady steps (from the first step's
end to the last's, per step), its teardown (after the last step until fit() returns: where
Keras drops the call's tf.data iterator, which joins tf.data's autotune thread, ms per call)
and the call up to its last step's end (per step). "ratios": medians over rounds of per-round
ratios (RATIOS).

Run: .venv/bin/python -m bench.speed.fit_vs_script [--models=quickstart,albert_base]
  [--rounds 12 --steps_per_round 8] [--keras_hub]
Results: bench/speed/results/fit_vs_script.json.
"""

import json
import os
import statistics
import tempfile
import time

from absl import app
from absl import flags
import numpy as np

from bench import common

FLAGS = flags.FLAGS


def define_flags():
  """The command line's flags: defined when run as a script only, so that tests import this
  module beside the other benches (whose flags share names) without a DuplicateFlagError."""
  flags.DEFINE_integer("batch_size", 32, "Examples per step (run_classifier.py's default).")
  flags.DEFINE_integer("seq_length", 128, "Pieces per packed pair (run_classifier.py's default).")
  flags.DEFINE_integer("rounds", 6, "Timed rounds of each side.")
  flags.DEFINE_integer("steps_per_round", 8, "Training steps per round and side.")
  flags.DEFINE_integer("warmup_rounds", 2, "Untimed rounds first (tracing, oneDNN set-up).")
  flags.DEFINE_list("models", ["quickstart"], "Models to time: quickstart "
                    "(configs/albert_quickstart.json), albert_base (bench/common.py's ALBERT_BASE); "
                    "each replaces its own entry of the results file, the others are kept.")
  flags.DEFINE_bool("keras_hub", False, "Times keras-hub's AlbertTextClassifier.fit too, on the "
                    "same weights and data (keras-hub importable: bench/speed/fit_keras_hub.py).")
  flags.DEFINE_string("output", os.path.join(common.REPO, "bench", "speed", "results",
                                             "fit_vs_script.json"), "Results file.")


SPM_MODEL = os.path.join(common.REPO, "tests", "fixtures", "official_training", "spm.model")
QUICKSTART = os.path.join(common.REPO, "configs", "albert_quickstart.json")
# run_classifier.py's recipe: --learning_rate, and a schedule long enough that the timed steps
# run at warm-up and decay rates alike (the rate does not change a step's cost).
LEARNING_RATE, TRAIN_STEPS, WARMUP_STEPS = 5e-5, 1000, 100
KERAS_HUB = ("not measured in this run: --keras_hub not given (bench/speed/fit_keras_hub.py says "
             "how keras-hub is installed beside .venv)")
KERAS_HUB_MEASURED = ("measured: keras-hub's AlbertTextClassifier.fit in the same process (Keras 3, "
                      "TensorFlow backend) on the same weights and data: each model's keras_hub_* "
                      "times and its keras_hub note")


def text_pairs(batch, seed=0):
  """`batch` pairs of random English-like words, each side long enough to fill the sequence."""
  rng = np.random.default_rng(seed)
  words = ("the model reads each sentence of a document and learns which one comes first "
           "while a second network predicts masked pieces of text from their context").split()
  def text():
    return " ".join(rng.choice(words, size=80))
  return [text() for _ in range(batch)], [text() for _ in range(batch)], \
      rng.integers(0, 2, size=batch).astype(np.int32)


class _StepClock:
  """Wall and process CPU clocks at a fit() call's start, its first step's start and each step's
  end (the callback's hooks run after the step's tensors are back, so a step has finished)."""

  def __init__(self):
    self.start = self.first_begin = None
    self.ends = []

  @staticmethod
  def now():
    return time.perf_counter(), time.process_time()

  def measures(self, steps):
    """{name: ms per step} of one fit() call of `steps` steps, wall and CPU."""
    end = self.now()
    out = {}
    for i, clock in enumerate(("", "_cpu")):
      out["call" + clock] = (end[i] - self.start[i]) / steps * 1000
      out["steady" + clock] = (self.ends[-1][i] - self.ends[0][i]) / (len(self.ends) - 1) * 1000
      out["setup" + clock] = (self.first_begin[i] - self.start[i]) * 1000
      out["first_step" + clock] = (self.ends[0][i] - self.first_begin[i]) * 1000
      # After the last step, before fit() returns: the epoch's iterator is deleted there.
      out["teardown" + clock] = (end[i] - self.ends[-1][i]) * 1000
      out["trained" + clock] = (self.ends[-1][i] - self.start[i]) / steps * 1000
    return out


def _clock_callback(base, clock):
  """A callback of `base` (tf_keras' or Keras 3's Callback class) that fills `clock`."""

  class Clock(base):
    def on_train_batch_begin(self, batch, logs=None):
      if clock.first_begin is None:
        clock.first_begin = clock.now()

    def on_train_batch_end(self, batch, logs=None):
      clock.ends.append(clock.now())
  return Clock()


def timed_fit(model, dataset, callback_base):
  """run(steps) -> measures of one model.fit() call on `dataset` (tf_keras or Keras 3)."""
  def run(steps):
    clock = _StepClock()
    callback = _clock_callback(callback_base, clock)
    clock.start = clock.now()
    model.fit(dataset, epochs=1, steps_per_epoch=steps, callbacks=[callback], verbose=0)
    return clock.measures(steps)
  return run


def build_fit(config, texts_a, texts_b, labels):
  """(run(steps) -> measures, model) of TextClassifier.fit() on a tf.data of the raw strings."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from albert_tf.training.text_models import TextClassifier  # pylint: disable=g-import-not-at-top
  model = TextClassifier(config, 2, SPM_MODEL, sequence_length=FLAGS.seq_length, text_pair=True)
  model.compile(learning_rate=LEARNING_RATE, num_train_steps=TRAIN_STEPS,
                num_warmup_steps=WARMUP_STEPS)
  dataset = tf.data.Dataset.from_tensors(
      ((tf.constant(texts_a), tf.constant(texts_b)), tf.constant(labels))).repeat()
  return timed_fit(model, dataset, tf_keras.callbacks.Callback), model


def build_script(config, features, labels, work_dir):
  """(run(steps) -> measures, trainer) of run_classifier.py's train loop on in-memory ids."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks.glue import ClassificationTask, GlueConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.training import optimizer as opt_lib  # pylint: disable=g-import-not-at-top

  class InMemoryMrpc(ClassificationTask):
    def build_inputs(self, mode, batch_size, input_context=None):
      return tf.data.Dataset.from_tensors((features, labels)).repeat()

  task = InMemoryMrpc(GlueConfig(albert_config=config, data_dir=work_dir, task_name="MRPC",
                                 max_seq_length=FLAGS.seq_length, spm_model_file=SPM_MODEL))
  loop, trainer = common.build_trainer_loop(
      task, FLAGS.batch_size,
      lambda: opt_lib.create_optimizer("adamw", LEARNING_RATE, TRAIN_STEPS, WARMUP_STEPS))

  def run(steps):
    start = _StepClock.now()
    loop(steps)
    end = _StepClock.now()
    return {"call": (end[0] - start[0]) / steps * 1000,
            "call_cpu": (end[1] - start[1]) / steps * 1000}
  return run, trainer


def compare(name, config, work_dir):
  """Times the sides on `config`, rounds interleaved; returns its results entry."""
  machine = common.machine()
  texts_a, texts_b, labels = text_pairs(FLAGS.batch_size)
  fit, model = build_fit(config, texts_a, texts_b, labels)
  ids = model.preprocessor((np.array(texts_a, object), np.array(texts_b, object)))
  features = {k: ids[k] for k in ("input_ids", "input_mask", "segment_ids")}
  script, trainer = build_script(config, features,
                                 {"label_ids": labels,
                                  "is_real_example": np.ones(len(labels), np.float32)}, work_dir)
  sides = {"fit": fit, "script": script}
  keras_hub_note = None
  if FLAGS.keras_hub:
    from bench.speed import fit_keras_hub  # lazy: Keras 3 and keras-hub, only for this side
    classifier, dataset, callback_base, keras_hub_note = fit_keras_hub.build(
        model, texts_a, texts_b, labels, features, work_dir,
        learning_rate=LEARNING_RATE, train_steps=TRAIN_STEPS, warmup_steps=WARMUP_STEPS)
    sides["keras_hub"] = timed_fit(classifier, dataset, callback_base)
  steps = FLAGS.steps_per_round
  for _ in range(FLAGS.warmup_rounds):
    for run in sides.values():
      run(steps)
  # The same model on both sides.
  assert model.classifier.count_params() == trainer.model.count_params(), (
      model.classifier.count_params(), trainer.model.count_params())
  times = {}
  names = list(sides)
  for r in range(FLAGS.rounds):
    shift = r % len(names)  # the order rotates: load drifts hit every side alike
    for side in names[shift:] + names[:shift]:
      for key, value in sides[side](steps).items():
        times.setdefault(f"{side}_{key}", []).append(value)
    print(f"{name} round {r}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in times.items()
                                            if k.endswith(("call", "call_cpu"))), flush=True)
  entry = {"rounds": FLAGS.rounds, "steps_per_round": steps,
           "warmup_rounds": FLAGS.warmup_rounds, "machine": machine,
           "config": {k: v for k, v in config.to_dict().items()
                      if k in ("vocab_size", "embedding_size", "hidden_size",
                               "num_hidden_layers", "num_attention_heads", "intermediate_size")},
           "parameters": int(model.classifier.count_params()),
           "ms_per_step_by_round": {k: [round(t, 2) for t in v] for k, v in times.items()}}
  for key, values in times.items():
    entry[key] = {**{k: round(v, 2) for k, v in common.summarize(values).items()},
                  "steps_per_second": round(1000 / statistics.median(values), 5)}
  entry["ratios"] = ratios(times)
  entry["keras_hub"] = keras_hub_note or KERAS_HUB
  entry["uptime_after"] = common.uptime()
  print(f"{name}: " + ", ".join(f"{k} {v}x" for k, v in entry["ratios"].items()), flush=True)
  return entry


# (numerator, denominator) of the ratios reported: whole fit() calls (set-up and first step
# included, as the script's call includes its own) against the script, in wall and CPU time.
RATIOS = {"fit_call_over_script": ("fit_call", "script_call"),
          "fit_call_cpu_over_script_cpu": ("fit_call_cpu", "script_call_cpu"),
          "fit_trained_over_script": ("fit_trained", "script_call"),
          "fit_steady_over_script": ("fit_steady", "script_call"),
          "fit_steady_cpu_over_script_cpu": ("fit_steady_cpu", "script_call_cpu"),
          "keras_hub_call_over_fit_call": ("keras_hub_call", "fit_call"),
          "keras_hub_call_cpu_over_fit_call_cpu": ("keras_hub_call_cpu", "fit_call_cpu"),
          "keras_hub_steady_over_fit_steady": ("keras_hub_steady", "fit_steady"),
          "keras_hub_steady_cpu_over_fit_steady_cpu": ("keras_hub_steady_cpu",
                                                       "fit_steady_cpu")}


def ratios(times):
  """RATIOS of the round times present: the median of the per-round ratios."""
  return {name: round(common.paired_ratio(times[a], times[b]), 3)
          for name, (a, b) in RATIOS.items() if a in times and b in times}


def main(argv):
  del argv
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  with open(QUICKSTART, encoding="utf-8") as f:
    configs = {"quickstart": AlbertConfig.from_dict(json.load(f)),
               "albert_base": AlbertConfig(**common.ALBERT_BASE)}
  unknown = set(FLAGS.models) - set(configs)
  if unknown:
    raise app.UsageError(f"--models: unknown {', '.join(sorted(unknown))}; expected "
                         f"{', '.join(configs)}")
  results = {"models": {}}
  if os.path.exists(FLAGS.output):  # other models' entries stay
    with open(FLAGS.output, encoding="utf-8") as f:
      results = json.load(f)
  results.update({
      "settings": {"batch_size": FLAGS.batch_size, "seq_length": FLAGS.seq_length,
                   "recipe": f"adamw lr {LEARNING_RATE}, warm-up {WARMUP_STEPS} of "
                             f"{TRAIN_STEPS} steps, clip 1.0, head dropout 0.1, no XLA"},
      "keras_hub": (KERAS_HUB_MEASURED if FLAGS.keras_hub
                    else results.get("keras_hub", KERAS_HUB))})
  with tempfile.TemporaryDirectory() as work_dir:
    for name in FLAGS.models:
      results["models"][name] = compare(name, configs[name], work_dir)
      common.write_results(FLAGS.output, results)  # each model as soon as it is measured


if __name__ == "__main__":
  define_flags()
  app.run(main)
