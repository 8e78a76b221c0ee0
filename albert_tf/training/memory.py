"""Peak memory of this process, for progress lines and benchmarks.

Host: the peak resident set size (`ru_maxrss`, the high-water mark since the process started).
Accelerators: `tf.config.experimental.get_memory_info(device)["peak"]` of every logical GPU.
"""

import resource
import sys

import tensorflow as tf


def peak_rss_mb():
  """The process's peak resident set size in MB (MiB), since it started (float)."""
  peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  # Linux reports KiB, macOS bytes.
  return peak / (1024.0 * 1024.0) if sys.platform == "darwin" else peak / 1024.0


def gpu_peaks_mb():
  """[(device name, peak MB)] of every logical GPU TensorFlow has initialised ([] without)."""
  peaks = []
  for device in tf.config.list_logical_devices("GPU"):
    try:
      info = tf.config.experimental.get_memory_info(device.name)
    except (ValueError, tf.errors.OpError):  # a device without an allocator that tracks stats
      continue
    name = device.name.split("device:")[-1]
    peaks.append((name, info["peak"] / (1024.0 * 1024.0)))
  return peaks


def memory_report():
  """One short string: "peak RSS 1234 MB", plus ", GPU:0 peak 567 MB" per GPU."""
  parts = [f"peak RSS {peak_rss_mb():.0f} MB"]
  parts += [f"{name} peak {mb:.0f} MB" for name, mb in gpu_peaks_mb()]
  return ", ".join(parts)
