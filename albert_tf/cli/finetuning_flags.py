"""The fine-tuning family's flags (run_classifier.py, run_race.py, run_squad.py and
run_squad_v1/_v2.py) and their flags -> typed configs.

A script defines what only it has in its own file, its shared groups with `define_flags` (its
official defaults as arguments), and gets the library's dataclasses from its function below:

  run_classifier.py                  classifier_configs (GLUE, or own data: custom_task_spec)
  run_race.py                        race_configs
  run_squad.py (run_squad_v1/_v2)    squad_config, then squad_run_configs (it asks the task
                                     whether --predict_file has answers)
  run_ner.py                         ner_configs (define_ner_flags: its own group)

Official flags keep their official names, defaults and meaning; extras say "Extra:".
"""

import os

from absl import flags

from albert_tf.cli import training_flags
from albert_tf.common import fileio
from albert_tf.cli.command import (DIRECTORY, define_once, output_flags, require_action,
                                   require_flags)
from albert_tf.data import custom_task, glue
from albert_tf.data.bucketing import parse_bucket_boundaries
from albert_tf.errors import AlbertError

FLAGS = flags.FLAGS


def define_flags(max_seq_length, learning_rate, save_checkpoints_steps, do_train=False,
                 do_eval=None, train_step=None, warmup_step=None, custom_task_flags=False):
  """Every shared group of a fine-tuning script, with the script's official defaults:
  the model and its vocabulary, the job, the export extras and the runtime; --train_step,
  --warmup_step and --optimizer when `train_step` is given (run_classifier, run_race; SQuAD
  counts epochs); --do_eval and --eval_batch_size unless `do_eval` is None (SQuAD evaluates
  with --do_predict); the own-data and early-exit flags with `custom_task_flags`
  (run_classifier)."""
  training_flags.define_model_flags()
  _define_vocabulary_flags()
  _define_job_flags(max_seq_length, do_train, learning_rate, save_checkpoints_steps, do_eval)
  if train_step is not None:
    _define_step_flags(train_step, warmup_step)
  _define_export_flags()
  if custom_task_flags:
    _define_custom_task_flags()
    _define_early_exit_flags()
  training_flags.define_runtime_flags()


def _define_vocabulary_flags():
  """The vocabulary, --do_lower_case and --albert_hub_module_handle."""
  define_once(flags.DEFINE_string, "spm_model_file", None,
              "SentencePiece model (30k-clean.model).")
  define_once(flags.DEFINE_string, "vocab_file", None,
              "WordPiece vocabulary (when no --spm_model_file).")
  define_once(flags.DEFINE_bool, "do_lower_case", True,
              "Lower-case the input text (uncased models).")
  define_once(flags.DEFINE_string, "albert_hub_module_handle", None,
              "A local ALBERT TF-Hub module (official TF1 format, or export_savedmodel.py's "
              "output): config, weights and SentencePiece model come from it.")


