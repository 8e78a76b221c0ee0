"""The flags the run_* scripts share, defined once, and their conversion into typed configs.

Only the top-level scripts import this module: they define their flags here (shared groups) and
in their own file (what only they have), then turn them into the library's dataclasses
(RunConfig, RuntimeConfig, the task configs) with the functions below. Nothing under
albert_tf/ other than this package reads absl flags.

Official flags keep their official names, defaults and meaning; extras say "Extra:".
"""

from absl import flags

from albert_tf.errors import AlbertError

FLAGS = flags.FLAGS


def _define(define, name, *args, **kwargs):
  """Defines a flag unless a script already has it (the groups may overlap)."""
  if name not in FLAGS:
    define(name, *args, **kwargs)


def define_model_flags(vocabulary=True, hub_module=True):
  """Where the model comes from: --albert_config_file, --init_checkpoint (and the vocabulary,
  --do_lower_case and --albert_hub_module_handle of the fine-tuning scripts)."""
  _define(flags.DEFINE_string, "albert_config_file", None,
          "albert_config.json of the pretrained model.")
  _define(flags.DEFINE_string, "init_checkpoint", None,
          "Initial checkpoint: official TF1, ours, an HF transformers directory or a hub module.")
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
  _define(flags.DEFINE_string, "export_dir", None,
          "If set, export the best (else latest) checkpoint as a new SavedModel version for TF "
          "Serving here.")
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
  _define(flags.DEFINE_enum, "export_precision", "fp32", ["fp32", "bf16"],
          "Extra: compute precision of the --export_dir SavedModel, whatever --precision trained "
          "it: fp32, or bf16 (bfloat16 weights and matmuls, LayerNorm in float32; faster on "
          "CPUs with AMX/AVX512-BF16, slower on CPUs without them).")
  _define(flags.DEFINE_enum, "tflite_quantize", "none", ["none", "dynamic"],
          "Extra: the --export_dir step also writes albert_model.tflite (batch 1, token ids in); "
          "none: float32 weights, dynamic: int8 weights (about 4x smaller, float activations).")


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


# ------------------------------------------------------------------------ flags -> configs
def runtime_config(f=FLAGS):
  """RuntimeConfig from the runtime flags."""
  from albert_tf.training.runtime import RuntimeConfig  # pylint: disable=g-import-not-at-top
  return RuntimeConfig(
      strategy=f.strategy, use_tpu=f.use_tpu, tpu_name=f.tpu_name, tpu_zone=f.tpu_zone,
      gcp_project=f.gcp_project, master=f.master, precision=f.precision,
      jit_compile=f.jit_compile, gradient_accumulation_steps=f.gradient_accumulation_steps,
      log_every_n_steps=f.log_every_n_steps, steps_per_loop=f.iterations_per_loop,
      recompute=f.recompute, deterministic=f.deterministic, seed=f.seed)


def model_source(f=FLAGS):
  """The ModelSource (config, vocabulary, initial weights) the model flags name."""
  from albert_tf.checkpoints.model_source import resolve_model_source  # pylint: disable=g-import-not-at-top
  return resolve_model_source(
      albert_config_file=f.albert_config_file, init_checkpoint=f.init_checkpoint,
      hub_module_handle=f.albert_hub_module_handle, spm_model_file=f.spm_model_file,
      do_lower_case=f.do_lower_case)


def require_action(actions, f=FLAGS):
  """One-line error unless one of the script's action flags (e.g. do_train, export_dir) is set."""
  if not any(getattr(f, name) for name in actions):
    names = [f"--{name}" for name in actions]
    raise AlbertError(f"at least one of {', '.join(names[:-1])} or {names[-1]} must be set")


def job_config(f=FLAGS, **values):
  """RunConfig from the job (and export) flags; `values` give what the script sets itself."""
  from albert_tf.training.runner import RunConfig  # pylint: disable=g-import-not-at-top
  common = dict(
      output_dir=f.output_dir, do_train=f.do_train, do_predict=f.do_predict,
      train_batch_size=f.train_batch_size, predict_batch_size=f.predict_batch_size,
      learning_rate=f.learning_rate, save_checkpoints_steps=f.save_checkpoints_steps,
      export_dir=f.export_dir, export_precision=f.export_precision,
      tflite_quantize=f.tflite_quantize)
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
              dropout_prob=f.dropout_prob)


def print_results(summary):
  """The script's closing line: the best checkpoint and its results, when it evaluated."""
  result = summary.get("best_result")
  if result:
    print(f"{summary['task']}: best checkpoint {summary['best_checkpoint']}: " + ", ".join(
        f"{k} = {v:.4f}" if isinstance(v, float) else f"{k} = {v}"
        for k, v in sorted(result.items())), flush=True)
