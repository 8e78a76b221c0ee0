"""Choosing a tf.distribute strategy from the official TPU flags, TF_CONFIG or an override.

A TF_CONFIG TensorFlow would refuse with a traceback (or a TPU it would wait for forever) is a
one-line AlbertError here, before TensorFlow sees it.
"""

import contextlib
import json
import os
import signal
import socket
import sys
import threading

import tensorflow as tf

from albert_tf import errors
from albert_tf.errors import AlbertError, json_kind, parse_json_object
from albert_tf.training import cluster
from albert_tf.training import runtime as runtime_lib

STRATEGIES = ("auto", "default", "one_device", "mirrored", "multi_worker_mirrored", "tpu")

# Seconds allowed for finding a named TPU (the GCE metadata server and the Cloud TPU API), for a
# TCP connection to its address, and for TensorFlow to connect to it and initialise it (which,
# when the address answers but is no TPU, TensorFlow would wait for forever; --tpu_connect_timeout).
# Initialising a large pod slice takes minutes.
TPU_LOOKUP_TIMEOUT_S = 60
TPU_PROBE_TIMEOUT_S = 15
TPU_CONNECT_TIMEOUT_S = 300

# Task types TensorFlow allows in TF_CONFIG's "task" without a list of them in "cluster".
_TASKS_OUTSIDE_CLUSTER = ("evaluator",)


# ------------------------------------------------------------------------------ TF_CONFIG
def _check_address(job, index, address):
  host, _, port = address.rpartition(":") if isinstance(address, str) else ("", "", "")
  if not host or not port.isdigit():
    raise AlbertError(f"TF_CONFIG: cluster {json.dumps(job)} task {index} is "
                      f"{json.dumps(address)}: expected a \"host:port\" address")


def read_tf_config(require_task=False):
  """The TF_CONFIG environment variable, parsed and checked; None when unset or empty.

  Checks what TensorFlow would otherwise refuse with a traceback deep inside the strategy:
  "cluster" maps job names to lists of "host:port" addresses; "task" names a job of it
  ("evaluator" may be outside it) and an index within that job's list. With a cluster, "task"
  is required by `require_task` or when there are several tasks (each process must say which
  one it is).
  """
  raw = os.environ.get("TF_CONFIG", "").strip()
  if not raw:
    return None
  config = parse_json_object(
      raw, "TF_CONFIG", 'an object {"cluster": {...}, "task": {"type": ..., "index": ...}}')
  cluster = config.get("cluster") or {}
  if not isinstance(cluster, dict):
    raise AlbertError(f"TF_CONFIG: \"cluster\" is {json_kind(cluster)}: expected an object "
                      f"{{\"worker\": [\"host:port\", ...], ...}}")
  for job, addresses in cluster.items():
    if not isinstance(addresses, list):
      raise AlbertError(f"TF_CONFIG: cluster {json.dumps(job)} is {json_kind(addresses)}: "
                        f"expected a list of \"host:port\" addresses")
    for index, address in enumerate(addresses):
      _check_address(job, index, address)
  task = config.get("task")
  if not cluster or (task is None and not require_task and
                     sum(len(v) for v in cluster.values()) <= 1):
    return config
  if not isinstance(task, dict) or "type" not in task or "index" not in task:
    raise AlbertError("TF_CONFIG does not say which task of the cluster this process is: "
                      "expected \"task\": {\"type\": \"worker\", \"index\": <0-based index>}")
  task_type, index = task["type"], task["index"]
  if not isinstance(task_type, str) or (task_type not in cluster and
                                        task_type not in _TASKS_OUTSIDE_CLUSTER):
    raise AlbertError(f"TF_CONFIG: task type {json.dumps(task_type)} is not in the cluster, "
                      f"which has {', '.join(json.dumps(job) for job in cluster)}")
  if isinstance(index, str) and index.isdigit():
    index = int(index)
  if not isinstance(index, int) or isinstance(index, bool) or index < 0:
    raise AlbertError(f"TF_CONFIG: task index {json.dumps(task['index'])} is invalid: expected "
                      f"an integer >= 0")
  if task_type in cluster and index >= len(cluster[task_type]):
    raise AlbertError(f"TF_CONFIG: task index {index} is out of range: the cluster has "
                      f"{len(cluster[task_type])} {json.dumps(task_type)} tasks")
  return config


def _tf_config_has_cluster():
  """True when TF_CONFIG (checked) describes more than one task."""
  config = read_tf_config()
  cluster = (config or {}).get("cluster") or {}
  return sum(len(v) for v in cluster.values()) > 1


# ------------------------------------------------------------------------------ TPU
@contextlib.contextmanager
def _deadline(seconds, message):
  """Ends the process with `error: <message>` (exit 2) if the block runs longer than `seconds`.

  For waits inside TensorFlow's C++ code, which neither a signal nor an exception interrupts.
  Nothing is lost: it guards the set-up, before anything is written.
  """
  timer = threading.Timer(seconds, errors.exit_at_once, (message,))
  timer.daemon = True
  timer.start()
  try:
    yield
  finally:
    timer.cancel()


