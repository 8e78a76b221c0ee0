"""ALBERT on SQuAD v1.1 / v2.0 (the official run_squad_v1.py / run_squad_v2.py command lines, TF2).

  python run_squad.py --albert_config_file=albert_base/albert_config.json \
    --spm_model_file=albert_base/30k-clean.model --init_checkpoint=albert_base/model.ckpt-best \
    --train_file=train-v1.1.json --predict_file=dev-v1.1.json \
    --train_feature_file=cache/train.tf_record --predict_feature_file=cache/dev.tf_record \
    --predict_feature_left_file=cache/dev_left --output_dir=out --do_train --do_predict \
    --max_seq_length=384 --doc_stride=128 --max_query_length=64 --train_batch_size=48 \
    --learning_rate=5e-5 --num_train_epochs=2.0 [--version_2_with_negative]

v1.1 uses the span head of run_squad_v1.py; v2.0 the ALBERT v2.0 head (start, start-conditioned
end with --start_n_top x --end_n_top beam, answerability) of run_squad_v2.py. The version follows
the data (a v2.0 --train_file / --predict_file), so both official command lines work unchanged;
--version_2_with_negative / --noversion_2_with_negative force it. Prediction evaluates every
checkpoint in --output_dir with the official SQuAD
metric, keeps the best F1 (eval_results.txt) and writes its predictions.json,
nbest_predictions.json and (v2) null_odds.json.
"""

from albert_tf.common import console  # first: quiets TensorFlow before anything imports it
console.quiet_startup()

from absl import flags

from albert_tf.cli import command
from albert_tf.cli import finetuning_flags

# Official flags (run_squad_v1.py / run_squad_v2.py), official defaults.
flags.DEFINE_string("train_file", None, "SQuAD json for training, e.g. train-v1.1.json.")
flags.DEFINE_string("predict_file", None, "SQuAD json for predictions, e.g. dev-v1.1.json.")
flags.DEFINE_string("train_feature_file", None, "Training feature TFRecord: written if missing, "
                    "else reused (default: <output_dir>/squad_<v>_train.tf_record).")
flags.DEFINE_string("predict_feature_file", None, "Prediction feature TFRecord: written if "
                    "missing, else reused (default: in --output_dir).")
flags.DEFINE_string("predict_feature_left_file", None, "What prediction post-processing needs "
                    "besides the TFRecord (token maps): written if missing, else reused.")
flags.DEFINE_integer("doc_stride", 128, "Stride between passage windows (in pieces).")
flags.DEFINE_integer("max_query_length", 64, "Questions are truncated to this many pieces.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training used for linear warmup.")
flags.DEFINE_integer("n_best_size", 20, "Number of n-best predictions in nbest_predictions.json.")
flags.DEFINE_integer("max_answer_length", 30, "Maximum answer length in pieces.")
flags.DEFINE_bool("use_einsum", True, "Official v1 flag; accepted, no effect (we always use "
                  "einsum).")
flags.DEFINE_integer("start_n_top", 5, "v2: beam size for the start positions.")
flags.DEFINE_integer("end_n_top", 5, "v2: beam size for the end positions.")
# Extras (not official).
flags.DEFINE_bool("version_2_with_negative", None, "SQuAD v2.0 (unanswerable questions, the "
                  "official run_squad_v2.py head) or v1.1 (run_squad_v1.py). Default: v2.0 iff "
                  "--train_file (else --predict_file) is a v2.0 file.")
flags.DEFINE_float("null_score_diff_threshold", None, "v2: predict \"\" when the null odds reach "
                   "this; default (official): the best-F1 threshold on --predict_file.")
finetuning_flags.define_flags(max_seq_length=384, learning_rate=5e-5, save_checkpoints_steps=1000)
command.output_flags(train_feature_file=command.FILE, predict_feature_file=command.FILE,
                     predict_feature_left_file=command.FILE, written_if_missing=True)  # caches

FLAGS = flags.FLAGS


def main(_):
  from albert_tf.tasks.squad import SquadTask  # pylint: disable=g-import-not-at-top
  from albert_tf.training import runner  # pylint: disable=g-import-not-at-top
  task = SquadTask(finetuning_flags.squad_config())
  # --predict_file is read only when predicting (a --do_train or --export_dir run needs none).
  run_config, runtime_config = finetuning_flags.squad_run_configs(
      FLAGS.do_predict and task.has_gold_answers)
  finetuning_flags.print_results(runner.run(task, run_config, runtime_config))


def run(version_2_with_negative=None):
  """Parses the command line and runs; run_squad_v1.py / run_squad_v2.py fix the version."""
  if version_2_with_negative is not None:
    FLAGS.set_default("version_2_with_negative", version_2_with_negative)
  # The official scripts require --spm_model_file too; ours says so in its own error.
  flags.mark_flags_as_required(["output_dir"])  # config: --albert_config_file or a hub module
  command.run(main)


if __name__ == "__main__":
  run()
