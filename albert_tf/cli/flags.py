"""The command-line layer: the flags the scripts share, defined once, and each script's flags ->
typed configs.

A top-level script defines what only it has in its own file and the shared groups here, then gets
the library's dataclasses (its task config, RunConfig, RuntimeConfig) from its function below:

  run_pretraining.py                 pretraining_configs
  run_classifier.py                  classifier_configs (GLUE, or own data: custom_task_spec)
  run_race.py                        race_configs
  run_squad.py (run_squad_v1/_v2)    squad_config, then squad_run_config (it asks the task
                                     whether --predict_file has answers)
  create_pretraining_data.py         instance_options
  every run_* script                 runtime_config

The commands whose flags all live in this package are beside this module and start through
`run_command`: convert.py (`python -m albert_tf.checkpoints.convert`), export.py
(export_savedmodel.py) and tools.py (`python -m albert_tf.tools.<tool>`). Only this package and
the top-level scripts define or read absl flags; nothing else under albert_tf/ does
(tests/cli/test_no_flags_below_cli.py).

Official flags keep their official names, defaults and meaning; extras say "Extra:".
"""

import os
import sys

from absl import app
from absl import flags

from albert_tf.common import fileio
from albert_tf.config import AlbertConfig
from albert_tf.data import custom_task, glue
from albert_tf.data.bucketing import parse_bucket_boundaries
from albert_tf.data.pretraining import instances
from albert_tf.errors import AlbertError, run_main
from albert_tf.training import cluster
from albert_tf.training import preemption
from albert_tf.training.runtime import RuntimeConfig

FLAGS = flags.FLAGS


def _list_in_help(names):
  """Lists flags defined here in the running command's --help, which absl limits to the flags
  of the main module (the script, or the module run with -m)."""
  for name in names:
    FLAGS.register_key_flag_for_module(sys.argv[0], FLAGS[name])


def _define(define, name, *args, **kwargs):
  """Defines a flag unless a script already has it (the groups may overlap)."""
  if name not in FLAGS:
    define(name, *args, **kwargs)
    _list_in_help([name])


def parse_flags(argv):
  """absl's flag parsing, with a bad value or an unknown flag reported as every bad input is:
  one `error:` line and exit status 2 (absl's own: a FATAL line and status 1)."""
  try:
    return FLAGS(argv)
  except flags.Error as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)


# What a command writes at a path flag: fileio's kinds, and a comma-separated list of files.
DIRECTORY, FILE, PREFIX = fileio.DIRECTORY, fileio.FILE, fileio.PREFIX
FILE_LIST = "file list"

# The flags naming paths the running command writes: name -> (kind, or a function of the parsed
# flags returning one; written only when missing). Declared with `output_flags`, checked by
# `check_output_flags` before the command's main runs.
_OUTPUT_FLAGS = {}


def output_flags(written_if_missing=False, **kinds):
  """Declares flags of the running command as paths it writes, e.g.
  `output_flags(output_dir=DIRECTORY)`; a kind may be a function of the parsed flags (the
  converter's --output_checkpoint is a directory for hf). `written_if_missing`: caches, only
  read when they exist."""
  for name, kind in kinds.items():
    _OUTPUT_FLAGS[name] = (kind, written_if_missing)


def _declared_outputs(f=FLAGS):
  """(flag name, path, kind, written_if_missing) of every path the declared flags name."""
  for name, (kind, written_if_missing) in _OUTPUT_FLAGS.items():
    if name not in f or not f[name].value:
      continue
    kind = kind(f) if callable(kind) else kind
    paths = f[name].value.split(",") if kind == FILE_LIST else [f[name].value]
    for path in paths:
      yield name, path.strip(), FILE if kind == FILE_LIST else kind, written_if_missing


def check_output_flags(f=FLAGS):
  """One-line error for the first declared output path the command could not write: a file
  where a directory is expected or the reverse, a path under a regular file, a directory that
  is not writable (see fileio.output_path_problem)."""
  for name, path, kind, written_if_missing in _declared_outputs(f):
    problem = fileio.output_path_problem(path, kind, written_if_missing)
    if problem:
      raise AlbertError(f"--{name}={path}: {problem}")


def output_locations(f=FLAGS):
  """[(directory, names)] where the declared output flags write, for StopCommand: a directory
  output itself (any name), else the file's directory (names starting with its name, and a
  checkpoint prefix's `checkpoint` state file)."""
  locations = []
  for _, path, kind, _ in _declared_outputs(f):
    if kind == DIRECTORY:
      locations.append((path, None))
    else:
      names = [os.path.basename(path)] + (["checkpoint"] if kind == PREFIX else [])
      locations.append((os.path.dirname(path) or ".", names))
  return locations


