"""This machine's CPU as TensorFlow's oneDNN ops see it: model, ISA flags, oneDNN on/off, and
whether a bfloat16 matmul can run at all.

Why the last one: TensorFlow routes bfloat16 MatMul/BatchMatMul to oneDNN whenever the CPU has
AVX-512 (or AVX-NE-CONVERT), judging by the CPU's own flags. `ONEDNN_MAX_CPU_ISA` (or its old name
`DNNL_MAX_CPU_ISA`) caps what oneDNN may use; capped below AVX512_CORE, oneDNN has no bfloat16
matmul for the call TensorFlow makes and the process dies with SIGSEGV (measured: TensorFlow 2.20,
AMD EPYC with AVX512-BF16, caps SSE41, AVX, AVX2, AVX2_VNNI and AVX2_VNNI_2 all crash on one
[4, 8] x [8, 3] bfloat16 matmul; AVX512_CORE and above run). A real AVX2-only CPU is not affected:
TensorFlow then sends bfloat16 matmuls to Eigen. So the check is about the cap, read before any
bfloat16 work starts, so that a run stops with one line instead of a crash after hours.

TensorFlow is imported only inside `onednn_enabled()`.
"""

import os
import platform

# The CPU description (Linux).
CPUINFO = "/proc/cpuinfo"
# The CPU flags that decide how bfloat16 matmuls run (x86 names as in /proc/cpuinfo).
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "amx_tile", "amx_int8", "avx512_fp16", "avx512_vnni",
              "avx_vnni", "avx_ne_convert")
# The environment variables oneDNN reads for its ISA cap (the second is its old name).
ISA_CAP_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
# oneDNN's cap values under which its bfloat16 matmul is missing (ISAs below AVX512_CORE).
NO_BF16_MATMUL_CAPS = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2")
# TensorFlow's oneDNN matmul kernels read it (as a bool: 1/true) when they are built: each then
# reorders its weights into oneDNN's blocked layout on its first call and keeps them. Right for
# serving, where weights never change (bench/peers/shared_weights.py); in training every step
# would run on the first step's weights.
FROZEN_WEIGHTS_VARIABLE = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"


def cpu_info(path=None):
  """{"model", "vendor", "flags"} of this machine's CPU; flags is None where unknown.

  Reads /proc/cpuinfo (x86 Linux lists the ISA extensions as `flags`); elsewhere the model is
  platform.processor() and the flags unknown.
  """
  fields = {}
  try:
    with open(path or CPUINFO, encoding="utf-8") as f:
      for line in f:
        key, _, value = line.partition(":")
        key = key.strip()
        if key and key not in fields:
          fields[key] = value.strip()
        if not line.strip() and fields:  # the first processor's block is enough
          break
  except OSError:
    pass
  flags = fields.get("flags")
  return {"model": fields.get("model name") or platform.processor() or "unknown CPU",
          "vendor": fields.get("vendor_id", ""),
          "flags": None if flags is None else sorted(set(flags.split()))}


def onednn_enabled():
  """Whether TensorFlow runs its oneDNN ops in this process, or None if it cannot tell.

  On Linux TensorFlow turns them on for CPUs with AVX512_VNNI, AVX512_BF16, AVX_VNNI or AMX, and
  TF_ENABLE_ONEDNN_OPTS=0/1 overrides that (read once per process).
  """
  try:
    from tensorflow.python.util import _pywrap_util_port  # lazy: private, may be absent
    return bool(_pywrap_util_port.IsMklEnabled())
  except (ImportError, AttributeError):
    return None


def isa_cap(environ=None):
  """(variable, value) of the oneDNN ISA cap in force, or None (no cap, or "ALL")."""
  environ = os.environ if environ is None else environ
  for name in ISA_CAP_VARIABLES:
    value = environ.get(name, "").strip().upper()
    if value and value != "ALL":
      return name, value
  return None


def bf16_matmul_problem(cpu, onednn, environ=None):
  """Why a bfloat16 matmul would crash this process, or None if it can run.

  Args:
    cpu: `cpu_info()`.
    onednn: `onednn_enabled()`; with oneDNN off, Eigen runs bfloat16 matmuls anywhere.
    environ: the environment to read the ISA cap from (default os.environ).
  Returns:
    one clause for an error line, e.g. "ONEDNN_MAX_CPU_ISA=AVX2 leaves oneDNN no bfloat16
    matmul while TensorFlow sends it one (this CPU has AVX-512): the process would crash".
  """
  cap = isa_cap(environ)
  if not cap or onednn is False or cap[1] not in NO_BF16_MATMUL_CAPS:
    return None
  if cpu["flags"] is None or not {"avx512f", "avx_ne_convert"} & set(cpu["flags"]):
    # Not x86 Linux (nothing known), or TensorFlow sends bfloat16 matmuls to Eigen on this CPU
    # (its IsBF16SupportedByOneDNNOnThisCPU: AVX512F or AVX_NE_CONVERT): the cap is moot.
    return None
  return (f"{cap[0]}={cap[1]} leaves oneDNN no bfloat16 matmul while TensorFlow sends it one "
          f"(the CPU has AVX-512 or AVX-NE-CONVERT): the process would crash; unset {cap[0]} "
          f"(or set it to AVX512_CORE or above), or set TF_ENABLE_ONEDNN_OPTS=0")


def frozen_weights_problem(onednn, environ=None):
  """Why training in this process would go wrong, or None: TF_ONEDNN_ASSUME_FROZEN_WEIGHTS set
  to a true value (TensorFlow's reading: "1" or "true", any case) with oneDNN on (onednn None,
  unknown, counts as on). Measured: a Keras fit() with it set keeps computing the first step's
  outputs, its loss flat instead of falling.
  """
  value = (os.environ if environ is None else environ).get(FROZEN_WEIGHTS_VARIABLE, "")
  if onednn is False or value.strip().lower() not in ("1", "true"):
    return None
  return (f"{FROZEN_WEIGHTS_VARIABLE}={value} makes TensorFlow's oneDNN matmuls keep the weights "
          f"they first saw, so training would run on stale weights; it is a setting for serving "
          f"processes only: unset it for this run")
