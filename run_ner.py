"""ALBERT named-entity recognition (token classification) on CoNLL or JSON Lines files.

  python run_ner.py --data_dir=conll2003 --output_dir=out/ner \
    --albert_config_file=albert_base/albert_config.json \
    --spm_model_file=albert_base/30k-clean.model --init_checkpoint=albert_base/model.ckpt-best \
    --do_train --do_eval --do_predict --max_seq_length=128 --train_step=3000 --warmup_step=300 \
    --learning_rate=5e-5 --train_batch_size=32 [--export_dir=serving/ner]

--data_dir holds train/dev/test .txt|.conll|.jsonl, or name them with --train_file, --dev_file,
--test_file; --tag_scheme=BIO|BIOES|IO; --labels=O,B-PER,... (default: the training file's).
See docs/token_classification.md.
"""

from albert_tf.common import console  # first: quiets TensorFlow before anything imports it
console.quiet_startup()

from absl import flags

from albert_tf.cli import command
from albert_tf.cli import finetuning_flags

finetuning_flags.define_ner_flags()
finetuning_flags.define_flags(max_seq_length=128, learning_rate=5e-5, save_checkpoints_steps=1000,
                              do_eval=False, train_step=1000, warmup_step=0)


def main(_):
  # (bad flags: an error before TensorFlow)
  task_config, run_config, runtime_config = finetuning_flags.ner_configs()
  from albert_tf.tasks.token_classification import (  # pylint: disable=g-import-not-at-top
      TokenClassificationTask)
  from albert_tf.training import runner  # pylint: disable=g-import-not-at-top
  finetuning_flags.print_results(runner.run(TokenClassificationTask(task_config), run_config,
                                            runtime_config))


if __name__ == "__main__":
  flags.mark_flags_as_required(["output_dir"])
  command.run(main)
