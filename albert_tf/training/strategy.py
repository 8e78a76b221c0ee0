"""Choosing a tf.distribute strategy from the official TPU flags, TF_CONFIG or an override."""

import json
import os

import tensorflow as tf

from albert_tf.errors import AlbertError

STRATEGIES = ("auto", "default", "one_device", "mirrored", "multi_worker_mirrored", "tpu")


def _tf_config_has_cluster():
  raw = os.environ.get("TF_CONFIG")
  if not raw:
    return False
  try:
    config = json.loads(raw)
  except json.JSONDecodeError as e:
    raise AlbertError(f"TF_CONFIG is not JSON ({e.msg} at column {e.colno})") from None
  cluster = config.get("cluster") or {}
  return sum(len(v) for v in cluster.values()) > 1


def _tpu_strategy(tpu_name, tpu_zone, gcp_project, master):
  tpu = tpu_name or master or ""
  try:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu=tpu, zone=tpu_zone, project=gcp_project)
    if tpu not in ("", "local"):
      tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
  except (ValueError, tf.errors.OpError) as e:
    first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    raise AlbertError(f"--tpu_name={tpu_name!r}: cannot reach the TPU ({first_line})") from None
  return tf.distribute.TPUStrategy(resolver)


def get_strategy(strategy=None, use_tpu=False, tpu_name=None, tpu_zone=None, gcp_project=None,
                 master=None, num_gpus=None):
  """Returns the strategy the official flags (and our --strategy override) ask for.

  Order when `strategy` is None/"auto": TPU if use_tpu or tpu_name; MultiWorkerMirroredStrategy
  if TF_CONFIG describes more than one task; MirroredStrategy if more than one GPU is visible;
  otherwise the default strategy.

  Args:
    strategy: None/"auto", or one of "default", "one_device", "mirrored",
      "multi_worker_mirrored", "tpu" (--strategy).
    use_tpu, tpu_name, tpu_zone, gcp_project, master: the official TPU flags.
    num_gpus: for "mirrored": how many GPUs to use (all if None).
  """
  name = (strategy or "auto").lower()
  if name not in STRATEGIES:
    raise AlbertError(f"--strategy={strategy!r} is invalid: expected one of "
                      f"{', '.join(STRATEGIES)}")
  if name == "auto":
    if use_tpu or tpu_name:
      name = "tpu"
    elif _tf_config_has_cluster():
      name = "multi_worker_mirrored"
    elif len(tf.config.list_logical_devices("GPU")) > 1:
      name = "mirrored"
    else:
      name = "default"
  if name == "tpu":
    return _tpu_strategy(tpu_name, tpu_zone, gcp_project, master)
  if name == "multi_worker_mirrored":
    if not os.environ.get("TF_CONFIG"):
      raise AlbertError("--strategy=multi_worker_mirrored needs TF_CONFIG describing the cluster")
    _tf_config_has_cluster()  # validates the JSON
    return tf.distribute.MultiWorkerMirroredStrategy()
  if name == "mirrored":
    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    if num_gpus:
      gpus = gpus[:num_gpus]
    if not gpus:
      # Several logical CPU devices (tests, or CPU-only hosts configured that way).
      cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
      return tf.distribute.MirroredStrategy(cpus)
    return tf.distribute.MirroredStrategy(gpus)
  if name == "one_device":
    gpus = tf.config.list_logical_devices("GPU")
    return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
  return tf.distribute.get_strategy()


def worker_info(strategy):
  """(task_type, task_id, is_chief) for this process under `strategy`."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or isinstance(strategy, tf.distribute.TPUStrategy):
    return None, 0, True
  task_type, task_id = resolver.task_type, resolver.task_id
  if not task_type:
    return None, 0, True
  is_chief = (task_type == "chief" or
              (task_type == "worker" and task_id == 0 and
               "chief" not in resolver.cluster_spec().as_dict()))
  return task_type, int(task_id or 0), is_chief


def num_workers(strategy):
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or isinstance(strategy, tf.distribute.TPUStrategy):
    return 1
  spec = resolver.cluster_spec().as_dict()
  return max(1, len(spec.get("worker", [])) + len(spec.get("chief", [])))
