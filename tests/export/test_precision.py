"""Serving precision (--export_precision): float32 and bfloat16 copies of trained models, a
bfloat16 export served from a fresh process, "auto" (the faster of the two, timed at export and
recorded), and the one-line warning where bf16 cannot be faster."""

import json
import logging
import os
import pathlib
import types

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf.common import cpu as cpu_lib
from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.export import export_classifier, export_multiple_choice
from albert_tf.export import precision as precision_lib
from albert_tf.export.precision import serving_copy
from albert_tf.export.squad_serving import export_squad_model
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.models.squad import AlbertSquadModel
from tests.helpers import finetune, glue_fixtures, scripts
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_config_dict, write_tiny_config

SEQ = 16


def _inputs(batch=3, seed=0, extra=()):
  rng = np.random.default_rng(seed)
  shape = (batch,) + tuple(extra) + (SEQ,)
  mask = np.ones(shape, np.int32)
  mask[..., SEQ - 4:] = 0
  return {"input_ids": (rng.integers(5, 400, size=shape) * mask).astype(np.int32),
          "input_mask": mask, "segment_ids": (np.arange(SEQ) >= 6).astype(np.int32) * mask,
          "p_mask": np.zeros(shape, np.int32)}


def _randomize(model, seed=0, std=0.1):
  """Weights large enough that bfloat16 rounding visibly moves the outputs."""
  rng = np.random.default_rng(seed)
  for v in model.weights:
    if "gamma" in v.name:
      v.assign(1.0 + rng.normal(0, 0.1, v.shape))
    else:
      v.assign(rng.normal(0, std, v.shape))


def _classifier(policy="float32", seed=0):
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy(policy)
  try:
    model = AlbertClassifier(AlbertConfig.from_dict(tiny_config_dict()), num_classes=3)
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)
  _randomize(model, seed)
  return model


def test_fp32_copy_of_a_mixed_precision_model_computes_in_float32():
  mixed = _classifier("mixed_bfloat16")
  copy = serving_copy(mixed, "fp32")
  assert copy is not mixed and copy.dtype_policy.name == "float32"
  assert {w.dtype for w in copy.weights} == {tf.float32}
  for source, target in zip(mixed.weights, copy.weights):
    np.testing.assert_array_equal(source.numpy(), target.numpy())
  # The reference: a float32 model built directly with the same weights.
  reference = AlbertClassifier(mixed.config, num_classes=3)
  reference.set_weights(mixed.get_weights())
  x = _inputs()
  expected = reference(x, training=False)["logits"].numpy()
  np.testing.assert_allclose(copy(x, training=False)["logits"].numpy(), expected, rtol=1e-6,
                             atol=1e-6)
  # ...while the mixed model itself rounds through bfloat16.
  assert np.abs(mixed(x, training=False)["logits"].numpy() - expected).max() > 1e-4


def test_bf16_copy_keeps_layer_norm_in_float32_and_stays_close():
  model = _classifier()
  assert serving_copy(model, "fp32") is model  # already float32: no copy
  copy = serving_copy(model, "bf16")
  assert copy.dtype_policy.name == "bfloat16"
  layers = list(copy.submodules)
  norms = [w for l in layers if isinstance(l, tf_keras.layers.LayerNormalization)
           for w in l.weights]
  assert len(norms) == 2 * 3  # embeddings + the shared attention and FFN blocks, gamma + beta
  assert all(w.dtype == tf.float32 for w in norms)
  dense = [w for l in layers if isinstance(l, tf_keras.layers.Dense) for w in l.weights]
  assert len(dense) >= 2 * 7 and all(w.dtype == tf.bfloat16 for w in dense)
  assert copy.encoder.embeddings.weights[0].dtype == tf.bfloat16
  x = _inputs(batch=8)
  expected = model(x, training=False)
  got = copy(x, training=False)
  assert got["probabilities"].dtype == tf.float32
  diff = np.abs(got["probabilities"].numpy() - expected["probabilities"].numpy()).max()
  assert 0 < diff < 0.03, diff  # rounded (so really bfloat16), but close
  np.testing.assert_allclose(got["logits"].numpy(), expected["logits"].numpy(), atol=0.1)
  # The original model is untouched by the copy.
  assert {w.dtype for w in model.weights} == {tf.float32}


