"""ALBERT fine-tuning on GLUE (the official run_classifier.py command line, TF2), or on your own
TSV / CSV / JSON Lines files.

  python run_classifier.py --task_name=MRPC --data_dir=glue --output_dir=out \
    --albert_config_file=albert_base/albert_config.json \
    --spm_model_file=albert_base/30k-clean.model --init_checkpoint=albert_base/model.ckpt-best \
    --do_train --do_eval --do_predict --max_seq_length=128 --train_step=800 --warmup_step=200 \
    --learning_rate=2e-5 --train_batch_size=32 [--export_dir=serving/mrpc]

Own data: --task_name=custom --data_dir=<dir with train.csv, dev.csv, test.csv> \
  --text_a_column=text [--text_b_column=...] [--label_column=label] [--labels=neg,pos | \
  --regression] [--noheader] [--data_format=tsv|csv|jsonl], other flags as above.
"""

from albert_tf.common import console  # first: quiets TensorFlow before anything imports it
console.quiet_startup()

from absl import flags

from albert_tf.cli import command
from albert_tf.cli import finetuning_flags

flags.DEFINE_string("data_dir", None, "The GLUE data dir (CoLA/, MNLI/, MRPC/, ...); own data: "
                    "the dir of train|dev|test.tsv|csv|jsonl.")
flags.DEFINE_string("task_name", None, "GLUE task: cola, mnli, mismnli, mrpc, qnli, qqp, rte, "
                    "sst-2, sts-b, wnli, ax; or custom (own data: see --text_a_column), or a "
                    "name of yours with the own-data flags.")
flags.DEFINE_string("cached_dir", None, "Where the features TFRecords are cached (default: "
                    "--output_dir); built if missing.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Official flag (the official run keeps every "
                     "checkpoint for the evaluation sweep; so do we).")
flags.DEFINE_float("threshold_to_export", float("nan"), "The threshold value that should be "
                   "used with the exported classifier: when set, every signature of the export "
                   "also returns it as `threshold` (official flag).")
finetuning_flags.define_flags(max_seq_length=512, learning_rate=5e-5, save_checkpoints_steps=1000,
                              do_eval=False, train_step=1000, warmup_step=0,
                              custom_task_flags=True)
command.output_flags(cached_dir=command.DIRECTORY)


def main(_):
  # (bad flags: an error before TensorFlow)
  task_config, run_config, runtime_config = finetuning_flags.classifier_configs()
  from albert_tf.tasks.glue import ClassificationTask  # pylint: disable=g-import-not-at-top
  from albert_tf.training import runner  # pylint: disable=g-import-not-at-top
  finetuning_flags.print_results(runner.run(ClassificationTask(task_config), run_config,
                                            runtime_config))


if __name__ == "__main__":
  flags.mark_flags_as_required(["data_dir", "task_name", "output_dir"])
  command.run(main)
