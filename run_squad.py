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

from albert_tf import console  # first: quiets TensorFlow before anything imports it
console.quiet_startup()

from absl import app
from absl import flags

from albert_tf.errors import run_main
from albert_tf.training import flags as common_flags

# Official flags (run_squad_v1.py / run_squad_v2.py), official defaults.
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the pretrained model.")
flags.DEFINE_string("vocab_file", None, "Official flag; SQuAD needs --spm_model_file.")
flags.DEFINE_string("spm_model_file", None, "The SentencePiece model (30k-clean.model).")
flags.DEFINE_string("output_dir", None, "Where checkpoints, predictions and results go.")
flags.DEFINE_string("train_file", None, "SQuAD json for training, e.g. train-v1.1.json.")
flags.DEFINE_string("predict_file", None, "SQuAD json for predictions, e.g. dev-v1.1.json.")
flags.DEFINE_string("train_feature_file", None, "Training feature TFRecord: written if missing, "
                    "else reused (default: <output_dir>/squad_<v>_train.tf_record).")
flags.DEFINE_string("predict_feature_file", None, "Prediction feature TFRecord: written if "
                    "missing, else reused (default: in --output_dir).")
flags.DEFINE_string("predict_feature_left_file", None, "What prediction post-processing needs "
                    "besides the TFRecord (token maps): written if missing, else reused.")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint: official TF1 or ours.")
flags.DEFINE_string("albert_hub_module_handle", None,
                    "A local ALBERT TF-Hub module (official TF1 format, or export_savedmodel.py's "
                    "output): config, weights and SentencePiece model come from it.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input text (uncased models).")
flags.DEFINE_integer("max_seq_length", 384, "Total sequence length after tokenization.")
flags.DEFINE_integer("doc_stride", 128, "Stride between passage windows (in pieces).")
flags.DEFINE_integer("max_query_length", 64, "Questions are truncated to this many pieces.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_predict", False, "Whether to predict and evaluate --predict_file.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predictions.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for AdamW.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training used for linear warmup.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_integer("n_best_size", 20, "Number of n-best predictions in nbest_predictions.json.")
flags.DEFINE_integer("max_answer_length", 30, "Maximum answer length in pieces.")
flags.DEFINE_bool("use_einsum", True, "Official v1 flag; accepted, no effect (we always use "
                  "einsum).")
flags.DEFINE_string("export_dir", None, "If set, export the best (else latest) checkpoint here "
                    "as a SavedModel (serving_default: input_ids, input_mask, segment_ids[, "
                    "p_mask] -> the model outputs).")
flags.DEFINE_integer("start_n_top", 5, "v2: beam size for the start positions.")
flags.DEFINE_integer("end_n_top", 5, "v2: beam size for the end positions.")
flags.DEFINE_float("dropout_prob", 0.1, "v2: dropout in the answerability classifier.")
# Extras (not official).
flags.DEFINE_bool("version_2_with_negative", None, "SQuAD v2.0 (unanswerable questions, the "
                  "official run_squad_v2.py head) or v1.1 (run_squad_v1.py). Default: v2.0 iff "
                  "--train_file (else --predict_file) is a v2.0 file.")
flags.DEFINE_float("null_score_diff_threshold", None, "v2: predict \"\" when the null odds reach "
                   "this; default (official): the best-F1 threshold on --predict_file.")
common_flags.define_common_flags()
common_flags.define_export_flags()

FLAGS = flags.FLAGS


def main(_):
  from albert_tf.training import squad_task  # pylint: disable=g-import-not-at-top
  squad_task.run_squad_from_flags(FLAGS)


def run(version_2_with_negative=None):
  """Parses the command line and runs; run_squad_v1.py / run_squad_v2.py fix the version."""
  if version_2_with_negative is not None:
    FLAGS.set_default("version_2_with_negative", version_2_with_negative)
  # The official scripts require --spm_model_file too; ours says so in its own error.
  flags.mark_flags_as_required(["output_dir"])  # config: --albert_config_file or a hub module
  app.run(run_main(main))


if __name__ == "__main__":
  run()
