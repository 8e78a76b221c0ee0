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

from albert_tf.cli import flags as cli
from albert_tf.errors import run_main

flags.DEFINE_string("data_dir", None, "The GLUE data dir (CoLA/, MNLI/, MRPC/, ...).")
flags.DEFINE_string("task_name", None, "GLUE task: cola, mnli, mismnli, mrpc, qnli, qqp, rte, "
                    "sst-2, sts-b, wnli, ax.")
flags.DEFINE_string("cached_dir", None, "Where the features TFRecords are cached (default: "
                    "--output_dir); built if missing.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Official flag (the official run keeps every "
                     "checkpoint for the evaluation sweep; so do we).")
flags.DEFINE_float("threshold_to_export", float("nan"), "The threshold value that should be "
                   "used with the exported classifier: when set, every signature of the export "
                   "also returns it as `threshold` (official flag).")
cli.define_model_flags()
cli.define_job_flags(max_seq_length=512, learning_rate=5e-5, save_checkpoints_steps=1000)
cli.define_step_flags(train_step=1000, warmup_step=0)
cli.define_export_flags()
cli.define_runtime_flags()

FLAGS = flags.FLAGS


def main(_):
  from albert_tf.data import glue  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks.glue import ClassificationTask, GlueConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.training import runner  # pylint: disable=g-import-not-at-top
  glue.get_task(FLAGS.task_name)  # an unknown task is the first thing to report
  run_config = cli.step_job_config()
  task = ClassificationTask(GlueConfig(
      task_name=FLAGS.task_name, threshold_to_export=FLAGS.threshold_to_export,
      **cli.sentence_task_values(cli.model_source())))
  cli.print_results(runner.run(task, run_config, cli.runtime_config()))


if __name__ == "__main__":
  flags.mark_flags_as_required(["data_dir", "task_name", "output_dir"])
  app.run(run_main(main))
