"""ALBERT fine-tuning on RACE (the official run_race.py command line, TF2).

  python run_race.py --data_dir=data --output_dir=out --albert_config_file=albert_config.json \
    --spm_model_file=30k-clean.model --init_checkpoint=model.ckpt-best --do_train --do_eval \
    --max_seq_length=512 --max_qa_length=128 --train_step=12000 --warmup_step=1000
"""

from albert_tf import console  # first: quiets TensorFlow before anything imports it
console.quiet_startup()

from absl import app
from absl import flags

from albert_tf.errors import run_main
from albert_tf.training import flags as common_flags

flags.DEFINE_string("data_dir", None, "Directory holding RACE/{train,dev,test}/{middle,high}.")
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the pretrained model.")
flags.DEFINE_string("task_name", "race", "The name of the task to train.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary (when no --spm_model_file).")
flags.DEFINE_string("train_file", None, "Preprocessed train TFRecord; generated if missing.")
flags.DEFINE_string("eval_file", None, "Preprocessed eval TFRecord; generated if missing.")
flags.DEFINE_string("predict_file", None, "Preprocessed predict TFRecord; generated if missing.")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model (30k-clean.model).")
flags.DEFINE_string("output_dir", None, "Where checkpoints and results are written.")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint: official TF1 or ours.")
flags.DEFINE_string("albert_hub_module_handle", None,
                    "A local ALBERT TF-Hub module (official TF1 format, or export_savedmodel.py's "
                    "output): config, weights and SentencePiece model come from it.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input text (uncased models).")
flags.DEFINE_float("dropout_prob", 0.1, "Dropout on the pooled output.")
flags.DEFINE_integer("max_seq_length", 512, "Total sequence length after tokenization.")
flags.DEFINE_integer("max_qa_length", 128, "Max tokens of question + option (kept from the end).")
flags.DEFINE_integer("num_keep_checkpoint", 5, "Official flag (every checkpoint is evaluated).")
flags.DEFINE_bool("high_only", False, "Whether to only run the model on the high school set.")
flags.DEFINE_bool("middle_only", False, "Whether to only run the model on the middle school set.")
flags.DEFINE_bool("do_train", True, "Whether to run training.")
flags.DEFINE_bool("do_eval", True, "Whether to run eval on the dev set.")
flags.DEFINE_bool("do_predict", False, "Whether to run the model on the test set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
flags.DEFINE_float("learning_rate", 1e-5, "The initial learning rate.")
flags.DEFINE_integer("train_step", 12000, "Total number of training steps to perform.")
flags.DEFINE_integer("warmup_step", 1000, "Number of linear learning-rate warmup steps.")
flags.DEFINE_integer("save_checkpoints_steps", 100, "How often to save the model checkpoint.")
flags.DEFINE_string("optimizer", "adamw", "Extra: optimizer (adamw as the official, or lamb).")
flags.DEFINE_string("cached_dir", None, "Extra: where features are cached when --train_file "
                    "etc. are not given (default --output_dir).")
flags.DEFINE_string("export_dir", None, "If set, export the best checkpoint as a SavedModel "
                    "for TF Serving here.")
common_flags.define_common_flags()
common_flags.define_export_flags()

FLAGS = flags.FLAGS


def main(_):
  from albert_tf.training import finetuning  # pylint: disable=g-import-not-at-top
  finetuning.run_race_from_flags(FLAGS)


if __name__ == "__main__":
  flags.mark_flags_as_required(["data_dir", "output_dir"])
  app.run(run_main(main))
