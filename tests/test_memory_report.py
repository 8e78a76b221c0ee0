"""The memory report (peak RSS, GPU peaks), the --recompute flag, and run_pretraining.py with
--recompute=layer end to end: it trains, its progress lines carry the memory report, and its
checkpoint restores into a recompute=none model (same variables)."""

import re
import resource
import types

from absl import flags
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.cli import flags as cli
from albert_tf.training import memory
from albert_tf.tasks import pretraining as pretraining_task
from tests.helpers import training as helpers


def test_peak_rss_tracks_the_process_high_water_mark():
  before = memory.peak_rss_mb()
  assert abs(before - resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0) < 64
  block = np.ones(300 * 2**20 // 8)  # 300 MB, every page touched
  after = memory.peak_rss_mb()
  del block
  # The peak rose by the touched block unless an earlier peak already covered it.
  assert after >= before and after >= 300
  assert re.fullmatch(r"peak RSS \d+ MB", memory.memory_report())


def test_report_lists_gpu_peaks(monkeypatch):
  devices = [types.SimpleNamespace(name="/job:localhost/replica:0/task:0/device:GPU:0"),
             types.SimpleNamespace(name="/job:localhost/replica:0/task:0/device:GPU:1")]
  peaks = {devices[0].name: 567 * 2**20, devices[1].name: 1.5 * 2**30}
  monkeypatch.setattr(tf.config, "list_logical_devices",
                      lambda kind=None: devices if kind == "GPU" else [])
  monkeypatch.setattr(tf.config.experimental, "get_memory_info",
                      lambda name: {"current": 0, "peak": peaks[name]})
  assert re.fullmatch(r"peak RSS \d+ MB, GPU:0 peak 567 MB, GPU:1 peak 1536 MB",
                      memory.memory_report())


def test_recompute_flag_reaches_the_trainer_kwargs():
  cli.define_runtime_flags()
  flag = flags.FLAGS["recompute"]
  assert flag.default == "none"
  assert flag.parser.parse("layer") == "layer" and flag.parser.parse("attention") == "attention"
  with pytest.raises(ValueError):
    flag.parser.parse("everything")
  f = types.SimpleNamespace(strategy="auto", use_tpu=False, tpu_name=None, tpu_zone=None,
                            gcp_project=None, master=None, precision="fp32", jit_compile=False,
                            gradient_accumulation_steps=1, log_every_n_steps=1,
                            iterations_per_loop=10, recompute="layer", deterministic=False,
                            seed=None)
  assert cli.runtime_config(f).trainer_kwargs()["recompute"] == "layer"


@pytest.fixture(scope="module")
def layer_run(tmp_path_factory):
  """run_pretraining.py --recompute=layer, 8 steps on tiny real-text data (the test launcher
  enables op determinism, under which unseeded dropout cannot run: dropout 0, as ALBERT v2)."""
  tmp = tmp_path_factory.mktemp("recompute_run")
  data = helpers.make_pretraining_data(tmp, num_files=1, dupe_factor=1, corpus_bytes=15_000,
                                       repeats=1)
  config = helpers.tiny_config(tmp / "albert_config.json", num_hidden_groups=2,
                               num_hidden_layers=4)
  out = tmp / "run"
  result = helpers.run_pretraining(
      helpers.pretraining_flags(config, data, out, steps=8, save_every=8, recompute="layer",
                                learning_rate=0.005, optimizer="adamw"), timeout=300)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
  return config, out, result.stdout


def test_run_pretraining_with_recompute_layer_trains_and_reports_memory(layer_run):
  _, out, stdout = layer_run
  lines = [l for l in stdout.splitlines() if l.startswith("step ")]
  assert len(lines) == 8, stdout[-2000:]
  for line in lines:
    assert re.search(r" \| peak RSS \d+ MB$", line), line
  rss = [int(re.search(r"peak RSS (\d+) MB", l).group(1)) for l in lines]
  assert rss == sorted(rss) and rss[0] > 100  # a high-water mark of a TF process

  def loss(line):
    return float(line.split("| loss ")[1].split(" ")[0])
  assert all(np.isfinite(loss(l)) for l in lines)
  assert loss(lines[-1]) < loss(lines[0])
  assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-8")


def test_layer_checkpoint_restores_into_recompute_none(layer_run, tmp_path):
  config, out, _ = layer_run
  task = pretraining_task.PretrainingTask(pretraining_task.PretrainingConfig(
      AlbertConfig.from_json_file(config), max_seq_length=helpers.TINY_SEQ,
      max_predictions_per_seq=helpers.TINY_PREDS))
  model = task.build_model()
  assert model.encoder.recompute == "none"
  def model_values(path):  # the model's own variables (no optimizer slots)
    return {k: v for k, v in helpers.checkpoint_values(path).items()
            if k.startswith("model/") and ".OPTIMIZER_SLOT" not in k}

  # The same variables as a recompute=none model writes ...
  fresh = model_values(tf.train.Checkpoint(model=model).write(str(tmp_path / "fresh" / "ckpt")))
  written = model_values(tf.train.latest_checkpoint(str(out)))
  assert len(written) > 20 and set(fresh) == set(written)
  # ... and they all restore into it, with the trained values.
  status = tf.train.Checkpoint(model=model).restore(tf.train.latest_checkpoint(str(out)))
  status.assert_existing_objects_matched()
  restored = model_values(tf.train.Checkpoint(model=model).write(str(tmp_path / "back" / "ckpt")))
  changed = 0
  for key, value in written.items():
    np.testing.assert_array_equal(restored[key], value, err_msg=key)
    changed += not np.array_equal(fresh[key], value)
  assert changed > len(written) // 2