def _define_job_flags(max_seq_length, do_train, learning_rate, save_checkpoints_steps, do_eval):
  """The official fine-tuning job flags run_classifier, run_race and run_squad share (their
  defaults differ per script, as in the official scripts)."""
  define_once(flags.DEFINE_string, "output_dir", None, "Where checkpoints and results are written.")
  output_flags(output_dir=DIRECTORY, export_dir=DIRECTORY)
  define_once(flags.DEFINE_integer, "max_seq_length", max_seq_length,
              "Total sequence length after tokenization.")
  define_once(flags.DEFINE_bool, "do_train", do_train, "Whether to run training.")
  define_once(flags.DEFINE_bool, "do_predict", False, "Whether to run the model on the test set.")
  define_once(flags.DEFINE_integer, "train_batch_size", 32, "Total batch size for training.")
  define_once(flags.DEFINE_integer, "predict_batch_size", 8, "Total batch size for predict.")
  define_once(flags.DEFINE_float, "learning_rate", learning_rate, "The initial learning rate.")
  define_once(flags.DEFINE_integer, "save_checkpoints_steps", save_checkpoints_steps,
              "How often to save the model checkpoint.")
  define_once(flags.DEFINE_float, "dropout_prob", 0.1,
              "Dropout before the task head (official 0.1).")
  define_once(flags.DEFINE_float, "albert_dropout_prob", None,
              "Extra: the ALBERT dropout while fine-tuning (the paper's DR, appendix A.4): "
              "replaces the config's hidden_dropout_prob and attention_probs_dropout_prob "
              "(default: the config's own, 0 in the v2 models, 0.1 in v1).")
  define_once(flags.DEFINE_string, "export_dir", None,
              "If set, export the best (else latest) checkpoint as a new SavedModel version for TF "
              "Serving here.")
  define_once(flags.DEFINE_string, "bucket_boundaries", "auto",
              "Extra: pad each batch only to the smallest of these lengths that holds its longest "
              "example (training also groups examples of similar length): auto (CPU/GPU: every 32 "
              "tokens up to 128, every 64 up to 256, then every 128; TPU: off), none (pad to "
              "--max_seq_length), or lengths such as 64,128. Outputs are unchanged.")
  if do_eval is not None:
    define_once(flags.DEFINE_bool, "do_eval", do_eval, "Whether to run eval on the dev set.")
    define_once(flags.DEFINE_integer, "eval_batch_size", 8, "Total batch size for eval.")


def _define_step_flags(train_step, warmup_step):
  """--train_step / --warmup_step (run_classifier, run_race) and --optimizer."""
  define_once(flags.DEFINE_integer, "train_step", train_step,
              "Total number of training steps to perform.")
  define_once(flags.DEFINE_integer, "warmup_step", warmup_step,
              "Number of linear learning-rate warmup steps.")
  define_once(flags.DEFINE_enum, "optimizer", "adamw", ["adamw", "lamb"],
              "Optimizer to use: adamw or lamb.")


def _define_export_flags():
  """Extras of the scripts that write a serving SavedModel with --export_dir."""
  define_once(flags.DEFINE_enum, "export_precision", "fp32", ["fp32", "bf16", "auto"],
              "Extra: compute precision of the --export_dir SavedModel, whatever --precision "
              "trained it: fp32; bf16 (bfloat16 weights and matmuls, LayerNorm in float32: faster "
              "only where TensorFlow's oneDNN runs bfloat16 matmuls natively, AVX512-BF16 or AMX, "
              "else 1.1-2.5x slower); or auto (times both at batch 1 on this machine, exports the "
              "faster and records the timings in the export's assets.extra/albert_export.json).")
  define_once(flags.DEFINE_enum, "tflite_quantize", "none", ["none", "dynamic"],
              "Extra: the --export_dir step also writes albert_model.tflite (batch 1, token ids "
              "in); none: float32 weights, dynamic: int8 weights (about 4x smaller, float "
              "activations).")
  define_once(flags.DEFINE_integer, "tflite_batch_size", 1,
              "Extra: the batch dimension of albert_model.tflite: 1 (the on-device file, every "
              "shape fixed), another fixed batch, or 0 for any batch (a dynamic batch dimension, "
              "for batched CPU serving with --tflite_quantize=dynamic).", lower_bound=0)


# run_classifier's flags for a task on the user's own files rather than a GLUE task.
CUSTOM_TASK_FLAGS = ("data_format", "header", "text_a_column", "text_b_column", "label_column",
                     "id_column", "labels", "regression")