@pytest.mark.parametrize("kind", ["multiple_choice", "squad_v2"])
def test_bf16_copy_of_every_task_model(kind):
  config = AlbertConfig.from_dict(tiny_config_dict())
  if kind == "multiple_choice":
    model, x, key = AlbertMultipleChoice(config), _inputs(2, extra=(4,)), "probabilities"
    x.pop("p_mask")
  else:
    model, x, key = AlbertSquadModel(config, version_2_with_negative=True), _inputs(2), \
        "start_top_log_probs"
  _randomize(model, seed=1, std=0.05)
  copy = serving_copy(model, "bf16")
  assert len(copy.weights) == len(model.weights)
  expected, got = model(x, training=False)[key].numpy(), copy(x, training=False)[key].numpy()
  assert got.dtype == np.float32
  np.testing.assert_allclose(got, expected, atol=0.1)


def test_unknown_precision_is_a_one_line_error():
  with pytest.raises(AlbertError, match=r"--export_precision='fp16': expected one of fp32, bf16"):
    serving_copy(_classifier(), "fp16")


def test_bf16_export_is_served_as_in_process(tmp_path):
  model = _classifier(seed=2)
  export_base = str(tmp_path / "bf16")
  export_dir = export_classifier(model, export_base, ["a", "b", "c"], SEQ, None, True, "toy",
                                 True, precision="bf16")
  x = _inputs(batch=4, seed=5)
  token_inputs = {k: x[k].tolist() for k in ("input_ids", "input_mask", "segment_ids")}
  served = finetune.run_serving_client(
      str(tmp_path), [dict(export_dir=os.path.join(export_dir, "core_ops"),
                           signature="token_ids", inputs=token_inputs)], False)[0]
  in_process = serving_copy(model, "bf16")(
      {k: tf.constant(v) for k, v in token_inputs.items()}, training=False)
  np.testing.assert_allclose(served["probabilities"], in_process["probabilities"].numpy(),
                             atol=1e-3)
  fp32 = model({k: tf.constant(v) for k, v in token_inputs.items()},
               training=False)["probabilities"].numpy()
  assert 0 < np.abs(served["probabilities"] - fp32).max() < 0.03
  # The precision is part of what the directory holds: a float32 export may not replace it
  # unnoticed.
  with pytest.raises(AlbertError, match=r"precision: existing \"bf16\" vs new \"fp32\""):
    export_classifier(model, export_base, ["a", "b", "c"], SEQ, None, True, "toy", True)


# --------------------------------------------------------------------------- auto, CPU warning
def _export_info(version_dir):
  return json.loads((pathlib.Path(version_dir) / "assets.extra" / "albert_export.json")
                    .read_text())


def _variable_dtypes(version_dir):
  reader = tf.train.load_checkpoint(os.path.join(version_dir, "variables", "variables"))
  return set(reader.get_variable_to_dtype_map().values())


def _timer_favouring(winner, requests):
  """A stand-in for precision._time_interleaved (tested on its own below): it runs each copy's
  real probe call once, recording what it returned, and reports PROBE_MIN_ROUNDS rounds in which
  `winner` is twice as fast, so the choice is known and no export waits for real timing."""
  def timer(calls):
    requests.extend(calls[p]() for p in ("fp32", "bf16"))
    fast = [1.0 + r for r in range(precision_lib.PROBE_MIN_ROUNDS)]
    loser = "fp32" if winner == "bf16" else "bf16"
    return {winner: fast, loser: [2 * t for t in fast]}
  return timer


