"""How a job runs, whatever the task: devices, precision, compilation, seeds (RuntimeConfig).

The scripts fill it from the official TPU flags (--use_tpu, --tpu_name, ..., --iterations_per_loop)
and our extras (--strategy, --precision, --jit_compile, --xla_whole_step, --pad_eval_batches,
--gradient_accumulation_steps, --log_every_n_steps, --recompute, --deterministic, --seed); the
runner applies it.

`on_tpu` is the one rule for "this run is on a TPU" from the flags: bucketing, the bf16 CPU
check, where the stop flag is read and eval padding all ask it (never the flags themselves);
once a strategy exists, `strategy.is_tpu_strategy` answers for it. This module is a leaf of
training/: `strategy` imports it, never the reverse (`strategy.make_strategy(runtime)`).
"""

import dataclasses
import os
import zlib
from typing import Optional

from albert_tf.common import fileio, output_layout
from albert_tf.errors import AlbertError

SEED_FILE = output_layout.SEED_FILE


def on_tpu(strategy="auto", use_tpu=False, tpu_name=None):
  """Whether a run is on a TPU: --strategy=tpu, or --strategy=auto with --use_tpu or a TPU name
  (--tpu / --tpu_name). Another explicit --strategy wins over --use_tpu, as in
  `strategy.get_strategy`, which asks this function too."""
  name = (strategy or "auto").lower()
  return name == "tpu" or (name == "auto" and bool(use_tpu or tpu_name))


@dataclasses.dataclass
class RuntimeConfig:
  """Devices and numerics of a run (see albert_tf/cli/training_flags.py for each flag's meaning)."""
  strategy: str = "auto"
  use_tpu: bool = False
  tpu_name: Optional[str] = None
  tpu_zone: Optional[str] = None
  gcp_project: Optional[str] = None
  master: Optional[str] = None
  # Seconds allowed for connecting to the TPU (None: strategy.TPU_CONNECT_TIMEOUT_S), and how the
  # user spelled the TPU's flag ("tpu" or "tpu_name"), for messages.
  tpu_connect_timeout: Optional[float] = None
  tpu_name_spelling: str = "tpu_name"
  precision: str = "fp32"
  jit_compile: bool = False
  gradient_accumulation_steps: int = 1
  log_every_n_steps: int = 100
  steps_per_loop: int = 1000  # the official --iterations_per_loop
  recompute: str = "none"
  deterministic: bool = False
  seed: Optional[int] = None
  worker_wait_seconds: Optional[float] = None  # None: cluster.DEFAULT_WAIT_S
  # Compile the whole replica step (forward, loss, backward, clipping, optimizer update,
  # metrics, accumulation) with XLA, and give every input static shapes, as a TPU does.
  xla_whole_step: bool = False
  # Pad the last eval/predict batches to the full global batch (padding rows masked out).
  pad_eval_batches: bool = False

  def __post_init__(self):
    # --strategy, --precision, --recompute and --gradient_accumulation_steps are checked where
    # they are used (strategy.get_strategy, Trainer), which know the allowed values.
    if self.log_every_n_steps < 1:
      raise AlbertError(f"--log_every_n_steps={self.log_every_n_steps} is invalid: expected >= 1")
    self.steps_per_loop = max(1, int(self.steps_per_loop))

  @property
  def on_tpu(self):
    """Whether this run is on a TPU (see `on_tpu`)."""
    return on_tpu(self.strategy, self.use_tpu, self.tpu_name)

  @property
  def static_shapes(self):
    """Whether every input must have static shapes (TPU, --xla_whole_step): no length
    bucketing, eval/predict batches padded to the full batch."""
    return self.on_tpu or self.xla_whole_step

  def trainer_kwargs(self):
    """The Trainer keyword arguments this runtime sets."""
    return dict(precision=self.precision, jit_compile=self.jit_compile,
                gradient_accumulation_steps=self.gradient_accumulation_steps,
                log_every_n_steps=self.log_every_n_steps, steps_per_loop=self.steps_per_loop,
                recompute=self.recompute, on_tpu=self.on_tpu or None,
                xla_whole_step=self.xla_whole_step,
                pad_eval_batches=self.static_shapes or self.pad_eval_batches)


def resolve_seed(seed, deterministic, output_dir):
  """The run's seed: `seed`, else the one a previous run recorded in output_dir (a resume),
  else 0 with `deterministic`, else None (random). A seed in use is recorded in output_dir."""
  path = os.path.join(output_dir, SEED_FILE) if output_dir else None
  if seed is None and path and fileio.exists(path):
    seed = fileio.read_json(path).get("seed")
  if seed is None and deterministic:
    seed = 0
  if seed is not None and path:
    fileio.write_json(path, {"seed": int(seed), "deterministic": bool(deterministic)})
  return seed


def input_order_seed(seed, output_dir):
  """The training input order's seed when the task was given none: the run's seed, else one
  derived from the output directory (None without one).

  A resumed run skips the batches its checkpoint already trained on (training/checkpointing.py),
  which is exact only if it reads the same order again; an unseeded shuffle would draw another.
  Derived from the directory, the seed is the same on every resume and on every worker of a
  multi-worker run (they share --output_dir; sharding records after the shuffle needs one
  order), and two runs in two directories still read different orders.
  """
  if seed is not None:
    return int(seed)
  if not output_dir:
    return None
  path = output_dir if "://" in output_dir else os.path.abspath(output_dir)
  return zlib.crc32(path.encode("utf-8")) & 0x7FFFFFFF


def apply_process_settings(runtime, output_dir=None):
  """Process-wide settings the runtime asks for (seeds, op determinism); returns the seed.

  Op determinism needs every random op seeded, so `deterministic` always runs with a seed
  (weights are initialised from it).
  """
  import tensorflow as tf  # lazy: cli/training_flags.py builds RuntimeConfig first
  import tf_keras  # lazy: as tensorflow
  seed = resolve_seed(runtime.seed, runtime.deterministic, output_dir)
  if seed is not None:
    tf_keras.utils.set_random_seed(int(seed))
  if runtime.deterministic:
    tf.config.experimental.enable_op_determinism()
  return seed