def _define_custom_task_flags():
  """Extras of run_classifier.py: fine-tuning on your own TSV, CSV or JSON Lines files
  (--task_name=custom, see albert_tf.data.custom_task)."""
  define_once(flags.DEFINE_enum, "data_format", "auto", ["auto", "tsv", "csv", "jsonl"],
              "Extra, own data (--task_name=custom): the format of "
              "<data_dir>/train|dev|test.<ext>; auto: each file's extension (.tsv, .csv, .jsonl).")
  define_once(flags.DEFINE_bool, "header", True,
              "Extra, own data: TSV/CSV files start with a header line naming the columns "
              "(--noheader: columns are numbers from 0).")
  define_once(flags.DEFINE_string, "text_a_column", None,
              "Extra, own data: the column of the text to classify (a header name, a JSON key, or "
              "a number from 0). Required for own data.")
  define_once(flags.DEFINE_string, "text_b_column", None,
              "Extra, own data: the column of the second text (sentence-pair tasks).")
  define_once(flags.DEFINE_string, "label_column", "label",
              "Extra, own data: the label column (test files need none).")
  define_once(flags.DEFINE_string, "id_column", None,
              "Extra, own data: a column of example ids for predictions.tsv (default: each "
              "example's number in its file, from 0).")
  define_once(flags.DEFINE_list, "labels", None,
              "Extra, own data: the labels, comma-separated, in the order of the classifier's "
              "outputs. Default: as recorded in <output_dir>/label_list.json by the run that "
              "trained there, else the training file's labels sorted (integers by value).")
  define_once(flags.DEFINE_bool, "regression", False,
              "Extra, own data: the label is a number to predict (metrics Pearson, Spearman), not "
              "a class.")


# Where run_ner.py looks in --data_dir for each split's file, first found wins.
NER_FILE_NAMES = {"train_file": "train", "dev_file": "dev", "test_file": "test"}
NER_EXTENSIONS = (".txt", ".conll", ".jsonl")


def define_ner_flags():
  """run_ner.py's own group: the files, the tags and the windows; the early-exit flags only to
  refuse them in one line (early exit does not apply to token classification)."""
  define_once(flags.DEFINE_string, "data_dir", None,
              "A dir with train, dev and test files (.txt or .conll: CoNLL columns; .jsonl: "
              "{\"tokens\", \"tags\"} lines); --train_file/--dev_file/--test_file name them "
              "one by one instead.")
  define_once(flags.DEFINE_string, "train_file", None, "The training file (--do_train).")
  define_once(flags.DEFINE_string, "dev_file", None, "The evaluation file (--do_eval).")
  define_once(flags.DEFINE_string, "test_file", None,
              "The file to tag (--do_predict): written back in its format with a predicted tag "
              "per word; tags in it are allowed and ignored.")
  define_once(flags.DEFINE_list, "labels", None,
              "The tags, comma-separated, in the order of the head's outputs (or a file with one "
              "per line). Default: recorded in <output_dir>/tag_list.json by the run that "
              "trained there, else the training file's (O first, then sorted).")
  define_once(flags.DEFINE_enum, "tag_scheme", "BIO", ["BIO", "BIOES", "IO"],
              "The tags' scheme. BIO repairs an I-X that starts an entity (IOB1) to B-X; broken "
              "BIOES is refused (docs/token_classification.md).", case_sensitive=False)
  define_once(flags.DEFINE_integer, "doc_stride", 128,
              "A sentence longer than --max_seq_length - 2 pieces is cut into windows of whole "
              "words, each starting about this many pieces after the one before; every word is "
              "tagged from the window where it has the most context.")
  _define_early_exit_flags()


def _define_early_exit_flags():
  """Extras of run_classifier.py: patience-based early exit (PABEE; docs/early_exit.md)."""
  define_once(flags.DEFINE_enum, "early_exit", "none", ["none", "patience"],
              "Extra: patience trains one internal classifier per layer (the loss weighs layer l "
              "by l) beside the ordinary one, and with --early_exit_patience stops each example "
              "early in --do_eval, --do_predict and the --export_dir SavedModel (outputs gain "
              "exit_layer). Give it to every run on that --output_dir.")
  define_once(flags.DEFINE_integer, "early_exit_patience", None,
              "Extra, with --early_exit=patience: an example stops at the first layer whose "
              "answer equals that of each of the N layers before it (N >= number of layers - 1: "
              "the full model's answers). Unset: every layer runs. Choose it on the dev set "
              "(--do_eval, one run per value).", lower_bound=1)
  define_once(flags.DEFINE_float, "early_exit_threshold", 0.1,
              "Extra, early exit of a regression: a score that moves less than this from one "
              "layer to the next counts as unchanged.")