def run(main):
  """Runs a script's `main(argv)`: flags parsed by `parse_flags`, the output paths checked
  (`check_output_flags`), errors by `run_main`."""

  def checked_main(argv):
    check_output_flags()
    return main(argv)

  app.run(run_main(checked_main), flags_parser=parse_flags)


def run_command(define_flags, main, stop_on_signals=False):
  """Runs a command whose flags live in albert_tf/cli/: defines them (listed in its --help),
  parses the command line and calls `main` (bad input: one `error:` line, exit status 2).

  stop_on_signals: SIGTERM/SIGINT end the command with one line and exit status 42, leaving
    none of its temporaries beside its declared outputs, where those that killed runs left
    are removed first (preemption.StopCommand)."""
  before = set(FLAGS)
  define_flags()
  _list_in_help(sorted(set(FLAGS) - before))
  if not stop_on_signals:
    run(main)
    return

  def stoppable_main(argv):
    with preemption.StopCommand(output_locations()):
      return main(argv)

  run(stoppable_main)


def define_model_flags(vocabulary=True, hub_module=True):
  """Where the model comes from: --albert_config_file, --init_checkpoint (and the vocabulary,
  --do_lower_case and --albert_hub_module_handle of the fine-tuning scripts)."""
  _define(flags.DEFINE_string, "albert_config_file", None,
          "albert_config.json of the pretrained model.")
  _define(flags.DEFINE_string, "init_checkpoint", None,
          "Initial checkpoint: official TF1, ours, an HF transformers directory, a hub module or "
          "an untarred official directory (the fine-tuning scripts take the config and the "
          "SentencePiece model from it when not given).")
  if vocabulary:
    _define(flags.DEFINE_string, "spm_model_file", None, "SentencePiece model (30k-clean.model).")
    _define(flags.DEFINE_string, "vocab_file", None,
            "WordPiece vocabulary (when no --spm_model_file).")
    _define(flags.DEFINE_bool, "do_lower_case", True, "Lower-case the input text (uncased models).")
  if hub_module:
    _define(flags.DEFINE_string, "albert_hub_module_handle", None,
            "A local ALBERT TF-Hub module (official TF1 format, or export_savedmodel.py's "
            "output): config, weights and SentencePiece model come from it.")


def define_job_flags(max_seq_length=512, do_train=False, learning_rate=5e-5,
                     save_checkpoints_steps=1000, evaluation=True):
  """The official fine-tuning job flags run_classifier, run_race and run_squad share (their
  defaults differ per script, as in the official scripts)."""
  _define(flags.DEFINE_string, "output_dir", None, "Where checkpoints and results are written.")
  output_flags(output_dir=DIRECTORY, export_dir=DIRECTORY)
  _define(flags.DEFINE_integer, "max_seq_length", max_seq_length,
          "Total sequence length after tokenization.")
  _define(flags.DEFINE_bool, "do_train", do_train, "Whether to run training.")
  _define(flags.DEFINE_bool, "do_predict", False, "Whether to run the model on the test set.")
  _define(flags.DEFINE_integer, "train_batch_size", 32, "Total batch size for training.")
  _define(flags.DEFINE_integer, "predict_batch_size", 8, "Total batch size for predict.")
  _define(flags.DEFINE_float, "learning_rate", learning_rate, "The initial learning rate.")
  _define(flags.DEFINE_integer, "save_checkpoints_steps", save_checkpoints_steps,
          "How often to save the model checkpoint.")
  _define(flags.DEFINE_float, "dropout_prob", 0.1,
          "Dropout before the task head (official 0.1).")
  _define(flags.DEFINE_float, "albert_dropout_prob", None,
          "Extra: the ALBERT dropout while fine-tuning (the paper's DR, appendix A.4): replaces "
          "the config's hidden_dropout_prob and attention_probs_dropout_prob (default: the "
          "config's own, 0 in the v2 models, 0.1 in v1).")
  _define(flags.DEFINE_string, "export_dir", None,
          "If set, export the best (else latest) checkpoint as a new SavedModel version for TF "
          "Serving here.")
  _define(flags.DEFINE_string, "bucket_boundaries", "auto",
          "Extra: pad each batch only to the smallest of these lengths that holds its longest "
          "example (training also groups examples of similar length): auto (CPU/GPU: every 32 "
          "tokens up to 128, every 64 up to 256, then every 128; TPU: off), none (pad to "
          "--max_seq_length), or lengths such as 64,128. Outputs are unchanged.")
  if evaluation:
    _define(flags.DEFINE_bool, "do_eval", False, "Whether to run eval on the dev set.")
    _define(flags.DEFINE_integer, "eval_batch_size", 8, "Total batch size for eval.")


