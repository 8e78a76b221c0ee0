"""Flags shared by every run_* script: the official TPU flags and our non-official extras.

The official scripts each define --use_tpu, --tpu_name, --tpu_zone, --gcp_project, --master,
--num_tpu_cores, --iterations_per_loop; `define_common_flags` defines them once (same names,
defaults and meaning) plus the extras every script has (--strategy, --precision, ...).
"""

from absl import flags

from albert_tf.errors import AlbertError
from albert_tf.training import strategy as strategy_lib

PRECISIONS = ("fp32", "bf16", "fp16")


def _define_if_missing(define, name, *args, **kwargs):
  if name not in flags.FLAGS:
    define(name, *args, **kwargs)


def define_common_flags():
  """Defines the shared flags on absl's global FLAGS (idempotent)."""
  d = _define_if_missing
  # Official TPU flags.
  d(flags.DEFINE_bool, "use_tpu", False, "Whether to use TPU or GPU/CPU.")
  d(flags.DEFINE_string, "tpu_name", None,
    "The Cloud TPU to use for training: the name used when creating the Cloud TPU, or a "
    "grpc://ip.address.of.tpu:8470 url.")
  d(flags.DEFINE_string, "tpu_zone", None, "GCE zone where the Cloud TPU is located in.")
  d(flags.DEFINE_string, "gcp_project", None, "Project name for the Cloud TPU-enabled project.")
  d(flags.DEFINE_string, "master", None, "[Optional] TensorFlow master URL.")
  d(flags.DEFINE_integer, "num_tpu_cores", 8,
    "Only used if `use_tpu` is True. Total number of TPU cores to use (the strategy uses the "
    "cores the TPU system reports).")
  d(flags.DEFINE_integer, "iterations_per_loop", 1000,
    "How many steps to make in each estimator call (here: steps per tf.function loop; the "
    "progress line and checkpoints still come at their own intervals).")
  # Extras (not in the official scripts).
  d(flags.DEFINE_enum, "strategy", "auto", list(strategy_lib.STRATEGIES),
    "tf.distribute strategy; auto = tpu if --use_tpu, multi_worker_mirrored if TF_CONFIG names "
    "a cluster, mirrored with several GPUs, else default.")
  d(flags.DEFINE_enum, "precision", "fp32", list(PRECISIONS),
    "Compute precision: fp32, bf16 (mixed_bfloat16) or fp16 (mixed_float16 with dynamic loss "
    "scaling). Variables stay float32.")
  d(flags.DEFINE_bool, "jit_compile", False, "Compile the train/eval steps with XLA.")
  d(flags.DEFINE_integer, "gradient_accumulation_steps", 1,
    "Split each global batch into this many micro-batches and apply their summed gradient "
    "once (same update as the full batch, less memory).")
  d(flags.DEFINE_integer, "log_every_n_steps", 100, "Steps between progress lines/summaries.")
  d(flags.DEFINE_enum, "recompute", "none", ["none", "layer", "attention"],
    "Activation recomputation in training: none; layer (keep only each transformer layer's "
    "input, recompute the layer in the backward pass: much less memory, about 1/3 more "
    "compute); attention (recompute only the attention blocks).")
  d(flags.DEFINE_bool, "deterministic", False,
    "Enable TF op determinism (bit-identical reruns and resumes; slower). Seeds everything "
    "from --seed (default 0 then).")
  d(flags.DEFINE_integer, "seed", None,
    "Seed of weight initialisation, dropout and input shuffling (default: random, or 0 with "
    "--deterministic); recorded in <output_dir>/run_seed.json and reused on resume.")


def define_export_flags():
  """Extras of the scripts that write a serving SavedModel with --export_dir (idempotent)."""
  _define_if_missing(
      flags.DEFINE_enum, "export_precision", "fp32", ["fp32", "bf16"],
      "Extra: compute precision of the --export_dir SavedModel, whatever --precision trained "
      "it: fp32, or bf16 (bfloat16 weights and matmuls, LayerNorm in float32; faster on CPUs "
      "with AMX/AVX512-BF16, slower on CPUs without them).")
  _define_if_missing(
      flags.DEFINE_enum, "tflite_quantize", "none", ["none", "dynamic"],
      "Extra: the --export_dir step also writes albert_model.tflite (batch 1, token ids in); "
      "none: float32 weights, dynamic: int8 weights (about 4x smaller, float activations).")


def strategy_from_flags(flags_obj=None):
  """The strategy the shared flags select."""
  f = flags_obj or flags.FLAGS
  return strategy_lib.get_strategy(
      strategy=f.strategy, use_tpu=f.use_tpu, tpu_name=f.tpu_name, tpu_zone=f.tpu_zone,
      gcp_project=f.gcp_project, master=f.master)


def trainer_kwargs_from_flags(flags_obj=None):
  """Trainer keyword arguments set by the shared flags (precision, jit, accumulation, logging)."""
  f = flags_obj or flags.FLAGS
  if f.gradient_accumulation_steps < 1:
    raise AlbertError(f"--gradient_accumulation_steps={f.gradient_accumulation_steps} is "
                      "invalid: expected >= 1")
  if f.log_every_n_steps < 1:
    raise AlbertError(f"--log_every_n_steps={f.log_every_n_steps} is invalid: expected >= 1")
  return dict(precision=f.precision, jit_compile=f.jit_compile,
              gradient_accumulation_steps=f.gradient_accumulation_steps,
              log_every_n_steps=f.log_every_n_steps,
              steps_per_loop=max(1, f.iterations_per_loop),
              recompute=getattr(f, "recompute", "none"))


SEED_FILE = "run_seed.json"


def resolve_seed(seed, deterministic, output_dir):
  """The run's seed: --seed, else the one a previous run recorded in output_dir (a resume),
  else 0 with --deterministic, else None (random). A seed in use is recorded in output_dir."""
  import json  # pylint: disable=g-import-not-at-top
  import os  # pylint: disable=g-import-not-at-top
  path = os.path.join(output_dir, SEED_FILE) if output_dir else None
  if seed is None and path and os.path.exists(path):
    with open(path, "r", encoding="utf-8") as f:
      seed = json.load(f).get("seed")
  if seed is None and deterministic:
    seed = 0
  if seed is not None and path:
    os.makedirs(output_dir, exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
      json.dump({"seed": int(seed), "deterministic": bool(deterministic)}, f)
    os.replace(path + ".tmp", path)
  return seed


def apply_runtime_flags(flags_obj=None):
  """Process-wide settings some flags ask for (call once from a script's main).

  Returns the seed in use (None: random). Op determinism needs every random op seeded, so
  --deterministic always runs with a seed (weights are initialised from it).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  f = flags_obj or flags.FLAGS
  seed = resolve_seed(getattr(f, "seed", None), f.deterministic, getattr(f, "output_dir", None))
  if seed is not None:
    tf_keras.utils.set_random_seed(int(seed))
  if f.deterministic:
    tf.config.experimental.enable_op_determinism()
  return seed
