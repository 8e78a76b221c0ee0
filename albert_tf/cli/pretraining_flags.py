"""The pretraining family's flags -> typed configs: run_pretraining.py and
create_pretraining_data.py.

Each script defines its official flags in its own file; run_pretraining.py adds the groups it
shares with the fine-tuning scripts (`define_flags`: the model and the runtime) and gets its
configs from `pretraining_configs`; create_pretraining_data.py gets its InstanceOptions from
`instance_options`.
"""

from absl import flags

from albert_tf.cli import training_flags
from albert_tf.cli.command import require_action, require_flags
from albert_tf.config import AlbertConfig
from albert_tf.data.pretraining import instances
from albert_tf.errors import AlbertError

FLAGS = flags.FLAGS


def define_flags():
  """run_pretraining.py's groups shared with the fine-tuning scripts: --albert_config_file,
  --init_checkpoint and the runtime flags."""
  training_flags.define_model_flags()
  training_flags.define_runtime_flags()


def pretraining_configs(f=FLAGS):
  """(PretrainingConfig, RunConfig, RuntimeConfig) of run_pretraining.py."""
  from albert_tf.tasks.pretraining import (  # lazy: TensorFlow, after the flags are checked
      PretrainingConfig)
  from albert_tf.training.runner import RunConfig  # lazy: TensorFlow, after the flags are checked
  require_flags(("albert_config_file", "input_file", "output_dir"), f)
  require_action(("do_train", "do_eval"), f)
  if f.num_train_steps <= 0:  # (RunConfig checks it too, under run_classifier's name)
    raise AlbertError(f"--num_train_steps={f.num_train_steps} is invalid: expected > 0")
  run_config = RunConfig(
      output_dir=f.output_dir, do_train=f.do_train, do_eval=f.do_eval,
      train_batch_size=f.train_batch_size, eval_batch_size=f.eval_batch_size,
      train_steps=f.num_train_steps, warmup_steps=f.num_warmup_steps,
      start_warmup_step=f.start_warmup_step, poly_power=f.poly_power,
      learning_rate=f.learning_rate, optimizer=f.optimizer,
      save_checkpoints_steps=f.save_checkpoints_steps,
      keep_checkpoint_max=f.keep_checkpoint_max, max_eval_steps=f.max_eval_steps)
  task_config = PretrainingConfig(
      albert_config=AlbertConfig.from_json_file(f.albert_config_file),
      input_file=f.input_file, max_seq_length=f.max_seq_length,
      max_predictions_per_seq=f.max_predictions_per_seq, init_checkpoint=f.init_checkpoint,
      init_from_group0=f.init_from_group0, shuffle_seed=f.shuffle_seed,
      shuffle_train_input=f.shuffle_train_input, masked_lm_budget=f.masked_lm_budget,
      init_checkpoint_schedule=f.init_checkpoint_schedule, spm_model_file=f.spm_model_file)
  return task_config, run_config, training_flags.runtime_config(f)


def instance_options(f=FLAGS):
  """InstanceOptions of create_pretraining_data.py, after its required flags are checked."""
  require_flags(("input_file", "output_file"), f)
  if not f.spm_model_file and not f.vocab_file:
    raise AlbertError("--spm_model_file (or --vocab_file for WordPiece) is required")
  if f.input_file_mode not in ("r", "rb"):
    raise AlbertError(f"--input_file_mode={f.input_file_mode}: expected 'r' or 'rb'")
  return instances.InstanceOptions(
      max_seq_length=f.max_seq_length, max_predictions_per_seq=f.max_predictions_per_seq,
      masked_lm_prob=f.masked_lm_prob, short_seq_prob=f.short_seq_prob, ngram=f.ngram,
      do_whole_word_mask=f.do_whole_word_mask, favor_shorter_ngram=f.favor_shorter_ngram,
      do_permutation=f.do_permutation, random_next_sentence=f.random_next_sentence,
      dupe_factor=f.dupe_factor)