# ------------------------------------------------------------------------- flags -> configs
def model_source(f=FLAGS):
  """The ModelSource (config, vocabulary, initial weights) the model flags name."""
  from albert_tf.checkpoints.model_source import (  # lazy: TensorFlow, after the flags are checked
      resolve_model_source)
  return resolve_model_source(
      albert_config_file=f.albert_config_file, init_checkpoint=f.init_checkpoint,
      hub_module_handle=f.albert_hub_module_handle, spm_model_file=f.spm_model_file,
      do_lower_case=f.do_lower_case, vocab_file=f.vocab_file,
      albert_dropout_prob=f.albert_dropout_prob)


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
  cached_dir = f.cached_dir if "cached_dir" in f else None  # (run_ner.py caches nothing)
  return dict(albert_config=source.config, data_dir=f.data_dir,
              max_seq_length=f.max_seq_length, cached_dir=cached_dir or f.output_dir,
              spm_model_file=source.spm_model_file, vocab_file=source.vocab_file,
              do_lower_case=source.do_lower_case, init_checkpoint=source.init_checkpoint,
              dropout_rate=f.dropout_prob, bucket_boundaries=bucket_boundaries(f),
              shuffle_train_input=f.shuffle_train_input, shuffle_seed=f.seed)


def bucket_boundaries(f=FLAGS):
  """--bucket_boundaries resolved for this run (off where inputs need static shapes: on TPU
  by `RuntimeConfig.on_tpu`'s rule, and with --xla_whole_step)."""
  static = training_flags.runtime_config(f).static_shapes
  return parse_bucket_boundaries(f.bucket_boundaries, f.max_seq_length, on_tpu=static)


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
  """(GlueConfig, RunConfig, RuntimeConfig) of run_classifier.py: a GLUE task, or one on the
  user's own files.

  The task's flags and files are checked first, before TensorFlow is imported."""
  custom = _custom_task_requested(f)  # an unknown task is the first thing to report
  spec = custom_task_spec(f) if custom else None
  run_config = step_job_config(f)
  from albert_tf.tasks.glue import GlueConfig  # lazy: TensorFlow, after the flags are checked
  task_config = GlueConfig(task_name=f.task_name, spec=spec,
                           threshold_to_export=f.threshold_to_export,
                           early_exit=None if f.early_exit == "none" else f.early_exit,
                           early_exit_patience=f.early_exit_patience,
                           early_exit_threshold=f.early_exit_threshold,
                           **sentence_task_values(model_source(f), f))
  return task_config, run_config, training_flags.runtime_config(f)


def _ner_files(f=FLAGS):
  """{train_file, dev_file, test_file}: given one by one, else found in --data_dir."""
  files = {}
  for flag, stem in NER_FILE_NAMES.items():
    files[flag] = f[flag].value
    if files[flag] is None and f.data_dir:
      found = [os.path.join(f.data_dir, stem + ext) for ext in NER_EXTENSIONS]
      files[flag] = next((p for p in found if fileio.exists(p)), None)
  for flag, action in (("train_file", "do_train"), ("dev_file", "do_eval"),
                       ("test_file", "do_predict")):
    if f[action].value and not files[flag]:
      where = (f" (none of {', '.join(NER_FILE_NAMES[flag] + e for e in NER_EXTENSIONS)} in "
               f"--data_dir={f.data_dir})" if f.data_dir else "")
      raise AlbertError(f"--{action} needs --{flag}{where}")
  return files


