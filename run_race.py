"""ALBERT fine-tuning on RACE (the official run_race.py command line, TF2).

  python run_race.py --data_dir=data --output_dir=out --albert_config_file=albert_config.json \
    --spm_model_file=30k-clean.model --init_checkpoint=model.ckpt-best --do_train --do_eval \
    --max_seq_length=512 --max_qa_length=128 --train_step=12000 --warmup_step=1000
"""

from albert_tf.common import console  # first: quiets TensorFlow before anything imports it
console.quiet_startup()

from absl import flags

from albert_tf.cli import command
from albert_tf.cli import finetuning_flags

flags.DEFINE_string("data_dir", None, "Directory holding RACE/{train,dev,test}/{middle,high}.")
flags.DEFINE_string("task_name", "race", "The name of the task to train.")
flags.DEFINE_string("train_file", None, "Preprocessed train TFRecord; generated if missing.")
flags.DEFINE_string("eval_file", None, "Preprocessed eval TFRecord; generated if missing.")
flags.DEFINE_string("predict_file", None, "Preprocessed predict TFRecord; generated if missing.")
flags.DEFINE_integer("max_qa_length", 128, "Max tokens of question + option (kept from the end).")
flags.DEFINE_integer("num_keep_checkpoint", 5, "Official flag (every checkpoint is evaluated).")
flags.DEFINE_bool("high_only", False, "Whether to only run the model on the high school set.")
flags.DEFINE_bool("middle_only", False, "Whether to only run the model on the middle school set.")
flags.DEFINE_string("cached_dir", None, "Extra: where features are cached when --train_file "
                    "etc. are not given (default --output_dir).")
# Official run_race: train and evaluate by default.
finetuning_flags.define_flags(max_seq_length=512, learning_rate=1e-5, save_checkpoints_steps=100,
                              do_train=True, do_eval=True, train_step=12000, warmup_step=1000)
command.output_flags(cached_dir=command.DIRECTORY)
command.output_flags(train_file=command.FILE, eval_file=command.FILE, predict_file=command.FILE,
                     written_if_missing=True)  # preprocessed features: read when they exist


def main(_):
  from albert_tf.tasks.race import RaceTask  # pylint: disable=g-import-not-at-top
  from albert_tf.training import runner  # pylint: disable=g-import-not-at-top
  task_config, run_config, runtime_config = finetuning_flags.race_configs()
  finetuning_flags.print_results(runner.run(RaceTask(task_config), run_config, runtime_config))


if __name__ == "__main__":
  flags.mark_flags_as_required(["data_dir", "output_dir"])
  command.run(main)