def test_probe_timer_interleaves_and_keeps_to_its_budget(monkeypatch):
  order = []
  calls = {p: (lambda p=p: order.append(p)) for p in ("fp32", "bf16")}
  warmup = precision_lib.PROBE_WARMUP_CALLS
  times = precision_lib._time_interleaved(calls)  # pylint: disable=protected-access
  # Cheap calls never reach the budget: every round runs, one call of each, order alternating.
  assert order[:2 * warmup] == ["fp32"] * warmup + ["bf16"] * warmup
  assert order[2 * warmup:2 * warmup + 4] == ["fp32", "bf16", "bf16", "fp32"]
  assert {p: len(ms) for p, ms in times.items()} == {
      "fp32": precision_lib.PROBE_MAX_ROUNDS, "bf16": precision_lib.PROBE_MAX_ROUNDS}
  # A clock that moves one second per reading: the budget ends the probe after the minimum.
  clock = iter(range(10_000))
  monkeypatch.setattr(precision_lib, "time", types.SimpleNamespace(
      perf_counter=lambda: float(next(clock))))
  times = precision_lib._time_interleaved(calls)  # pylint: disable=protected-access
  assert times == {p: [1000.0] * precision_lib.PROBE_MIN_ROUNDS for p in ("fp32", "bf16")}


@pytest.mark.parametrize("winner", ["bf16", "fp32"])
def test_auto_exports_the_faster_precision_and_records_why(tmp_path, monkeypatch, caplog,
                                                           winner):
  requests = []
  monkeypatch.setattr(precision_lib, "_time_interleaved", _timer_favouring(winner, requests))
  caplog.set_level(logging.INFO, logger="absl")
  model = _classifier(seed=3)
  export_base = str(tmp_path / "auto")
  version_dir = export_classifier(model, export_base, ["a", "b", "c"], SEQ, None, True, "toy",
                                  True, precision="auto")
  # The probe ran the real token_ids function of both copies: batch 1, max_seq_length.
  assert [r["probabilities"].shape for r in requests] == [(1, 3), (1, 3)]
  info = _export_info(version_dir)
  assert info["precision"] == "auto"
  choice = info["precision_choice"]
  assert choice["requested"] == "auto" and choice["chosen"] == winner
  assert choice["request"] == f"token_ids, batch 1 x {SEQ} tokens"
  assert choice["rounds"] >= precision_lib.PROBE_MIN_ROUNDS
  medians = choice["median_ms"]
  assert medians[winner] * 2 == pytest.approx(medians["fp32" if winner == "bf16" else "bf16"],
                                              rel=1e-2)
  assert choice["bf16_vs_fp32"] == (0.5 if winner == "bf16" else 2.0)
  assert choice["onednn"] == precision_lib.onednn_enabled()
  assert choice["tensorflow"] == tf.__version__
  assert choice["cpu"] == precision_lib.cpu_info()["model"]
  assert (tf.bfloat16 in _variable_dtypes(version_dir)) == (winner == "bf16")
  lines = [r.getMessage() for r in caplog.records if "--export_precision=auto" in r.getMessage()]
  assert len(lines) == 1 and lines[0].startswith(f"--export_precision=auto: {winner} (")
  assert "\n" not in lines[0]
  if winner == "bf16":
    # Timings differ between two exports of one model: a second auto export is a new version
    # of the same model, not "a different model".
    again = export_classifier(model, export_base, ["a", "b", "c"], SEQ, None, True, "toy",
                              True, precision="auto")
    assert again != version_dir and _export_info(again)["precision_choice"]["chosen"] == "bf16"
    # An explicit precision still is a different model than an auto export; the refusal names
    # the precision auto chose.
    with pytest.raises(AlbertError, match=r"precision: existing \"bf16\" \(chosen by "
                                          r"--export_precision=auto\) vs new \"fp32\""):
      export_classifier(model, export_base, ["a", "b", "c"], SEQ, None, True, "toy", True)


