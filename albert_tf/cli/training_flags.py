"""The flag groups both training families share (run_pretraining.py; run_classifier.py,
run_race.py, run_squad*.py): where the model comes from, and the runtime (the official TPU flags
and our devices, precision and seeds) -> RuntimeConfig."""

import sys

from absl import flags

from albert_tf.cli.command import define_once
from albert_tf.training import cluster
from albert_tf.training.runtime import RuntimeConfig

FLAGS = flags.FLAGS


def define_model_flags():
  """Where the model comes from: --albert_config_file and --init_checkpoint."""
  define_once(flags.DEFINE_string, "albert_config_file", None,
              "albert_config.json of the pretrained model.")
  define_once(flags.DEFINE_string, "init_checkpoint", None,
              "Initial checkpoint: official TF1, ours, an HF transformers directory, a hub "
              "module or an untarred official directory (the fine-tuning scripts take the "
              "config and the SentencePiece model from it when not given).")


def define_runtime_flags():
  """The official TPU flags every official script has, and our runtime extras."""
  define_once(flags.DEFINE_bool, "use_tpu", False, "Whether to use TPU or GPU/CPU.")
  define_once(flags.DEFINE_string, "tpu_name", None,
              "The Cloud TPU to use for training: the name used when creating the Cloud TPU, or a "
              "grpc://ip.address.of.tpu:8470 url.")
  # The TF2 model garden (and most TF2 TPU examples) spell it --tpu.
  define_once(flags.DEFINE_alias, "tpu", "tpu_name")
  define_once(flags.DEFINE_float, "tpu_connect_timeout", None,
              "Extra: seconds allowed for connecting to the TPU and initialising it (default "
              "300) before the run gives up with one line (exit status 2); the address tried is "
              "printed first. SIGTERM/SIGINT meanwhile: one line, exit 42.")
  define_once(flags.DEFINE_string, "tpu_zone", None, "GCE zone where the Cloud TPU is located in.")
  define_once(flags.DEFINE_string, "gcp_project", None,
              "Project name for the Cloud TPU-enabled project.")
  define_once(flags.DEFINE_string, "master", None, "[Optional] TensorFlow master URL.")
  define_once(flags.DEFINE_integer, "num_tpu_cores", 8,
              "Only used if `use_tpu` is True. Total number of TPU cores to use (the strategy uses "
              "the cores the TPU system reports).")
  define_once(flags.DEFINE_integer, "iterations_per_loop", 1000,
              "How many steps to make in each estimator call (here: steps per tf.function loop; "
              "the progress line and checkpoints still come at their own intervals).")
  define_once(flags.DEFINE_enum, "strategy", "auto",
              ["auto", "default", "one_device", "mirrored", "multi_worker_mirrored", "tpu"],
              "Extra: tf.distribute strategy; auto = tpu if --use_tpu, multi_worker_mirrored if "
              "TF_CONFIG names a cluster, mirrored with several GPUs, else default.")
  define_once(flags.DEFINE_float, "worker_wait_seconds", cluster.DEFAULT_WAIT_S,
              "Extra, multi-worker: how long a worker waits for the other workers of TF_CONFIG to "
              "answer (printing which task and address it waits for every 10 s) before it gives up "
              "with one line (exit status 2). SIGTERM/SIGINT while waiting: one line, exit 42.")
  define_once(flags.DEFINE_enum, "precision", "fp32", ["fp32", "bf16", "fp16"],
              "Extra: compute precision: fp32, bf16 (mixed_bfloat16) or fp16 (mixed_float16 with "
              "dynamic loss scaling). Variables stay float32.")
  define_once(flags.DEFINE_bool, "jit_compile", False,
              "Extra: compile the train/eval steps with XLA.")
  define_once(flags.DEFINE_bool, "xla_whole_step", False,
              "Extra: compile the whole replica step (forward, loss, backward, clipping, "
              "optimizer update, metrics, accumulation) as one XLA computation and give every "
              "input static shapes (no length bucketing, padded eval/predict batches), as on a "
              "TPU: check a setup on a CPU or GPU before paying for a slice. On a CPU, one "
              "replica only (XLA has no CPU cross-replica sum).")
  define_once(flags.DEFINE_bool, "pad_eval_batches", False,
              "Extra: pad the last eval/predict batches to the full --eval_batch_size / "
              "--predict_batch_size with padding examples left out of every result (always on "
              "with a TPU or --xla_whole_step).")
  define_once(flags.DEFINE_integer, "gradient_accumulation_steps", 1,
              "Extra: split each global batch into this many micro-batches and apply their summed "
              "gradient once (same update as the full batch, less memory).")
  define_once(flags.DEFINE_integer, "log_every_n_steps", 100,
              "Extra: steps between progress lines/summaries.")
  define_once(flags.DEFINE_enum, "recompute", "none", ["none", "layer", "attention"],
              "Extra: activation recomputation in training: none; layer (keep only each "
              "transformer layer's input, recompute the layer in the backward pass: much less "
              "memory, about 1/3 more compute); attention (recompute only the attention blocks).")
  define_once(flags.DEFINE_bool, "deterministic", False,
              "Extra: enable TF op determinism (bit-identical reruns and resumes; slower). Seeds "
              "everything from --seed (default 0 then).")
  define_once(flags.DEFINE_integer, "seed", None,
              "Extra: seed of weight initialisation, dropout and input shuffling (default: random, "
              "or 0 with --deterministic); recorded in <output_dir>/run_seed.json and reused on "
              "resume.")
  define_once(flags.DEFINE_bool, "shuffle_train_input", True,
              "Extra: shuffle the training input (as the official scripts do). "
              "--shuffle_train_input=false reads the training records in file order (files in the "
              "order given, then again from the first), to reproduce a run step for step.")


def runtime_config(f=FLAGS):
  """RuntimeConfig from the runtime flags."""
  return RuntimeConfig(
      strategy=f.strategy, use_tpu=f.use_tpu, tpu_name=f.tpu_name, tpu_zone=f.tpu_zone,
      gcp_project=f.gcp_project, master=f.master, precision=f.precision,
      jit_compile=f.jit_compile, gradient_accumulation_steps=f.gradient_accumulation_steps,
      log_every_n_steps=f.log_every_n_steps, steps_per_loop=f.iterations_per_loop,
      recompute=f.recompute, deterministic=f.deterministic, seed=f.seed,
      worker_wait_seconds=f.worker_wait_seconds, xla_whole_step=f.xla_whole_step,
      pad_eval_batches=f.pad_eval_batches, tpu_connect_timeout=f.tpu_connect_timeout,
      tpu_name_spelling=_tpu_spelling())


def _tpu_spelling(argv=None):
  """"tpu" when the TPU was named with --tpu (the model garden's alias), else "tpu_name"."""
  argv = sys.argv if argv is None else argv
  return "tpu" if any(a in ("--tpu", "-tpu") or a.startswith(("--tpu=", "-tpu="))
                      for a in argv) else "tpu_name"
