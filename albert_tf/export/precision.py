"""The compute precision of a serving export: a copy of the model with float32 or bfloat16 weights.

Training precision and serving precision are separate choices. A model trained under
mixed_bfloat16 keeps float32 variables and casts each one to bfloat16 at every use; with ALBERT's
shared layers that is L casts of the same weights per request (a quarter of the op time of an
ALBERT-base request at batch 1, profiled). A serving copy instead holds its weights in the compute
dtype, so a request casts no weights:

  fp32  float32 weights and math (the default; the reference numerics, on any device).
  bf16  bfloat16 weights and matmuls; LayerNorm keeps float32 scale/offset and statistics and the
        heads return float32 logits and probabilities. Probabilities move by 1e-3 to 1e-2; see
        the README's serving section. Whether it is faster depends on the CPU and on TensorFlow's
        oneDNN ops (bench/speed/precision.py measures it): the bfloat16 matmuls are only fast where
        oneDNN runs them with native bfloat16 instructions (AVX512-BF16 `vdpbf16ps`, AMX). With
        the oneDNN ops off (TF_ENABLE_ONEDNN_OPTS=0) Eigen converts them to float32 sgemm, and
        without those instructions oneDNN emulates them: 1.1-2.5x slower than fp32 (README,
        "Serving precision"); the export then warns in one line.
  auto  times one batch-1 request at max_seq_length through the real serving function of both
        (`choose_serving`), exports the faster and records the timings in the export's info.
"""

import statistics
import time

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras

from albert_tf.common.cpu import BF16_FLAGS, bf16_matmul_problem, cpu_info, onednn_enabled
from albert_tf.errors import AlbertError, NotFiniteError
from albert_tf.export.saved_model_writer import PRECISION_CHOICE

EXPORT_PRECISIONS = {"fp32": "float32", "bf16": "bfloat16"}
AUTO = "auto"
# What --export_precision and the exporters' `precision=` accept.
PRECISION_CHOICES = tuple(EXPORT_PRECISIONS) + (AUTO,)

# "auto": untimed calls per precision first (tracing, oneDNN primitive creation), then
# interleaved timed rounds: at least PROBE_MIN_ROUNDS, then until PROBE_BUDGET_S seconds of timing
# or PROBE_MAX_ROUNDS rounds.
PROBE_WARMUP_CALLS = 2
PROBE_MIN_ROUNDS = 3
PROBE_MAX_ROUNDS = 15
PROBE_BUDGET_S = 2.0


def check_precision(precision):
  """Raises a one-line AlbertError unless `precision` is fp32, bf16 or auto."""
  if precision not in PRECISION_CHOICES:
    raise AlbertError(f"--export_precision={precision!r}: expected one of "
                      f"{', '.join(PRECISION_CHOICES)}")


def serving_copy(model, precision="fp32"):
  """Returns `model` itself if it already computes in `precision`, else a copy that does.

  Args:
    model: a built albert_tf model (classifier, multiple choice, SQuAD, ...) with `get_config`.
    precision: "fp32" or "bf16" (the names of --precision and --export_precision); "auto" is
      resolved by `choose_serving`, which builds both.
  Returns:
    a model with the same architecture and weights whose variables are in the compute dtype.
  """
  check_precision(precision)
  if precision == AUTO:
    raise AlbertError("--export_precision=auto: a serving copy is fp32 or bf16; "
                      "choose_serving times both and picks one")
  policy_name = EXPORT_PRECISIONS[precision]
  if model.dtype_policy.name == policy_name:
    return model
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy(policy_name)
  try:
    copy = model.__class__.from_config(model.get_config())
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)
  sources, targets = model.weights, copy.weights
  if len(sources) != len(targets):
    raise AlbertError(f"serving copy of {model.name} has {len(targets)} weights, the model "
                      f"{len(sources)}; cannot export at {precision}")
  for source, target in zip(sources, targets):
    if source.shape != target.shape:
      raise AlbertError(f"serving copy of {model.name}: weight {target.name} has shape "
                        f"{target.shape}, the model's {source.name} {source.shape}")
    # LayerNorm weights stay float32 in a bfloat16 copy (see layers.initializers.layer_norm).
    target.assign(tf.cast(source, target.dtype))
  return copy


