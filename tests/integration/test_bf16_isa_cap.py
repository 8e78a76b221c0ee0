"""bfloat16 under a oneDNN ISA cap below AVX-512 (ONEDNN_MAX_CPU_ISA=AVX2, how one machine plays
an older CPU class): TensorFlow still sends bfloat16 matmuls to oneDNN, which has none, and the
process dies with SIGSEGV. Our scripts must stop before any work with one line, and
--export_precision=auto must export fp32 without timing bf16.

Only meaningful where TensorFlow routes bfloat16 to oneDNN (CPU flags avx512f or avx_ne_convert);
on an AVX2-only CPU bfloat16 goes to Eigen and the cap is moot (tests/test_cpu.py covers that
rule)."""

import json
import os
import subprocess
import sys

import pytest

from albert_tf.common import cpu as cpu_lib
from tests.helpers import finetune
from tests.helpers.paths import REPO
from tests.helpers.scripts import describe, last_line
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import write_tiny_config

_FLAGS = set(cpu_lib.cpu_info()["flags"] or ())
pytestmark = pytest.mark.skipif(
    not {"avx512f", "avx_ne_convert"} & _FLAGS,
    reason="TensorFlow sends bfloat16 matmuls to oneDNN only on AVX-512/AVX-NE-CONVERT CPUs")

# oneDNN forced on (TF_ENABLE_ONEDNN_OPTS=1) whatever the CPU, and capped at AVX2.
_CAPPED = {"ONEDNN_MAX_CPU_ISA": "AVX2", "TF_ENABLE_ONEDNN_OPTS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}


def _run(args, cwd, script="run_classifier.py", extra_env=None):
  env = dict(os.environ, PYTHONPATH=REPO)
  env.update(_CAPPED, **(extra_env or {}))
  return subprocess.run([sys.executable, os.path.join(REPO, script)] + args, cwd=cwd, env=env,
                        capture_output=True, text=True, timeout=600, check=False)


def test_the_cap_really_crashes_a_bfloat16_matmul():
  """The premise: without our check, the first bfloat16 matmul ends the process."""
  code = ("import tensorflow as tf\n"
          "print(tf.matmul(tf.ones([4, 8], tf.bfloat16), tf.ones([8, 3], tf.bfloat16)).dtype)\n")
  proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **_CAPPED),
                        capture_output=True, text=True, timeout=300, check=False)
  assert proc.returncode < 0, ("a bfloat16 matmul ran under ONEDNN_MAX_CPU_ISA=AVX2: "
                               "TensorFlow fixed it, drop albert_tf/common/cpu.py's check "
                               f"({describe(proc)})")


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory):
  root = tmp_path_factory.mktemp("bf16_cap")
  make_tiny_spm_model(str(root))
  finetune.write_mrpc(str(root / "glue"))
  write_tiny_config(str(root / "albert_config.json"))
  return root


def _classifier_args(out, *extra):
  return ["--task_name=MRPC", "--data_dir=glue", f"--output_dir={out}",
          "--albert_config_file=albert_config.json", "--spm_model_file=tiny_spm.model",
          "--do_lower_case", "--max_seq_length=24", "--train_step=2", "--warmup_step=0",
          "--save_checkpoints_steps=2", "--train_batch_size=4", "--learning_rate=1e-3",
          *extra]


@pytest.mark.parametrize("flags,named", [
    (["--do_train", "--precision=bf16"], "--precision=bf16"),
    (["--do_train", "--export_dir=serving", "--export_precision=bf16"],
     "--export_precision=bf16"),
])
def test_bf16_under_the_cap_stops_before_training(task_dir, flags, named):
  out = f"out_{named.strip('-').replace('=', '_')}"
  proc = _run(_classifier_args(out, *flags), cwd=str(task_dir))
  assert proc.returncode == 2, describe(proc)
  assert last_line(proc.stderr) == (
      f"error: {named}: ONEDNN_MAX_CPU_ISA=AVX2 leaves oneDNN no bfloat16 matmul while "
      "TensorFlow sends it one (the CPU has AVX-512 or AVX-NE-CONVERT): the process would "
      "crash; unset ONEDNN_MAX_CPU_ISA (or set it to AVX512_CORE or above), or set "
      "TF_ENABLE_ONEDNN_OPTS=0"), describe(proc)
  assert "Traceback" not in proc.stderr
  assert not (task_dir / out).exists()  # stopped before any work: not even the output dir


def test_export_auto_under_the_cap_exports_fp32_without_timing_bf16(task_dir):
  proc = _run(_classifier_args("out_auto", "--do_train", "--export_dir=serving_auto",
                               "--export_precision=auto"), cwd=str(task_dir))
  assert proc.returncode == 0, describe(proc)
  assert ("--export_precision=auto: fp32, without timing bf16: ONEDNN_MAX_CPU_ISA=AVX2 leaves "
          "oneDNN no bfloat16 matmul") in proc.stderr
  versions = [p for p in os.listdir(task_dir / "serving_auto") if p.isdigit()]
  assert len(versions) == 1
  info = json.loads((task_dir / "serving_auto" / versions[0] / "assets.extra" /
                     "albert_export.json").read_text())
  choice = info["precision_choice"]
  assert choice["chosen"] == "fp32" and "median_ms" not in choice
  assert choice["bf16_not_timed"].startswith("ONEDNN_MAX_CPU_ISA=AVX2 leaves oneDNN")
  # Without the cap (TF_ENABLE_ONEDNN_OPTS=0: Eigen), the same flags time both as before.
  proc = _run(_classifier_args("out_auto", "--export_dir=serving_eigen",
                               "--export_precision=auto"), cwd=str(task_dir),
              extra_env={"TF_ENABLE_ONEDNN_OPTS": "0"})
  assert proc.returncode == 0, describe(proc)
  version = [p for p in os.listdir(task_dir / "serving_eigen") if p.isdigit()][0]
  choice = json.loads((task_dir / "serving_eigen" / version / "assets.extra" /
                       "albert_export.json").read_text())["precision_choice"]
  assert set(choice["median_ms"]) == {"fp32", "bf16"} and "bf16_not_timed" not in choice