def define_step_flags(train_step=1000, warmup_step=0, optimizer=True):
  """--train_step / --warmup_step (run_classifier, run_race) and --optimizer."""
  _define(flags.DEFINE_integer, "train_step", train_step,
          "Total number of training steps to perform.")
  _define(flags.DEFINE_integer, "warmup_step", warmup_step,
          "Number of linear learning-rate warmup steps.")
  if optimizer:
    _define(flags.DEFINE_enum, "optimizer", "adamw", ["adamw", "lamb"],
            "Optimizer to use: adamw or lamb.")


def define_export_flags():
  """Extras of the scripts that write a serving SavedModel with --export_dir."""
  _define(flags.DEFINE_enum, "export_precision", "fp32", ["fp32", "bf16", "auto"],
          "Extra: compute precision of the --export_dir SavedModel, whatever --precision trained "
          "it: fp32; bf16 (bfloat16 weights and matmuls, LayerNorm in float32: faster only where "
          "TensorFlow's oneDNN runs bfloat16 matmuls natively, AVX512-BF16 or AMX, else "
          "1.1-2.5x slower); or auto (times both at batch 1 on this machine, exports the faster "
          "and records the timings in the export's assets.extra/albert_export.json).")
  _define(flags.DEFINE_enum, "tflite_quantize", "none", ["none", "dynamic"],
          "Extra: the --export_dir step also writes albert_model.tflite (batch 1, token ids in); "
          "none: float32 weights, dynamic: int8 weights (about 4x smaller, float activations).")
  _define(flags.DEFINE_integer, "tflite_batch_size", 1,
          "Extra: the batch dimension of albert_model.tflite: 1 (the on-device file, every shape "
          "fixed), another fixed batch, or 0 for any batch (a dynamic batch dimension, for "
          "batched CPU serving with --tflite_quantize=dynamic).", lower_bound=0)


# run_classifier's flags for a task on the user's own files rather than a GLUE task.
CUSTOM_TASK_FLAGS = ("data_format", "header", "text_a_column", "text_b_column", "label_column",
                     "id_column", "labels", "regression")


def define_custom_task_flags():
  """Extras of run_classifier.py: fine-tuning on your own TSV, CSV or JSON Lines files
  (--task_name=custom, see albert_tf.data.custom_task)."""
  _define(flags.DEFINE_enum, "data_format", "auto", ["auto", "tsv", "csv", "jsonl"],
          "Extra, own data (--task_name=custom): the format of <data_dir>/train|dev|test.<ext>; "
          "auto: each file's extension (.tsv, .csv, .jsonl).")
  _define(flags.DEFINE_bool, "header", True,
          "Extra, own data: TSV/CSV files start with a header line naming the columns "
          "(--noheader: columns are numbers from 0).")
  _define(flags.DEFINE_string, "text_a_column", None,
          "Extra, own data: the column of the text to classify (a header name, a JSON key, or "
          "a number from 0). Required for own data.")
  _define(flags.DEFINE_string, "text_b_column", None,
          "Extra, own data: the column of the second text (sentence-pair tasks).")
  _define(flags.DEFINE_string, "label_column", "label",
          "Extra, own data: the label column (test files need none).")
  _define(flags.DEFINE_string, "id_column", None,
          "Extra, own data: a column of example ids for predictions.tsv (default: each "
          "example's number in its file, from 0).")
  _define(flags.DEFINE_list, "labels", None,
          "Extra, own data: the labels, comma-separated, in the order of the classifier's "
          "outputs. Default: as recorded in <output_dir>/label_list.json by the run that "
          "trained there, else the training file's labels sorted (integers by value).")
  _define(flags.DEFINE_bool, "regression", False,
          "Extra, own data: the label is a number to predict (metrics Pearson, Spearman), not "
          "a class.")


