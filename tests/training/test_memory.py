"""The memory report: peak RSS and GPU peaks."""

import re
import resource
import types

import numpy as np
import tensorflow as tf

from albert_tf.training import memory


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
