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

Rounds of the two alternate (the order rotating), after warm-up rounds that trace and build
everything, so load from the other users of the machine hits both alike. A fit() round's steady
time is the span from its first step's end to its last's, over steps - 1 (fit's per-call set-up
and the first step excluded, as the script's tracing is); its whole call time per step is kept
too. The headline is the median over rounds of fit's steady time / the script's time per step.

Run: nice -n -10 .venv/bin/python -m bench.speed.fit_vs_script [--models=quickstart,albert_base]
  [--rounds 6 --steps_per_round 5]
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
  flags.DEFINE_string("output", os.path.join(common.REPO, "bench", "speed", "results",
                                             "fit_vs_script.json"), "Results file.")


SPM_MODEL = os.path.join(common.REPO, "tests", "fixtures", "official_training", "spm.model")
QUICKSTART = os.path.join(common.REPO, "configs", "albert_quickstart.json")
# run_classifier.py's recipe: --learning_rate, and a schedule long enough that the timed steps
# run at warm-up and decay rates alike (the rate does not change a step's cost).
LEARNING_RATE, TRAIN_STEPS, WARMUP_STEPS = 5e-5, 1000, 100
KERAS_HUB = ("not measured: keras-hub needs Keras 3 with a backend of its own (the loader check "
             "of tests/fixtures/make_keras_hub_reference.py ran it once in a separate JAX venv, "
             "since removed); no such venv could be built and timed on this shared 2-core "
             "machine in the time given")


def text_pairs(batch, seed=0):
  """`batch` pairs of random English-like words, each side long enough to fill the sequence."""
  rng = np.random.default_rng(seed)
  words = ("the model reads each sentence of a document and learns which one comes first "
           "while a second network predicts masked pieces of text from their context").split()
  def text():
    return " ".join(rng.choice(words, size=80))
  return [text() for _ in range(batch)], [text() for _ in range(batch)], \
      rng.integers(0, 2, size=batch).astype(np.int32)


def build_fit(config, texts_a, texts_b, labels):
  """(run(steps) -> (call seconds, steady seconds per step), model) of TextClassifier.fit()."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from albert_tf.training.text_models import TextClassifier  # pylint: disable=g-import-not-at-top

  class StepEnds(tf_keras.callbacks.Callback):
    def __init__(self):
      super().__init__()
      self.ends = []

    def on_train_batch_end(self, batch, logs=None):
      self.ends.append(time.perf_counter())

  model = TextClassifier(config, 2, SPM_MODEL, sequence_length=FLAGS.seq_length, text_pair=True)
  model.compile(learning_rate=LEARNING_RATE, num_train_steps=TRAIN_STEPS,
                num_warmup_steps=WARMUP_STEPS)
  dataset = tf.data.Dataset.from_tensors(
      ((tf.constant(texts_a), tf.constant(texts_b)), tf.constant(labels))).repeat()

  def run(steps):
    ends = StepEnds()
    start = time.perf_counter()
    model.fit(dataset, epochs=1, steps_per_epoch=steps, callbacks=[ends], verbose=0)
    call = time.perf_counter() - start
    return call, (ends.ends[-1] - ends.ends[0]) / (len(ends.ends) - 1)
  return run, model


def build_script(config, features, labels, work_dir):
  """(run(steps) -> seconds, trainer) of run_classifier.py's train loop on in-memory ids."""
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
    start = time.perf_counter()
    loop(steps)
    return time.perf_counter() - start
  return run, trainer


def compare(name, config, work_dir):
  """Times both sides on `config`; returns its results entry."""
  machine = common.machine()
  texts_a, texts_b, labels = text_pairs(FLAGS.batch_size)
  fit, model = build_fit(config, texts_a, texts_b, labels)
  ids = model.preprocessor((np.array(texts_a, object), np.array(texts_b, object)))
  features = {k: ids[k] for k in ("input_ids", "input_mask", "segment_ids")}
  script, trainer = build_script(config, features,
                                 {"label_ids": labels,
                                  "is_real_example": np.ones(len(labels), np.float32)}, work_dir)
  steps = FLAGS.steps_per_round
  for _ in range(FLAGS.warmup_rounds):
    fit(steps)
    script(steps)
  # The same model on both sides.
  assert model.classifier.count_params() == trainer.model.count_params(), (
      model.classifier.count_params(), trainer.model.count_params())
  times = {"fit_steady": [], "fit_call": [], "script": []}
  for r in range(FLAGS.rounds):
    for side in (("fit", "script") if r % 2 == 0 else ("script", "fit")):
      if side == "fit":
        call, steady = fit(steps)
        times["fit_call"].append(call / steps * 1000)
        times["fit_steady"].append(steady * 1000)
      else:
        times["script"].append(script(steps) / steps * 1000)
    print(f"{name} round {r}: " + ", ".join(f"{k} {v[-1]:.1f} ms" for k, v in times.items()),
          flush=True)
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
  entry["fit_steady_over_script"] = round(
      common.paired_ratio(times["fit_steady"], times["script"]), 3)
  entry["fit_call_over_script"] = round(
      common.paired_ratio(times["fit_call"], times["script"]), 3)
  entry["uptime_after"] = common.uptime()
  print(f"{name}: fit steady / script time per step {entry['fit_steady_over_script']}x, "
        f"fit whole call / script {entry['fit_call_over_script']}x", flush=True)
  return entry


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
      "keras_hub": KERAS_HUB})
  with tempfile.TemporaryDirectory() as work_dir:
    for name in FLAGS.models:
      results["models"][name] = compare(name, configs[name], work_dir)
      common.write_results(FLAGS.output, results)  # each model as soon as it is measured


if __name__ == "__main__":
  define_flags()
  app.run(main)