def test_auto_times_the_squad_and_multiple_choice_signatures(tmp_path, monkeypatch):
  """Their probes send [1, seq] (+ p_mask) and [1, 4, seq] requests through the real serving
  functions, and the copy the (stand-in) timer favours is exported."""
  config = AlbertConfig.from_dict(tiny_config_dict())
  squad = AlbertSquadModel(config, version_2_with_negative=True)
  _randomize(squad, seed=4, std=0.05)
  requests = []
  monkeypatch.setattr(precision_lib, "_time_interleaved", _timer_favouring("bf16", requests))
  version_dir = export_squad_model(squad, str(tmp_path / "squad"), SEQ, precision="auto")
  choice = _export_info(version_dir)["precision_choice"]
  assert choice["request"] == f"serving_default, batch 1 x {SEQ} tokens"
  assert [r["start_top_log_probs"].shape[0] for r in requests] == [1, 1]
  assert choice["chosen"] == "bf16" and choice["bf16_vs_fp32"] == 0.5
  assert tf.bfloat16 in _variable_dtypes(version_dir)
  race = AlbertMultipleChoice(config)
  requests.clear()
  monkeypatch.setattr(precision_lib, "_time_interleaved", _timer_favouring("fp32", requests))
  version_dir = export_multiple_choice(race, str(tmp_path / "race"), SEQ, 8, precision="auto")
  choice = _export_info(version_dir)["precision_choice"]
  assert choice["request"] == f"token_ids, batch 1 x 4 choices x {SEQ} tokens"
  assert [r["probabilities"].shape for r in requests] == [(1, 4), (1, 4)]
  assert choice["chosen"] == "fp32" and tf.bfloat16 not in _variable_dtypes(version_dir)


def test_auto_is_not_a_compute_precision():
  with pytest.raises(AlbertError, match=r"--export_precision=auto: a serving copy is fp32 or "
                                        r"bf16"):
    serving_copy(_classifier(), "auto")
  with pytest.raises(AlbertError, match=r"expected one of fp32, bf16, auto$"):
    precision_lib.check_precision("bf16+xla")


_CPUINFO = """processor\t: 0
vendor_id\t: {vendor}
model name\t: {model}
flags\t\t: fpu sse2 avx2 avx512f {flags}

processor\t: 1
vendor_id\t: {vendor}
model name\t: other
flags\t\t: fpu
"""


@pytest.mark.parametrize("vendor,model,flags,onednn,expected", [
    ("GenuineIntel", "Intel Xeon Gold 6248", "avx512_vnni", True,
     "this CPU (Intel Xeon Gold 6248) has neither AVX512-BF16 nor AMX-BF16, so oneDNN emulates"),
    ("AuthenticAMD", "AMD EPYC", "avx512_vnni avx512_bf16", True, None),
    ("GenuineIntel", "Intel Xeon Platinum 8480+", "avx512_bf16 amx_bf16 amx_tile", True, None),
    ("AuthenticAMD", "AMD EPYC", "avx512_bf16", False,
     "TensorFlow's oneDNN ops are off in this process (TF_ENABLE_ONEDNN_OPTS=0"),
])
def test_bf16_slowdown_names_the_cpus_that_cannot_profit(tmp_path, vendor, model, flags, onednn,
                                                         expected):
  path = tmp_path / "cpuinfo"
  path.write_text(_CPUINFO.format(vendor=vendor, model=model, flags=flags))
  cpu = precision_lib.cpu_info(str(path))
  assert cpu["model"] == model and cpu["vendor"] == vendor  # the first processor's block
  assert "avx512f" in cpu["flags"]
  reason = precision_lib.bf16_slowdown(cpu, onednn)
  assert (reason is None) if expected is None else reason.startswith(expected)


