"""ALBERT fine-tuning on GLUE (the official run_classifier.py command line, TF2).

  python run_classifier.py --task_name=MRPC --data_dir=glue --output_dir=out \
    --albert_config_file=albert_base/albert_config.json \
    --spm_model_file=albert_base/30k-clean.model --init_checkpoint=albert_base/model.ckpt-best \
    --do_train --do_eval --do_predict --max_seq_length=128 --train_step=800 --warmup_step=200 \
    --learning_rate=2e-5 --train_batch_size=32 [--export_dir=serving/mrpc]
"""

from albert_tf import console  # first: quiets TensorFlow before anything imports it
console.quiet_startup()

from absl import app
from absl import flags

from albert_tf.errors import run_main
from albert_tf.training import flags as common_flags

flags.DEFINE_string("data_dir", None, "The GLUE data dir (CoLA/, MNLI/, MRPC/, ...).")
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the pretrained model.")
flags.DEFINE_string("task_name", None, "GLUE task: cola, mnli, mismnli, mrpc, qnli, qqp, rte, "
                    "sst-2, sts-b, wnli, ax.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary (when no --spm_model_file).")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model (30k-clean.model).")
flags.DEFINE_string("output_dir", None, "Where checkpoints and results are written.")
flags.DEFINE_string("cached_dir", None, "Where the features TFRecords are cached (default: "
                    "--output_dir); built if missing.")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint: official TF1 or ours.")
flags.DEFINE_string("albert_hub_module_handle", None,
                    "A local ALBERT TF-Hub module (official TF1 format, or export_savedmodel.py's "
                    "output): config, weights and SentencePiece model come from it.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input text (uncased models).")
flags.DEFINE_integer("max_seq_length", 512, "Total sequence length after tokenization.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_bool("do_predict", False, "Whether to predict the test set (GLUE submission file).")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate.")
flags.DEFINE_integer("train_step", 1000, "Total number of training steps to perform.")
flags.DEFINE_integer("warmup_step", 0, "Number of linear learning-rate warmup steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Official flag (the official run keeps every "
                     "checkpoint for the evaluation sweep; so do we).")
flags.DEFINE_string("optimizer", "adamw", "Optimizer to use: adamw or lamb.")
flags.DEFINE_string("export_dir", None, "If set, export the best checkpoint as a SavedModel "
                    "for TF Serving here.")
flags.DEFINE_float("threshold_to_export", float("nan"), "The threshold value that should be "
                   "used with the exported classifier: when set, every signature of the export "
                   "also returns it as `threshold` (official flag).")
flags.DEFINE_float("dropout_prob", 0.1, "Extra: dropout on the pooled output (official 0.1).")
common_flags.define_common_flags()
common_flags.define_export_flags()

FLAGS = flags.FLAGS


def main(_):
  from albert_tf.training import finetuning  # pylint: disable=g-import-not-at-top
  finetuning.run_classifier_from_flags(FLAGS)


if __name__ == "__main__":
  flags.mark_flags_as_required(["data_dir", "task_name", "output_dir"])
  app.run(run_main(main))