# --------------------------------------------------------------------------- the CPU
def machine_summary():
  """One line for benchmark reports: CPU model, its bfloat16-related flags, oneDNN on/off."""
  cpu, onednn = cpu_info(), onednn_enabled()
  flags = " ".join(f for f in BF16_FLAGS if f in (cpu["flags"] or ())) or (
      "none" if cpu["flags"] is not None else "unknown")
  amx = "yes" if any(f.startswith("amx") for f in cpu["flags"] or ()) else "no"
  state = {True: "on", False: "off", None: "unknown"}[onednn]
  return (f"{cpu['model']} ({cpu['vendor'] or 'vendor unknown'}); bf16-related flags: {flags}; "
          f"AMX: {amx}; TensorFlow {tf.__version__}, oneDNN ops {state}")


def bf16_slowdown(cpu, onednn):
  """Why a bf16 export would serve slower than fp32 on this machine, or None.

  Args:
    cpu: `cpu_info()`; nothing is claimed where its flags are unknown (not x86 Linux).
    onednn: `onednn_enabled()`.
  Returns:
    a short reason, or None (bf16 can be faster here: native bfloat16 dot products; whether it
    is depends on the CPU's relative bf16/fp32 throughput, which `auto` measures).
  """
  if cpu["flags"] is None:
    return None
  if onednn is False:
    return ("TensorFlow's oneDNN ops are off in this process (TF_ENABLE_ONEDNN_OPTS=0, or a "
            "CPU without AVX512_VNNI/AVX512_BF16/AMX), so bfloat16 matmuls run through Eigen "
            "in float32")
  if not {"avx512_bf16", "amx_bf16"} & set(cpu["flags"]):
    return (f"this CPU ({cpu['model']}) has neither AVX512-BF16 nor AMX-BF16, so oneDNN "
            f"emulates bfloat16 matmuls")
  return None


