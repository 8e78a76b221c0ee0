"""Early exit's patience sweep on one fine-tuned run: the dev-set accuracy and mean exit layer of
every patience 1-6 beside full depth (README.md beside this file; run.sh makes the run).

  .venv/bin/python -m bench.experiments.early_exit_accuracy.sweep --run_dir=DIR --data_dir=DIR \
      --spm_model_file=FILE [--pretrain_dirs=DIR,...] [--output_json=FILE]

The run's best checkpoint (model.ckpt-best) is evaluated on its dev set once at full depth with
every layer's logits (`layer_logits`); the patience rule (heads/early_exit.py
patience_exit_reference, which tests/models/test_early_exit.py checks against the loop) gives
each patience's answers and exit layers from them, beside the full model's accuracy.
"""

import os

from absl import app
from absl import flags
import numpy as np

from albert_tf import AlbertConfig
from albert_tf.checkpoints.init import restore_model_weights
from albert_tf.heads.early_exit import patience_exit_reference
from albert_tf.tasks.glue import ClassificationTask, GlueConfig
from bench import common

FLAGS = flags.FLAGS
flags.DEFINE_string("run_dir", None, "The fine-tuned early-exit run's --output_dir.")
flags.DEFINE_string("data_dir", None, "Its --data_dir (GLUE layout, MRPC).")
flags.DEFINE_string("spm_model_file", None, "Its SentencePiece model.")
flags.DEFINE_integer("max_seq_length", 64, "Its --max_seq_length.")
flags.DEFINE_string("pretrain_dirs", None, "Comma-separated pretraining output dirs the run "
                    "started from; their held-out eval_results.txt goes in the results.")
flags.DEFINE_string("setup", None, "How the model was made, for the results file.")
flags.DEFINE_string("output_json", None, "Where the results go (default: "
                    "bench/experiments/results/early_exit_accuracy.json).")
flags.mark_flag_as_required("run_dir")

RESULTS_DIR = os.path.join(common.REPO, "bench", "experiments", "results")


def _accuracy():
  """The sweep on FLAGS.run_dir: a row per patience (accuracy, mean exit layer, points against
  full depth), every layer's own accuracy, the majority class and the run's own evaluation."""
  run_dir = FLAGS.run_dir
  config = AlbertConfig.from_json_file(os.path.join(run_dir, "albert_config.json"))
  task = ClassificationTask(GlueConfig(
      task_name="MRPC", albert_config=config, data_dir=FLAGS.data_dir,
      max_seq_length=FLAGS.max_seq_length, cached_dir=run_dir,
      spm_model_file=FLAGS.spm_model_file, early_exit="patience"))
  model = task.build_model()
  restore_model_weights(model, os.path.join(run_dir, "model.ckpt-best"))
  logits, labels = [], []
  for features, batch_labels in task.build_inputs("eval", 64):
    outputs = model(features, training=False)
    real = batch_labels["is_real_example"].numpy() > 0
    logits.append(outputs["layer_logits"].numpy()[real])
    labels.append(batch_labels["label_ids"].numpy()[real])
  layer_logits, labels = np.concatenate(logits), np.concatenate(labels)
  layers = layer_logits.shape[1]
  full = float((layer_logits[:, -1].argmax(-1) == labels).mean())
  rows = [{"patience": "full depth", "accuracy": full, "mean_exit_layer": float(layers)}]
  for patience in range(1, 7):
    exit_layer, chosen = patience_exit_reference(layer_logits, patience)
    rows.append({"patience": patience,
                 "accuracy": float((chosen.argmax(-1) == labels).mean()),
                 "mean_exit_layer": float(exit_layer.mean()),
                 "points_vs_full": 100 * (float((chosen.argmax(-1) == labels).mean()) - full)})
  per_layer = [float((layer_logits[:, l].argmax(-1) == labels).mean()) for l in range(layers)]
  # What the run's own --do_eval measured through the loop (at its --early_exit_patience).
  loop = _read_results(os.path.join(run_dir, "eval_results.txt"),
                       ("eval_accuracy", "eval_mean_exit_layer"))
  majority = float(np.bincount(labels).max() / len(labels))
  results = {"rows": rows, "per_layer_accuracy": per_layer, "dev_examples": int(len(labels)),
             "majority_class_accuracy": majority, "run_dir": run_dir,
             "run_eval_through_the_loop": loop, "machine": common.machine()}
  # The pretraining runs the model started from: their held-out evaluation, if they ran one.
  pretraining = {}
  for pretrain_dir in filter(None, (FLAGS.pretrain_dirs or "").split(",")):
    pretraining[pretrain_dir] = _read_results(os.path.join(pretrain_dir, "eval_results.txt"), (
        "masked_lm_accuracy", "masked_lm_baseline_accuracy", "sentence_order_accuracy",
        "global_step"))
  if pretraining:
    results["pretraining_heldout_eval"] = pretraining
  if FLAGS.setup:
    results["setup"] = FLAGS.setup
  return results


def _read_results(path, keys):
  """`key = value` lines of an eval_results.txt (the last of a repeated key), for `keys`; {} if
  the file does not exist."""
  found = {}
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      for line in f:
        key, _, value = line.strip().partition(" = ")
        if key in keys:
          found[key] = float(value)
  return found


def main(_):
  results = _accuracy()
  for r in results["rows"]:
    print(f"{str(r['patience']):<12} accuracy {r['accuracy']:.4f}  mean exit layer "
          f"{r['mean_exit_layer']:.2f}")
  print("per-layer accuracy:", " ".join(f"{a:.3f}" for a in results["per_layer_accuracy"]))
  print(f"majority class: {results['majority_class_accuracy']:.4f}")
  common.write_results(FLAGS.output_json or os.path.join(RESULTS_DIR, "early_exit_accuracy.json"),
                       results)


if __name__ == "__main__":
  app.run(main)
