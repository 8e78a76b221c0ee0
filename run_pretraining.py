"""Pretrains ALBERT (masked LM + sentence-order prediction) on official pretraining TFRecords.

The flags are the official run_pretraining.py's; the shared extras (--strategy, --precision,
--jit_compile, --gradient_accumulation_steps, ...) come from albert_tf/cli/training_flags.py.
A run killed and started again with the same command resumes from its last checkpoint.
"""

from albert_tf.common import console  # first: quiets TensorFlow before anything imports it
console.quiet_startup()

from absl import flags

from albert_tf.cli import command
from albert_tf.cli import pretraining_flags

FLAGS = flags.FLAGS

flags.DEFINE_string("input_file", None, "Input TF example files (can be a glob or comma separated).")
flags.DEFINE_string("output_dir", None,
                    "The output directory where the model checkpoints will be written.")
flags.DEFINE_integer("max_seq_length", 512,
                     "The maximum total input sequence length after WordPiece tokenization.")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Maximum number of masked LM predictions per sequence.")
flags.DEFINE_bool("do_train", True, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_integer("train_batch_size", 4096, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 64, "Total batch size for eval.")
flags.DEFINE_enum("optimizer", "lamb", ["adamw", "lamb"], "The optimizer for training.")
flags.DEFINE_float("learning_rate", 0.00176, "The initial learning rate.")
flags.DEFINE_float("poly_power", 1.0, "The power of poly decay.")
flags.DEFINE_integer("num_train_steps", 125000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 3125, "Number of warmup steps.")
flags.DEFINE_integer("start_warmup_step", 0, "The starting step of warmup.")
flags.DEFINE_integer("save_checkpoints_steps", 5000, "How often to save the model checkpoint.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "How many checkpoints to keep.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
flags.DEFINE_bool("init_from_group0", False,
                  "Whether to initialize parameters of other groups from group 0")
flags.DEFINE_float("masked_lm_budget", 0, "If >0, the ratio of masked ngrams to unmasked "
                   "ngrams: masks are drawn anew from token_boundary every time an instance is "
                   "read (online masking). Default 0, for offline masking.")
# Extra (not official).
flags.DEFINE_integer("shuffle_seed", None, "Seed of the input shuffling (default: random).")
flags.DEFINE_enum("init_checkpoint_schedule", "restart", ["restart", "continue"],
                  "Extra: where the step counter (and so the learning-rate schedule) of a run "
                  "from --init_checkpoint starts: restart = at 0, warmup included, as the "
                  "official script (which loads only the weights); continue = at the "
                  "checkpoint's global_step. The optimizer state starts fresh either way. When "
                  "--output_dir already holds a checkpoint, the run resumes from it instead and "
                  "--init_checkpoint is not read.")
flags.DEFINE_string("spm_model_file", None,
                    "Extra: the SentencePiece model the records were made with: checked against "
                    "the config's vocab_size and the --init_checkpoint's own SentencePiece model "
                    "(a different vocabulary is an error), and copied into --output_dir.")
pretraining_flags.define_flags()
command.output_flags(output_dir=command.DIRECTORY)


def main(argv):
  del argv
  from albert_tf.tasks.pretraining import PretrainingTask  # pylint: disable=g-import-not-at-top
  from albert_tf.training import runner  # pylint: disable=g-import-not-at-top
  task_config, run_config, runtime_config = pretraining_flags.pretraining_configs()
  summary = runner.run(PretrainingTask(task_config), run_config, runtime_config)
  if summary.get("eval"):
    print(f"eval results written to {FLAGS.output_dir}/eval_results.txt")


if __name__ == "__main__":
  command.run(main)