def _first_line(error):
  text = str(error).strip()
  return text.splitlines()[0] if text else type(error).__name__


def _check_reachable(address, flag):
  """One-line error unless a TCP connection to `grpc://host:port` opens (a closed port, an
  unknown host, a firewall): TensorFlow would wait for it forever."""
  host, _, port = address[len("grpc://"):].rpartition(":")
  if not host or not port.isdigit():
    return
  try:
    socket.create_connection((host.strip("[]"), int(port)), timeout=TPU_PROBE_TIMEOUT_S).close()
  except OSError as e:
    reason = "timed out" if isinstance(e, socket.timeout) else (e.strerror or _first_line(e))
    raise AlbertError(f"{flag}: cannot reach the TPU at {host}:{port} ({reason})") from None


@contextlib.contextmanager
def _stopped_by_signals(what):
  """SIGTERM/SIGINT during the block end the process with one line and exit status 42, even
  while the main thread waits inside TensorFlow's C++ code (where no Python signal handler
  runs): Python's C-level handler writes the signal's number to a wakeup socket, and a watcher
  thread ends the process. Only for set-up, when nothing is being written (main thread only)."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  reader, writer = socket.socketpair()
  writer.setblocking(False)
  previous = {sig: signal.signal(sig, lambda signum, frame: None)
              for sig in (signal.SIGTERM, signal.SIGINT)}
  previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)

  def watch():
    data = reader.recv(1)
    if data:
      errors.end_with_last_line(
          f"stopped by {signal.Signals(data[0]).name} while {what}: nothing was started (exit "
          f"status {errors.EXIT_STOPPED_BY_SIGNAL})", errors.EXIT_STOPPED_BY_SIGNAL)

  watcher = threading.Thread(target=watch, daemon=True, name="tpu-connect-signals")
  watcher.start()
  try:
    yield
  finally:
    signal.set_wakeup_fd(previous_fd)
    for sig, handler in previous.items():
      signal.signal(sig, handler)
    writer.close()  # the watcher reads the end of the stream and returns
    watcher.join()
    reader.close()


def tpu_flag(use_tpu=False, tpu_name=None, master=None, tpu_name_spelling="tpu_name"):
  """The flag that asked for the TPU, as the user typed it, for messages: `--tpu=...` (or
  `--tpu_name=...`, per `tpu_name_spelling`), `--master=...`, `--use_tpu`, or `--strategy=tpu`."""
  if tpu_name:
    return f"--{tpu_name_spelling}={tpu_name}"
  if master:
    return f"--master={master}"
  return "--use_tpu" if use_tpu else "--strategy=tpu"


def _lookup_problem(error, name_flag):
  """What to do about an exception of the TPU name lookup (the GCE metadata server, the Cloud
  TPU API and its client libraries), as one clause; name_flag: --tpu or --tpu_name."""
  if isinstance(error, ImportError):
    return (f"the Cloud TPU client is not installed ({_first_line(error)}): pip install "
            f"google-api-python-client oauth2client")
  if isinstance(error, OSError):  # urllib's URLError: no metadata server here
    reason = getattr(error, "reason", None) or error
    reason = getattr(reason, "strerror", None) or _first_line(reason)
    return (f"the GCE metadata server is not reachable ({reason}); a TPU name works on a "
            f"Google Cloud VM")
  if "Credentials" in type(error).__name__:  # oauth2client / google.auth
    return ("no Google Cloud credentials were found: run `gcloud auth application-default "
            "login` or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file")
  if isinstance(error, ValueError) and "TPU Name" in str(error):  # no name, no local TPU
    return f"no TPU is named and this host has none: name it with {name_flag}=<TPU name>"
  return f"{type(error).__name__}: {_first_line(error)}"


def _tpu_strategy(tpu_name, tpu_zone, gcp_project, master, flag, name_flag, connect_timeout):
  tpu = tpu_name or master or ""
  where = f" in zone {tpu_zone}" if tpu_zone else ""
  where += f" of project {gcp_project}" if gcp_project else ""
  with _stopped_by_signals(f"looking up the TPU ({flag})"):
    try:
      # A TPU name is looked up with the GCE metadata server (project, zone) and the Cloud TPU
      # API (which needs credentials); urllib waits without a time limit there.
      with _deadline(TPU_LOOKUP_TIMEOUT_S, f"{flag}: looking up the TPU took more than "
                     f"{TPU_LOOKUP_TIMEOUT_S} s (is this a Google Cloud VM? elsewhere pass "
                     f"{name_flag}=grpc://<TPU address>:8470)"):
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu=tpu, zone=tpu_zone, project=gcp_project)
        address = resolver.master()
    except Exception as e:  # pylint: disable=broad-except
      raise AlbertError(f"{flag}: cannot look up the TPU {tpu or '(local)'}{where}: "
                        f"{_lookup_problem(e, name_flag)}; or give its address: "
                        f"{name_flag}=grpc://<TPU address>:8470") from None
  if connect_timeout is None:
    connect_timeout = TPU_CONNECT_TIMEOUT_S
  if connect_timeout <= 0:
    raise AlbertError(f"--tpu_connect_timeout={connect_timeout} is invalid: expected > 0")
  print(f"connecting to the TPU at {address or 'this host'} ({flag}; giving up after "
        f"{connect_timeout:g} s, --tpu_connect_timeout)", file=sys.stderr, flush=True)
  with _stopped_by_signals(f"connecting to the TPU at {address or 'this host'} ({flag})"):
    if tpu not in ("", "local") and address.startswith("grpc://"):
      _check_reachable(address, flag)
    try:
      with _deadline(connect_timeout, f"{flag}: the TPU at {address} did not answer within "
                     f"{connect_timeout:g} s (--tpu_connect_timeout)"):
        if tpu not in ("", "local"):
          tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as e:
      raise AlbertError(f"{flag}: cannot reach the TPU ({_first_line(e)})") from None
  return tf.distribute.TPUStrategy(resolver)


def get_strategy(strategy=None, use_tpu=False, tpu_name=None, tpu_zone=None, gcp_project=None,
                 master=None, num_gpus=None, worker_wait_seconds=None, tpu_connect_timeout=None,
                 tpu_name_spelling="tpu_name"):
  """Returns the strategy the official flags (and our --strategy override) ask for.

  Order when `strategy` is None/"auto": TPU if use_tpu or tpu_name; MultiWorkerMirroredStrategy
  if TF_CONFIG describes more than one task; MirroredStrategy if more than one GPU is visible;
  otherwise the default strategy.

  Args:
    strategy: None/"auto", or one of "default", "one_device", "mirrored",
      "multi_worker_mirrored", "tpu" (--strategy).
    use_tpu, tpu_name, tpu_zone, gcp_project, master: the official TPU flags.
    num_gpus: for "mirrored": how many GPUs to use (all if None).
    worker_wait_seconds: for "multi_worker_mirrored": how long to wait for the other workers
      of TF_CONFIG before giving up with one line (default `cluster.DEFAULT_WAIT_S`; see
      albert_tf/training/cluster.py).
    tpu_connect_timeout: for a TPU: seconds allowed for connecting to it and initialising it
      (default `TPU_CONNECT_TIMEOUT_S`); SIGTERM/SIGINT meanwhile: one line, exit status 42.
    tpu_name_spelling: "tpu" or "tpu_name": how the user spelled the TPU flag (for messages).
  """
  name = (strategy or "auto").lower()
  if name not in STRATEGIES:
    raise AlbertError(f"--strategy={strategy!r} is invalid: expected one of "
                      f"{', '.join(STRATEGIES)}")
  if name == "auto":
    if runtime_lib.on_tpu(name, use_tpu, tpu_name):
      name = "tpu"
    elif _tf_config_has_cluster():
      name = "multi_worker_mirrored"
    elif len(tf.config.list_logical_devices("GPU")) > 1:
      name = "mirrored"
    else:
      name = "default"
  if name == "tpu":
    flag = tpu_flag(use_tpu, tpu_name, master, tpu_name_spelling)
    return _tpu_strategy(tpu_name, tpu_zone, gcp_project, master, flag,
                         f"--{tpu_name_spelling}", tpu_connect_timeout)
  if name == "multi_worker_mirrored":
    config = read_tf_config(require_task=True)
    if not config:
      raise AlbertError("--strategy=multi_worker_mirrored needs TF_CONFIG describing the cluster")
    wait = cluster.DEFAULT_WAIT_S if worker_wait_seconds is None else worker_wait_seconds
    if wait <= 0:
      raise AlbertError(f"--worker_wait_seconds={worker_wait_seconds} is invalid: expected > 0")
    return cluster.join(config, wait, tf.distribute.MultiWorkerMirroredStrategy)
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


def make_strategy(runtime):
  """The tf.distribute strategy a `runtime.RuntimeConfig` selects."""
  return get_strategy(
      strategy=runtime.strategy, use_tpu=runtime.use_tpu, tpu_name=runtime.tpu_name,
      tpu_zone=runtime.tpu_zone, gcp_project=runtime.gcp_project, master=runtime.master,
      worker_wait_seconds=runtime.worker_wait_seconds,
      tpu_connect_timeout=runtime.tpu_connect_timeout,
      tpu_name_spelling=runtime.tpu_name_spelling)


def is_tpu_strategy(strategy):
  """Whether a strategy object runs on a TPU (the one test on a strategy object; before one
  exists, `runtime.on_tpu` reads the flags)."""
  return isinstance(strategy, (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy))


def worker_info(strategy):
  """(task_type, task_id, is_chief) for this process under `strategy`."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or is_tpu_strategy(strategy):
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
  if resolver is None or is_tpu_strategy(strategy):
    return 1
  spec = resolver.cluster_spec().as_dict()
  return max(1, len(spec.get("worker", [])) + len(spec.get("chief", [])))