def define_runtime_flags():
  """The official TPU flags every official script has, and our runtime extras."""
  _define(flags.DEFINE_bool, "use_tpu", False, "Whether to use TPU or GPU/CPU.")
  _define(flags.DEFINE_string, "tpu_name", None,
          "The Cloud TPU to use for training: the name used when creating the Cloud TPU, or a "
          "grpc://ip.address.of.tpu:8470 url.")
  # The TF2 model garden (and most TF2 TPU examples) spell it --tpu.
  _define(flags.DEFINE_alias, "tpu", "tpu_name")
  _define(flags.DEFINE_string, "tpu_zone", None, "GCE zone where the Cloud TPU is located in.")
  _define(flags.DEFINE_string, "gcp_project", None,
          "Project name for the Cloud TPU-enabled project.")
  _define(flags.DEFINE_string, "master", None, "[Optional] TensorFlow master URL.")
  _define(flags.DEFINE_integer, "num_tpu_cores", 8,
          "Only used if `use_tpu` is True. Total number of TPU cores to use (the strategy uses "
          "the cores the TPU system reports).")
  _define(flags.DEFINE_integer, "iterations_per_loop", 1000,
          "How many steps to make in each estimator call (here: steps per tf.function loop; "
          "the progress line and checkpoints still come at their own intervals).")
  _define(flags.DEFINE_enum, "strategy", "auto",
          ["auto", "default", "one_device", "mirrored", "multi_worker_mirrored", "tpu"],
          "Extra: tf.distribute strategy; auto = tpu if --use_tpu, multi_worker_mirrored if "
          "TF_CONFIG names a cluster, mirrored with several GPUs, else default.")
  _define(flags.DEFINE_float, "worker_wait_seconds", cluster.DEFAULT_WAIT_S,
          "Extra, multi-worker: how long a worker waits for the other workers of TF_CONFIG to "
          "answer (printing which task and address it waits for every 10 s) before it gives up "
          "with one line (exit status 2). SIGTERM/SIGINT while waiting: one line, exit 42.")
  _define(flags.DEFINE_enum, "precision", "fp32", ["fp32", "bf16", "fp16"],
          "Extra: compute precision: fp32, bf16 (mixed_bfloat16) or fp16 (mixed_float16 with "
          "dynamic loss scaling). Variables stay float32.")
  _define(flags.DEFINE_bool, "jit_compile", False, "Extra: compile the train/eval steps with XLA.")
  _define(flags.DEFINE_integer, "gradient_accumulation_steps", 1,
          "Extra: split each global batch into this many micro-batches and apply their summed "
          "gradient once (same update as the full batch, less memory).")
  _define(flags.DEFINE_integer, "log_every_n_steps", 100,
          "Extra: steps between progress lines/summaries.")
  _define(flags.DEFINE_enum, "recompute", "none", ["none", "layer", "attention"],
          "Extra: activation recomputation in training: none; layer (keep only each "
          "transformer layer's input, recompute the layer in the backward pass: much less "
          "memory, about 1/3 more compute); attention (recompute only the attention blocks).")
  _define(flags.DEFINE_bool, "deterministic", False,
          "Extra: enable TF op determinism (bit-identical reruns and resumes; slower). Seeds "
          "everything from --seed (default 0 then).")
  _define(flags.DEFINE_integer, "seed", None,
          "Extra: seed of weight initialisation, dropout and input shuffling (default: random, "
          "or 0 with --deterministic); recorded in <output_dir>/run_seed.json and reused on "
          "resume.")
  _define(flags.DEFINE_bool, "shuffle_train_input", True,
          "Extra: shuffle the training input (as the official scripts do). "
          "--shuffle_train_input=false reads the training records in file order (files in the "
          "order given, then again from the first), to reproduce a run step for step.")


# ---------------------------------------------------------------- flags -> configs: shared
def require_flags(names, f=FLAGS):
  """One-line error naming the first of the flags `names` that is not set."""
  for name in names:
    if not getattr(f, name):
      raise AlbertError(f"--{name} is required")


def runtime_config(f=FLAGS):
  """RuntimeConfig from the runtime flags."""
  return RuntimeConfig(
      strategy=f.strategy, use_tpu=f.use_tpu, tpu_name=f.tpu_name, tpu_zone=f.tpu_zone,
      gcp_project=f.gcp_project, master=f.master, precision=f.precision,
      jit_compile=f.jit_compile, gradient_accumulation_steps=f.gradient_accumulation_steps,
      log_every_n_steps=f.log_every_n_steps, steps_per_loop=f.iterations_per_loop,
      recompute=f.recompute, deterministic=f.deterministic, seed=f.seed,
      worker_wait_seconds=f.worker_wait_seconds)