def ner_configs(f=FLAGS):
  """(TokenClassificationConfig, RunConfig, RuntimeConfig) of run_ner.py."""
  if f.early_exit != "none" or f.early_exit_patience is not None:
    flag = "--early_exit" if f.early_exit != "none" else "--early_exit_patience"
    raise AlbertError(f"{flag}: early exit does not apply to token classification (every word "
                      "is tagged from the last layer); leave it out")
  files = _ner_files(f)
  run_config = step_job_config(f)
  from albert_tf.tasks.token_classification import (  # lazy: TensorFlow, after the flags
      TokenClassificationConfig, tag_list_path)
  values = sentence_task_values(model_source(f), f)
  if f.export_dir and not values["spm_model_file"]:
    # Refused before training, not after it: the export's serving_default maps entities to
    # character offsets of the raw text through the tokenizer's words; the in-graph WordPiece
    # tokenizer lower-cases, deletes and splits characters without keeping their offsets.
    raise AlbertError(f"--export_dir={f.export_dir}: a token classifier of a WordPiece model "
                      "(--vocab_file without --spm_model_file, e.g. the Chinese ALBERTs) cannot "
                      "be exported yet (its raw-text signature needs SentencePiece); train, eval "
                      "and predict work: leave --export_dir out")
  values.update(data_dir=f.data_dir or "", bucket_boundaries=None)
  task_config = TokenClassificationConfig(
      labels=f.labels, tag_scheme=f.tag_scheme, doc_stride=f.doc_stride,
      tag_list_file=tag_list_path(f.output_dir), **files, **values)
  return task_config, run_config, training_flags.runtime_config(f)


def race_configs(f=FLAGS):
  """(RaceConfig, RunConfig, RuntimeConfig) of run_race.py."""
  from albert_tf.tasks.race import RaceConfig  # lazy: TensorFlow, after the flags are checked
  if (f.task_name or "race").lower() != "race":
    raise AlbertError(f"--task_name={f.task_name!r} is not a known task; known tasks: race")
  run_config = step_job_config(f)
  task_config = RaceConfig(
      max_qa_length=f.max_qa_length, high_only=f.high_only, middle_only=f.middle_only,
      train_file=f.train_file, eval_file=f.eval_file, predict_file=f.predict_file,
      **sentence_task_values(model_source(f), f))
  return task_config, run_config, training_flags.runtime_config(f)


def squad_config(f=FLAGS):
  """SquadConfig of run_squad.py (and run_squad_v1.py / run_squad_v2.py)."""
  from albert_tf.tasks.squad import SquadConfig  # lazy: TensorFlow, after the flags are checked
  require_action(("do_train", "do_predict", "export_dir"), f)
  source = model_source(f)
  return SquadConfig(
      albert_config=source.config, spm_model_file=source.spm_model_file,
      vocab_file=source.vocab_file, do_lower_case=source.do_lower_case,
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


def squad_run_configs(has_gold_answers, f=FLAGS):
  """(RunConfig, RuntimeConfig) of run_squad.py; `has_gold_answers`: whether --predict_file's
  questions carry answers (the task reads the file to know).

  The official --do_predict evaluates every checkpoint when the file has answers (keeping the
  best F1), and otherwise predicts with model.ckpt-best (else the latest checkpoint).
  """
  evaluate = f.do_predict and has_gold_answers
  run_config = job_config(f, do_eval=evaluate, do_predict=f.do_predict and not evaluate,
                          eval_batch_size=f.predict_batch_size,
                          eval_batch_flag="--predict_batch_size",
                          num_train_epochs=f.num_train_epochs,
                          warmup_proportion=f.warmup_proportion)
  return run_config, training_flags.runtime_config(f)


def print_results(summary):
  """The script's closing line: the best checkpoint and its results, when it evaluated."""
  result = summary.get("best_result")
  if result:
    from albert_tf.training.progress import (  # lazy: TensorFlow, after the flags are checked
        format_value)
    print(f"{summary['task']}: best checkpoint {summary['best_checkpoint']}: " + ", ".join(
        f"{k} = {format_value(v)}" if isinstance(v, float) else f"{k} = {v}"
        for k, v in sorted(result.items())), flush=True)
