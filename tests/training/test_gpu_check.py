"""The warning when the system shows an NVIDIA GPU but TensorFlow lists none (gpu_check), with a
stand-in /proc/driver/nvidia/gpus, PATH lookup and TensorFlow device list."""

import os

from albert_tf.training import gpu_check


def _proc(tmp_path, gpus):
  root = tmp_path / "nvidia_gpus"
  root.mkdir(parents=True)
  for i in range(gpus):
    (root / f"0000:00:0{i + 4}.0").mkdir()
  return str(root)


def _no_which(_):
  return None


def test_signs_of_a_gpu(tmp_path):
  proc = _proc(tmp_path, 2)
  assert gpu_check.system_gpu_signs({}, proc, _no_which) == [f"{proc} lists 2"]
  assert gpu_check.system_gpu_signs({"CUDA_VISIBLE_DEVICES": "0"}, proc,
                                    lambda name: f"/usr/bin/{name}") == [
      f"{proc} lists 2", "nvidia-smi is installed", "CUDA_VISIBLE_DEVICES=0"]
  # No driver, no tool, no variable: nothing; GPUs hidden on purpose ("" or -1): nothing.
  assert gpu_check.system_gpu_signs({}, str(tmp_path / "absent"), _no_which) == []
  assert gpu_check.system_gpu_signs({}, _proc(tmp_path / "empty", 0), _no_which) == []
  for hidden in ("", "-1"):
    assert gpu_check.system_gpu_signs({"CUDA_VISIBLE_DEVICES": hidden}, proc,
                                      lambda name: name) == []


def test_warning_only_when_tensorflow_lists_no_gpu():
  signs = ["/proc/driver/nvidia/gpus lists 1"]
  warning = gpu_check.unused_gpu_warning([], signs, built_with_cuda=False)
  assert warning == (
      "warning: a GPU is visible to the system (/proc/driver/nvidia/gpus lists 1) but "
      "TensorFlow lists none, so this run uses the CPU: this TensorFlow is built without CUDA; "
      'for NVIDIA GPUs install pip install "tensorflow[and-cuda]~=2.20.0" '
      "(docs/distributed_training.md)")
  assert "found no usable GPU: check the driver with nvidia-smi" in (
      gpu_check.unused_gpu_warning([], signs, built_with_cuda=True))
  fake_gpu = ["PhysicalDevice(name='/physical_device:GPU:0', device_type='GPU')"]
  assert gpu_check.unused_gpu_warning(fake_gpu, signs, built_with_cuda=False) is None
  assert gpu_check.unused_gpu_warning([], [], built_with_cuda=False) is None


def test_this_machine_has_no_warning_with_gpus_hidden(monkeypatch):
  """The tests' processes hide GPUs (CUDA_VISIBLE_DEVICES=""): no warning, whatever the host."""
  monkeypatch.setitem(os.environ, "CUDA_VISIBLE_DEVICES", "")
  assert gpu_check.warn_if_gpu_unused() is None
