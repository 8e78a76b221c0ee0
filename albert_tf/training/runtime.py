"""How a job runs, whatever the task: devices, precision, compilation, seeds (RuntimeConfig).

The scripts fill it from the official TPU flags (--use_tpu, --tpu_name, ..., --iterations_per_loop)
and our extras (--strategy, --precision, --jit_compile, --gradient_accumulation_steps,
--log_every_n_steps, --recompute, --deterministic, --seed); the runner applies it.
"""

import dataclasses
import os
from typing import Optional

from albert_tf.common import fileio, output_layout
from albert_tf.errors import AlbertError

SEED_FILE = output_layout.SEED_FILE


@dataclasses.dataclass
class RuntimeConfig:
  """Devices and numerics of a run (see albert_tf/cli/training_flags.py for each flag's meaning)."""
  strategy: str = "auto"
  use_tpu: bool = False
  tpu_name: Optional[str] = None
  tpu_zone: Optional[str] = None
  gcp_project: Optional[str] = None
  master: Optional[str] = None
  precision: str = "fp32"
  jit_compile: bool = False
  gradient_accumulation_steps: int = 1
  log_every_n_steps: int = 100
  steps_per_loop: int = 1000  # the official --iterations_per_loop
  recompute: str = "none"
  deterministic: bool = False
  seed: Optional[int] = None
  worker_wait_seconds: Optional[float] = None  # None: cluster.DEFAULT_WAIT_S

  def __post_init__(self):
    # --strategy, --precision, --recompute and --gradient_accumulation_steps are checked where
    # they are used (strategy.get_strategy, Trainer), which know the allowed values.
    if self.log_every_n_steps < 1:
      raise AlbertError(f"--log_every_n_steps={self.log_every_n_steps} is invalid: expected >= 1")
    self.steps_per_loop = max(1, int(self.steps_per_loop))

  def trainer_kwargs(self):
    """The Trainer keyword arguments this runtime sets."""
    return dict(precision=self.precision, jit_compile=self.jit_compile,
                gradient_accumulation_steps=self.gradient_accumulation_steps,
                log_every_n_steps=self.log_every_n_steps, steps_per_loop=self.steps_per_loop,
                recompute=self.recompute)

  def make_strategy(self):
    """The tf.distribute strategy this runtime selects."""
    from albert_tf.training import strategy as strategy_lib  # lazy: TensorFlow, after the flags
    return strategy_lib.get_strategy(
        strategy=self.strategy, use_tpu=self.use_tpu, tpu_name=self.tpu_name,
        tpu_zone=self.tpu_zone, gcp_project=self.gcp_project, master=self.master,
        worker_wait_seconds=self.worker_wait_seconds)


def resolve_seed(seed, deterministic, output_dir):
  """The run's seed: `seed`, else the one a previous run recorded in output_dir (a resume),
  else 0 with `deterministic`, else None (random). A seed in use is recorded in output_dir."""
  path = os.path.join(output_dir, SEED_FILE) if output_dir else None
  if seed is None and path and os.path.exists(path):
    seed = fileio.read_json(path).get("seed")
  if seed is None and deterministic:
    seed = 0
  if seed is not None and path:
    fileio.write_json(path, {"seed": int(seed), "deterministic": bool(deterministic)})
  return seed


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