def model_source(f=FLAGS):
  """The ModelSource (config, vocabulary, initial weights) the model flags name."""
  from albert_tf.checkpoints.model_source import (  # lazy: TensorFlow, after the flags are checked
      resolve_model_source)
  return resolve_model_source(
      albert_config_file=f.albert_config_file, init_checkpoint=f.init_checkpoint,
      hub_module_handle=f.albert_hub_module_handle, spm_model_file=f.spm_model_file,
      do_lower_case=f.do_lower_case, vocab_file=f.vocab_file,
      albert_dropout_prob=f.albert_dropout_prob)


def require_action(actions, f=FLAGS):
  """One-line error unless one of the script's action flags (e.g. do_train, export_dir) is set."""
  if not any(getattr(f, name) for name in actions):
    names = [f"--{name}" for name in actions]
    raise AlbertError(f"at least one of {', '.join(names[:-1])} or {names[-1]} must be set")


def job_config(f=FLAGS, **values):
  """RunConfig from the job (and export) flags; `values` give what the script sets itself."""
  from albert_tf.training.runner import RunConfig  # lazy: TensorFlow, after the flags are checked
  common = dict(
      output_dir=f.output_dir, do_train=f.do_train, do_predict=f.do_predict,
      train_batch_size=f.train_batch_size, predict_batch_size=f.predict_batch_size,
      learning_rate=f.learning_rate, save_checkpoints_steps=f.save_checkpoints_steps,
      export_dir=f.export_dir, export_precision=f.export_precision,
      tflite_quantize=f.tflite_quantize, tflite_batch_size=f.tflite_batch_size)
  common.update(values)
  return RunConfig(**common)


def step_job_config(f=FLAGS):
  """RunConfig of run_classifier / run_race: the four official actions, --train_step and
  --warmup_step, --do_eval and --optimizer."""
  require_action(("do_train", "do_eval", "do_predict", "export_dir"), f)
  return job_config(f, do_eval=f.do_eval, eval_batch_size=f.eval_batch_size,
                    train_steps=f.train_step, warmup_steps=f.warmup_step, optimizer=f.optimizer)


def sentence_task_values(source, f=FLAGS):
  """The SentenceTaskConfig fields (GLUE, RACE) from the flags and the resolved ModelSource."""
  return dict(albert_config=source.config, data_dir=f.data_dir,
              max_seq_length=f.max_seq_length, cached_dir=f.cached_dir or f.output_dir,
              spm_model_file=source.spm_model_file, vocab_file=f.vocab_file,
              do_lower_case=source.do_lower_case, init_checkpoint=source.init_checkpoint,
              dropout_rate=f.dropout_prob, bucket_boundaries=bucket_boundaries(f),
              shuffle_train_input=f.shuffle_train_input)


def bucket_boundaries(f=FLAGS):
  """--bucket_boundaries resolved for this run (off on TPU unless lengths are given)."""
  on_tpu = f.use_tpu or f.strategy == "tpu"
  return parse_bucket_boundaries(f.bucket_boundaries, f.max_seq_length, on_tpu=on_tpu)


# ------------------------------------------------------- flags -> configs: one per script
def pretraining_configs(f=FLAGS):
  """(PretrainingConfig, RunConfig) of run_pretraining.py."""
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
      shuffle_train_input=f.shuffle_train_input, masked_lm_budget=f.masked_lm_budget)
  return task_config, run_config


def _custom_task_requested(f=FLAGS):
  """Whether run_classifier's --task_name is a task on the user's own data: `custom`, or any
  name that is no GLUE task when own-data flags are given. A GLUE task with own-data flags, or
  an unknown name without them, is a one-line error."""
  given = [name for name in CUSTOM_TASK_FLAGS if name in f and f[name].present]
  if (f.task_name or "").strip().lower() == custom_task.CUSTOM_TASK:
    return True
  try:
    glue.get_task(f.task_name)
  except AlbertError as e:
    if given:
      return True
    raise AlbertError(f"{e}; for your own data: --task_name=custom --text_a_column=... (see "
                      "the README: Fine-tune on your own data)") from None
  if given:
    raise AlbertError(f"--{given[0]} is for your own data, but --task_name={f.task_name} is a "
                      "GLUE task (own data: --task_name=custom, or a name of yours)")
  return False