def test_bf16_slowdown_claims_nothing_without_x86_flags(tmp_path):
  path = tmp_path / "cpuinfo"  # aarch64 Linux: `Features`, no `flags`, no model name
  path.write_text("processor\t: 0\nFeatures\t: fp asimd bf16\nCPU part\t: 0xd40\n")
  cpu = precision_lib.cpu_info(str(path))
  assert cpu["flags"] is None
  assert precision_lib.bf16_slowdown(cpu, False) is None
  assert precision_lib.cpu_info(str(tmp_path / "missing"))["flags"] is None


def test_bf16_export_warns_in_one_line_where_the_cpu_cannot_profit(tmp_path, monkeypatch,
                                                                   caplog):
  path = tmp_path / "cpuinfo"
  path.write_text(_CPUINFO.format(vendor="GenuineIntel", model="Intel Xeon Gold 6248",
                                  flags="avx512_vnni"))
  monkeypatch.setattr(cpu_lib, "CPUINFO", str(path))
  monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)  # no cap: bf16 can run
  monkeypatch.setattr(precision_lib, "onednn_enabled", lambda: True)  # whatever runs the test
  caplog.set_level(logging.INFO, logger="absl")
  model = _classifier()
  build = lambda copy: copy  # noqa: E731  (the module: the copy itself)
  copy, measured = precision_lib.choose_serving(model, "bf16", build, probe=None)
  assert measured is None and copy.dtype_policy.name == "bfloat16"
  warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
  assert warnings == [
      "--export_precision=bf16: this CPU (Intel Xeon Gold 6248) has neither AVX512-BF16 nor "
      "AMX-BF16, so oneDNN emulates bfloat16 matmuls: bf16 serves slower than fp32 here "
      "(1.1-2.5x measured); export fp32, or auto to time both"]
  caplog.clear()
  precision_lib.choose_serving(model, "fp32", build, probe=None)  # fp32: nothing to say
  assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_run_classifier_export_precision_auto(tmp_path):
  """The real script: --export_precision=auto says its choice in one line and exports it."""
  spm = make_tiny_spm_model(str(tmp_path))
  glue_fixtures.write_glue(str(tmp_path / "glue"))
  config = write_tiny_config(tmp_path / "albert_config.json")
  args = ["--task_name=MRPC", "--data_dir=glue", "--output_dir=out",
          f"--albert_config_file={config}", f"--spm_model_file={spm}", "--do_train=true",
          "--do_lower_case=true", "--max_seq_length=24", "--optimizer=adamw",
          "--warmup_step=0", "--learning_rate=1e-4", "--train_step=1",
          "--save_checkpoints_steps=1", "--train_batch_size=4", "--export_dir=serving"]
  proc = scripts.run_script("run_classifier.py", args + ["--export_precision=auto"],
                            cwd=str(tmp_path))
  assert proc.returncode == 0, scripts.describe(proc)
  version_dir = scripts.versioned_export(str(tmp_path / "serving"))
  choice = _export_info(version_dir)["precision_choice"]
  lines = [l for l in (proc.stdout + proc.stderr).splitlines()
           if "--export_precision=auto" in l]
  assert lines == [
      f"--export_precision=auto: {choice['chosen']} (token_ids, batch 1 x 24 tokens: fp32 "
      f"{choice['median_ms']['fp32']:.1f} ms, bf16 {choice['median_ms']['bf16']:.1f} ms, "
      f"bf16/fp32 {choice['bf16_vs_fp32']:.2f} over {choice['rounds']} rounds on "
      f"{choice['cpu']})"], proc.stderr[-3000:]
  assert (tf.bfloat16 in _variable_dtypes(version_dir)) == (choice["chosen"] == "bf16")
  # A value that is none of the three is refused before any work, naming the choices.
  proc = scripts.run_script("run_classifier.py", args + ["--export_precision=fast"],
                            cwd=str(tmp_path))
  assert proc.returncode == 2 and "fp32|bf16|auto" in proc.stderr, proc.stderr[-3000:]
  assert scripts.last_line(proc.stderr).startswith("error: flag --export_precision="), \
      proc.stderr[-3000:]