# --------------------------------------------------------------------------- choosing
def probe_features(config, shape, names=("input_ids", "input_mask", "segment_ids")):
  """One request for timing: int32 `shape` tensors, every position real.

  Args:
    config: the model's AlbertConfig (ids stay below vocab_size and type_vocab_size).
    shape: e.g. [1, max_seq_length], or [1, num_choices, max_seq_length].
    names: the token inputs to build; "p_mask" is all zeros (no position excluded).
  """
  rng = np.random.default_rng(0)
  seq_len = shape[-1]
  segments = (np.arange(seq_len) >= seq_len // 2).astype(np.int32)
  values = {
      "input_ids": rng.integers(min(5, config.vocab_size - 1), config.vocab_size, size=shape),
      "input_mask": np.ones(shape, np.int32),
      "segment_ids": np.broadcast_to(np.minimum(segments, config.type_vocab_size - 1), shape),
      "p_mask": np.zeros(shape, np.int32)}
  return {name: tf.constant(values[name].astype(np.int32)) for name in names}


def _time_interleaved(calls):
  """{name: [ms]} of `calls` ({name: fn}), one call of each per round, order alternating."""
  names = list(calls)
  for name in names:
    for _ in range(PROBE_WARMUP_CALLS):
      calls[name]()
  times = {name: [] for name in names}
  start = time.perf_counter()
  for r in range(PROBE_MAX_ROUNDS):
    if r >= PROBE_MIN_ROUNDS and time.perf_counter() - start > PROBE_BUDGET_S:
      break
    for name in (names if r % 2 == 0 else names[::-1]):
      t = time.perf_counter()
      calls[name]()
      times[name].append((time.perf_counter() - t) * 1000)
  return times


def choose_serving(model, precision, build_module, probe, request="batch 1"):
  """The serving module of `model` at `precision`; for "auto", the faster of fp32 and bf16.

  Args:
    model: the trained model (any training precision).
    precision: "fp32", "bf16" or "auto".
    build_module: serving copy -> the tf.Module whose signatures the export saves.
    probe: module -> a function of no arguments that runs one timing request (batch 1 at the
      export's max_seq_length, every position real: `probe_features`) through the module's
      token-id serving function, the function its signature saves. It also runs once at
      every precision, to check that the outputs are finite (None: no such check).
    request: what `probe` sends, for the record (e.g. "batch 1 x 128 tokens").
  Raises:
    NotFiniteError: the probe's outputs hold NaN/inf (a diverged run's weights).
  Returns:
    (module, measured): measured is None for fp32/bf16; for "auto" {PRECISION_CHOICE: record}
    for the export's info: the chosen precision, the median ms per request of both, their
    paired ratio, the rounds, the CPU and whether oneDNN was on.
  """
  check_precision(precision)
  module, measured = _choose_serving(model, precision, build_module, probe, request)
  # One probe request: finite weights can still overflow (a diverged run's last checkpoint).
  outputs = tf.nest.flatten(probe(module)()) if probe is not None else []
  if not all(bool(tf.reduce_all(tf.math.is_finite(o))) for o in outputs if o.dtype.is_floating):
    raise NotFiniteError(f"the model's outputs on a probe request ({request}) hold NaN/inf: "
                         f"a diverged run's weights; nothing was exported")
  return module, measured


def _choose_serving(model, precision, build_module, probe, request):
  cpu, onednn = cpu_info(), onednn_enabled()
  crash = bf16_matmul_problem(cpu, onednn) if precision != "fp32" else None
  if precision != AUTO:
    if precision == "bf16":
      if crash:
        raise AlbertError(f"--export_precision=bf16: {crash}")
      reason = bf16_slowdown(cpu, onednn)
      if reason:
        logging.warning("--export_precision=bf16: %s: bf16 serves slower than fp32 here "
                        "(1.1-2.5x measured); export fp32, or auto to time both", reason)
    return build_module(serving_copy(model, precision)), None
  if crash:  # nothing to time: a bf16 call would end the process
    logging.warning("--export_precision=auto: fp32, without timing bf16: %s", crash)
    return build_module(serving_copy(model, "fp32")), {PRECISION_CHOICE: {
        "requested": AUTO, "chosen": "fp32", "request": request, "bf16_not_timed": crash,
        "cpu": cpu["model"], "cpu_flags": [f for f in cpu["flags"] or () if f in BF16_FLAGS],
        "onednn": onednn, "tensorflow": tf.__version__}}
  modules = {p: build_module(serving_copy(model, p)) for p in EXPORT_PRECISIONS}
  times = _time_interleaved({p: probe(m) for p, m in modules.items()})
  # The median of per-round ratios: a drift in machine speed hits both calls of a round alike.
  ratio = statistics.median(b / f for b, f in zip(times["bf16"], times["fp32"]))
  chosen = "bf16" if ratio < 1.0 else "fp32"  # a tie keeps the reference numerics
  choice = {"requested": AUTO, "chosen": chosen, "request": request,
            "median_ms": {p: round(statistics.median(ms), 3) for p, ms in times.items()},
            "bf16_vs_fp32": round(ratio, 3), "rounds": len(times["fp32"]),
            "cpu": cpu["model"],
            "cpu_flags": [f for f in cpu["flags"] or () if f in BF16_FLAGS],
            "onednn": onednn, "tensorflow": tf.__version__}
  logging.info("--export_precision=auto: %s (%s: fp32 %.1f ms, bf16 %.1f ms, bf16/fp32 %.2f "
               "over %d rounds on %s)", chosen, request, choice["median_ms"]["fp32"],
               choice["median_ms"]["bf16"], choice["bf16_vs_fp32"], choice["rounds"],
               choice["cpu"])
  return modules[chosen], {PRECISION_CHOICE: choice}