def custom_task_spec(f=FLAGS):
  """The CustomTaskSpec the own-data flags describe (its label list resolved: given, recorded
  in <output_dir>/label_list.json, or inferred from the training file)."""
  require_flags(("data_dir", "output_dir"), f)
  columns = custom_task.Columns(text_a=f.text_a_column, text_b=f.text_b_column,
                                label=f.label_column, id=f.id_column)
  return custom_task.build_spec(
      f.task_name, f.data_dir, columns, labels=f.labels, regression=f.regression,
      data_format=f.data_format, header=f.header,
      label_list_file=os.path.join(f.output_dir, custom_task.LABEL_LIST_FILE))


def classifier_configs(f=FLAGS):
  """(GlueConfig, RunConfig) of run_classifier.py: a GLUE task, or one on the user's own files.

  The task's flags and files are checked first, before TensorFlow is imported."""
  custom = _custom_task_requested(f)  # an unknown task is the first thing to report
  spec = custom_task_spec(f) if custom else None
  run_config = step_job_config(f)
  from albert_tf.tasks.glue import GlueConfig  # lazy: TensorFlow, after the flags are checked
  task_config = GlueConfig(task_name=f.task_name, spec=spec,
                           threshold_to_export=f.threshold_to_export,
                           **sentence_task_values(model_source(f), f))
  return task_config, run_config


def race_configs(f=FLAGS):
  """(RaceConfig, RunConfig) of run_race.py."""
  from albert_tf.tasks.race import RaceConfig  # lazy: TensorFlow, after the flags are checked
  if (f.task_name or "race").lower() != "race":
    raise AlbertError(f"--task_name={f.task_name!r} is not a known task; known tasks: race")
  run_config = step_job_config(f)
  task_config = RaceConfig(
      max_qa_length=f.max_qa_length, high_only=f.high_only, middle_only=f.middle_only,
      train_file=f.train_file, eval_file=f.eval_file, predict_file=f.predict_file,
      **sentence_task_values(model_source(f), f))
  return task_config, run_config


def squad_config(f=FLAGS):
  """SquadConfig of run_squad.py (and run_squad_v1.py / run_squad_v2.py)."""
  from albert_tf.tasks.squad import SquadConfig  # lazy: TensorFlow, after the flags are checked
  require_action(("do_train", "do_predict", "export_dir"), f)
  source = model_source(f)
  return SquadConfig(
      albert_config=source.config, spm_model_file=source.spm_model_file,
      vocab_file=f.vocab_file, do_lower_case=source.do_lower_case,
      init_checkpoint=source.init_checkpoint, version_2_with_negative=f.version_2_with_negative,
      train_file=f.train_file if f.do_train else None,
      predict_file=f.predict_file if f.do_predict else None,  # (needed when predicting)
      cache_dir=f.output_dir, train_feature_file=f.train_feature_file,
      predict_feature_file=f.predict_feature_file,
      predict_feature_left_file=f.predict_feature_left_file,
      max_seq_length=f.max_seq_length, doc_stride=f.doc_stride,
      max_query_length=f.max_query_length, n_best_size=f.n_best_size,
      max_answer_length=f.max_answer_length, start_n_top=f.start_n_top,
      end_n_top=f.end_n_top, dropout_rate=f.dropout_prob,
      null_score_diff_threshold=f.null_score_diff_threshold, shuffle_seed=f.seed,
      shuffle_train_input=f.shuffle_train_input,
      bucket_boundaries=bucket_boundaries(f))


def squad_run_config(has_gold_answers, f=FLAGS):
  """RunConfig of run_squad.py; `has_gold_answers`: whether --predict_file's questions carry
  answers (the task reads the file to know).

  The official --do_predict evaluates every checkpoint when the file has answers (keeping the
  best F1), and otherwise predicts with model.ckpt-best (else the latest checkpoint).
  """
  evaluate = f.do_predict and has_gold_answers
  return job_config(f, do_eval=evaluate, do_predict=f.do_predict and not evaluate,
                    eval_batch_size=f.predict_batch_size, num_train_epochs=f.num_train_epochs,
                    warmup_proportion=f.warmup_proportion)


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


# ------------------------------------------------------------------------------ output
def print_results(summary):
  """The script's closing line: the best checkpoint and its results, when it evaluated."""
  result = summary.get("best_result")
  if result:
    from albert_tf.training.progress import (  # lazy: TensorFlow, after the flags are checked
        format_value)
    print(f"{summary['task']}: best checkpoint {summary['best_checkpoint']}: " + ", ".join(
        f"{k} = {format_value(v)}" if isinstance(v, float) else f"{k} = {v}"
        for k, v in sorted(result.items())), flush=True)
