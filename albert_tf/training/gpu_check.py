"""A warning when the system has an NVIDIA GPU that TensorFlow does not use.

TensorFlow's own "GPU will not be used" lines are filtered from the console
(albert_tf/common/console.py), and the plain `tensorflow` wheel has no CUDA: a GPU user who
installed it would train on the CPU without a word. The runner says which devices run the steps
(runner.devices_line) and, through `warn_if_gpu_unused`, why a GPU the system shows is not one of
them.
"""

import os
import shutil

from absl import logging
import tensorflow as tf

NVIDIA_PROC = "/proc/driver/nvidia/gpus"  # one entry per GPU the NVIDIA driver has loaded
CUDA_INSTALL = 'pip install "tensorflow[and-cuda]~=2.20.0"'


def system_gpu_signs(environ=None, nvidia_proc=NVIDIA_PROC, which=shutil.which):
  """What shows an NVIDIA GPU on this system, as short phrases ([] when nothing does, or when
  CUDA_VISIBLE_DEVICES is set to "" or -1: GPUs deliberately hidden from the process)."""
  environ = os.environ if environ is None else environ
  visible = environ.get("CUDA_VISIBLE_DEVICES")
  if visible is not None and visible.strip() in ("", "-1"):
    return []
  signs = []
  if os.path.isdir(nvidia_proc) and os.listdir(nvidia_proc):
    signs.append(f"{nvidia_proc} lists {len(os.listdir(nvidia_proc))}")
  if which("nvidia-smi"):
    signs.append("nvidia-smi is installed")
  if visible is not None:
    signs.append(f"CUDA_VISIBLE_DEVICES={visible}")
  return signs


def unused_gpu_warning(tensorflow_gpus, signs, built_with_cuda):
  """The warning (one line) when `signs` show a GPU and TensorFlow lists none, else None.

  tensorflow_gpus: tf.config.list_physical_devices("GPU") (or a stand-in list in tests).
  """
  if tensorflow_gpus or not signs:
    return None
  why = ("this TensorFlow is built without CUDA" if not built_with_cuda else
         "TensorFlow (built with CUDA) found no usable GPU: check the driver with nvidia-smi")
  return (f"warning: a GPU is visible to the system ({'; '.join(signs)}) but TensorFlow lists "
          f"none, so this run uses the CPU: {why}; for NVIDIA GPUs install {CUDA_INSTALL} "
          "(docs/distributed_training.md)")


def warn_if_gpu_unused():
  """Logs `unused_gpu_warning` for this process, if there is one; returns it."""
  warning = unused_gpu_warning(tf.config.list_physical_devices("GPU"), system_gpu_signs(),
                               tf.test.is_built_with_cuda())
  if warning:
    logging.warning("%s", warning)
  return warning
