"""The shared flags and their typed configs: --recompute reaches the trainer's arguments."""

import types

import pytest
from absl import flags

from albert_tf.cli import training_flags


def test_recompute_flag_reaches_the_trainer_kwargs():
  training_flags.define_runtime_flags()
  flag = flags.FLAGS["recompute"]
  assert flag.default == "none"
  assert flag.parser.parse("layer") == "layer" and flag.parser.parse("attention") == "attention"
  with pytest.raises(ValueError):
    flag.parser.parse("everything")
  f = types.SimpleNamespace(strategy="auto", use_tpu=False, tpu_name=None, tpu_zone=None,
                            gcp_project=None, master=None, precision="fp32", jit_compile=False,
                            gradient_accumulation_steps=1, log_every_n_steps=1,
                            iterations_per_loop=10, recompute="layer", deterministic=False,
                            seed=None, worker_wait_seconds=30, xla_whole_step=False,
                            pad_eval_batches=False, tpu_connect_timeout=5)
  assert training_flags.runtime_config(f).trainer_kwargs()["recompute"] == "layer"
  assert training_flags.runtime_config(f).tpu_connect_timeout == 5
  # Messages name the TPU's flag as the user typed it.
  assert training_flags._tpu_spelling(["x", "--tpu=grpc://h:8470"]) == "tpu"  # pylint: disable=protected-access
  assert training_flags._tpu_spelling(["x", "--tpu_name=t"]) == "tpu_name"  # pylint: disable=protected-access
  assert training_flags.runtime_config(f).worker_wait_seconds == 30
  assert flags.FLAGS["worker_wait_seconds"].default == 600
