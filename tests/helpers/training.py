"""Test helpers of the training area: tiny pretraining data and run_pretraining launchers."""

import json
import os
import socket
import subprocess
import sys

from tests.helpers.paths import REPO_ROOT  # re-exported: tests build script paths from it

TINY_SEQ = 32
TINY_PREDS = 5


def make_pretraining_data(tmp_dir, num_files=2, max_seq_length=TINY_SEQ,
                          max_predictions_per_seq=TINY_PREDS, dupe_factor=2, corpus_bytes=60_000,
                          repeats=4):
  """Real text -> tiny SentencePiece model -> official-format TFRecords, with our
  create_pretraining_data. Returns the comma-separated list of record files."""
  from albert_tf.data.pretraining import creation  # pylint: disable=g-import-not-at-top
  from albert_tf.data.pretraining import instances as pretraining_instances  # pylint: disable=g-import-not-at-top
  from tests.helpers import text as text_helpers  # pylint: disable=g-import-not-at-top

  tmp_dir = os.fspath(tmp_dir)
  os.makedirs(tmp_dir, exist_ok=True)
  spm = text_helpers.make_tiny_spm_model(tmp_dir, vocab_size=400)
  corpus = text_helpers.write_tiny_corpus(os.path.join(tmp_dir, "corpus.txt"), repeats=repeats,
                                          docstring_bytes=corpus_bytes)
  outputs = ",".join(os.path.join(tmp_dir, f"pretrain-{i}.tfrecord") for i in range(num_files))
  options = pretraining_instances.InstanceOptions(
      max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq,
      dupe_factor=dupe_factor)
  creation.create_pretraining_data(corpus, outputs, spm_model_file=spm, options=options,
                                   random_seed=7, show_progress=False)
  return outputs


def free_port():
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def subprocess_env(extra=None):
  env = dict(os.environ)
  env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
  env["TF_CPP_MIN_LOG_LEVEL"] = "2"
  env["CUDA_VISIBLE_DEVICES"] = ""
  env.pop("TF_CONFIG", None)
  env.update(extra or {})
  return env


# Runs run_pretraining.main with N logical CPU devices (set before TF initialises); its stderr
# goes through the script's filter of TensorFlow's log lines, as the script's own first line does.
_LAUNCHER = """
import sys
n = int(sys.argv[1])
from albert_tf.common import console
console.quiet_startup()
import tensorflow as tf
tf.config.experimental.enable_op_determinism()
if n > 1:
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
sys.argv = ["run_pretraining.py"] + sys.argv[2:]
import runpy
runpy.run_path(sys.argv[0] if False else %r, run_name="__main__")
""" % str(REPO_ROOT / "run_pretraining.py")


def pretraining_command(flags, logical_cpus=1):
  """argv running run_pretraining.py (deterministic ops) with `logical_cpus` CPU devices."""
  return [sys.executable, "-c", _LAUNCHER, str(logical_cpus)] + list(flags)


def run_pretraining(flags, logical_cpus=1, timeout=240, env=None):
  """Runs run_pretraining.py to completion in a subprocess; returns CompletedProcess."""
  return subprocess.run(pretraining_command(flags, logical_cpus), env=subprocess_env(env),
                        capture_output=True, text=True, timeout=timeout, cwd=str(REPO_ROOT))


def pretraining_flags(config, data, output_dir, steps, batch=8, save_every=2, **extra):
  flags = [f"--albert_config_file={config}", f"--input_file={data}",
           f"--output_dir={output_dir}", f"--max_seq_length={TINY_SEQ}",
           f"--max_predictions_per_seq={TINY_PREDS}", f"--train_batch_size={batch}",
           f"--num_train_steps={steps}", "--num_warmup_steps=2", "--learning_rate=0.01",
           f"--save_checkpoints_steps={save_every}", "--keep_checkpoint_max=3",
           "--do_train=true", "--do_eval=false", "--log_every_n_steps=1",
           "--shuffle_seed=3"]
  flags += [f"--{k}={v}" for k, v in extra.items()]
  return flags


def checkpoint_values(path):
  """{variable key: numpy value} of every tensor in a checkpoint (prefix or directory)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if os.path.isdir(path):
    path = tf.train.latest_checkpoint(path)
  reader = tf.train.load_checkpoint(path)
  return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
          if not k.startswith("_CHECKPOINTABLE_OBJECT_GRAPH")}


def write_synthetic_pretraining_data(path, num_records, seed=0, vocab_size=1000,
                                     max_seq_length=TINY_SEQ,
                                     max_predictions_per_seq=TINY_PREDS):
  """Random records in the official format, every one with all predictions weighted 1.

  Equal weights make the per-replica masked-LM normalisation equal the global one, so runs
  that split a batch differently (replicas, workers) must agree exactly. For the
  distribution tests only; learning tests use real text (`make_pretraining_data`).
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)

  def ints(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

  with tf.io.TFRecordWriter(path) as writer:
    for _ in range(num_records):
      ids = rng.integers(5, vocab_size, size=max_seq_length)
      ids[0], ids[max_seq_length // 2], ids[-1] = 2, 3, 3
      segments = np.zeros(max_seq_length, np.int64)
      segments[max_seq_length // 2 + 1:] = 1
      positions = np.sort(rng.choice(np.arange(1, max_seq_length // 2),
                                     size=max_predictions_per_seq, replace=False))
      feature = {
          "input_ids": ints(ids), "input_mask": ints(np.ones(max_seq_length)),
          "segment_ids": ints(segments), "token_boundary": ints(np.ones(max_seq_length)),
          "masked_lm_positions": ints(positions), "masked_lm_ids": ints(ids[positions]),
          "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(
              value=[1.0] * max_predictions_per_seq)),
          "next_sentence_labels": ints([rng.integers(0, 2)]),
      }
      writer.write(tf.train.Example(
          features=tf.train.Features(feature=feature)).SerializeToString())
  return path


def make_toy_task(num_classes=3, vocab_size=50, seq_len=8, num_examples=64, seed=0):
  """A tiny classification Task (embedding-bag model with an `encoder`) for trainer tests.

  Its loss is a per-example mean over the global batch, so micro-batching must be exact.
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks.base import Task  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(seed)
  ids = rng.integers(1, vocab_size, size=(num_examples, seq_len)).astype(np.int32)
  labels = (ids[:, 0] % num_classes).astype(np.int32)

  class ToyModel(tf_keras.Model):

    def __init__(self):
      super().__init__(name="toy")
      self.encoder = tf_keras.layers.Embedding(vocab_size, 16, name="encoder")
      self.classifier = tf_keras.layers.Dense(num_classes, name="classifier")

    def call(self, inputs, training=None):
      pooled = tf.reduce_mean(self.encoder(inputs["input_ids"]), axis=1)
      return {"logits": tf.cast(self.classifier(pooled), tf.float32)}

    def official_variable_names(self):
      # Outside the ALBERT name table: the optimizer's exclusions need names of the TF1 kind.
      return [(self.encoder.embeddings, "toy/embeddings"),
              (self.classifier.kernel, "toy/classifier/kernel"),
              (self.classifier.bias, "toy/classifier/bias")]

  class ToyTask(Task):
    name = "toy"
    scale = 1.0  # tests set inf to force a non-finite loss

    def build_model(self):
      return ToyModel()

    def build_inputs(self, mode, batch_size, input_context=None):
      ds = tf.data.Dataset.from_tensor_slices(({"input_ids": ids}, {"label_ids": labels}))
      if mode == "train":
        return ds.repeat().batch(batch_size, drop_remainder=True)
      return ds.batch(batch_size)

    def build_losses(self, labels, outputs, global_batch_size):
      per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels["label_ids"], outputs["logits"]) * self.scale
      loss = tf.reduce_sum(per_example) / global_batch_size
      return loss, {"twice_loss": 2.0 * loss}

    def build_metrics(self, training=True):
      return [tf_keras.metrics.SparseCategoricalAccuracy("accuracy")]

    def update_metrics(self, metrics, labels, outputs):
      metrics[0].update_state(labels["label_ids"], outputs["logits"])

    def aggregate_outputs(self, state, features, labels, outputs):
      state = state or {"n": 0}
      state["n"] += len(labels["label_ids"])
      return state

    def reduce_outputs(self, state, mode):
      return {"aggregated_examples": float(state["n"])}, None

  return ToyTask()


# Lines of the in-process training scripts (here and in test_recompute), after they have read
# `config`, `data` and `out` from argv: the tiny pretraining `params`, and one shared initial
# checkpoint (ours, TF2) at `init`, which every run then loads through --init_checkpoint's code
# path, so that the runs compared start from the same weights.
INIT_CHECKPOINT_SCRIPT = """\
params = dict(albert_config=AlbertConfig.from_json_file(config), input_file=data,
              max_seq_length=%d, max_predictions_per_seq=%d, shuffle_seed=3)
init_task = pretraining_task.PretrainingTask(pretraining_task.PretrainingConfig(**params))
model = init_task.build_model()
model(next(iter(init_task.build_inputs("train", 2)))[0])
init = tf.train.Checkpoint(model=model).write(os.path.join(out, "init", "ckpt-0"))
""" % (TINY_SEQ, TINY_PREDS)

# Trains the same tiny pretraining run on one device and with MirroredStrategy over 2 logical
# CPUs (in one process: logical devices must be configured before TF initialises).
# argv: config data output_dir steps batch
# (No global seed: tf.data's seeded shuffle also depends on it, and run_pretraining.py sets none.)
_MIRRORED_SCRIPT = """
import os, sys
import tensorflow as tf
tf.config.experimental.enable_op_determinism()
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from albert_tf.config import AlbertConfig
from albert_tf.tasks import pretraining as pretraining_task
from albert_tf.training import optimizer as opt_lib, trainer as trainer_lib
config, data, out, steps, batch = sys.argv[1:6]
steps, batch = int(steps), int(batch)
""" + INIT_CHECKPOINT_SCRIPT + """\
for name, strategy in (("single", tf.distribute.OneDeviceStrategy("/cpu:0")),
                       ("mirrored", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))):
  task = pretraining_task.PretrainingTask(pretraining_task.PretrainingConfig(
      init_checkpoint=init, **params))
  trainer = trainer_lib.Trainer(
      task, strategy, os.path.join(out, name),
      optimizer_fn=lambda: opt_lib.create_optimizer("lamb", 0.01, steps, 2),
      save_checkpoints_steps=steps, log_every_n_steps=steps)
  print(name, strategy.num_replicas_in_sync, trainer.train(steps, batch), flush=True)
"""


def run_mirrored_comparison(config, data, output_dir, steps, batch, timeout=300):
  return subprocess.run([sys.executable, "-c", _MIRRORED_SCRIPT, str(config), str(data),
                         str(output_dir), str(steps), str(batch)],
                        env=subprocess_env(), capture_output=True, text=True, timeout=timeout,
                        cwd=str(REPO_ROOT))


def tf_config(ports, index):
  return json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                     "task": {"type": "worker", "index": index}})


def start_workers(flags, num_workers=2, log_dir=None):
  """Starts run_pretraining.py as `num_workers` MultiWorkerMirroredStrategy workers on
  127.0.0.1. Returns the Popen objects (stdout/stderr go to files in log_dir)."""
  ports = [free_port() for _ in range(num_workers)]
  procs = []
  for i in range(num_workers):
    out = open(os.path.join(log_dir, f"worker{i}-{ports[0]}.log"), "w")  # pylint: disable=consider-using-with
    procs.append(subprocess.Popen(  # pylint: disable=consider-using-with
        pretraining_command(flags), env=subprocess_env({"TF_CONFIG": tf_config(ports, i)}),
        stdout=out, stderr=subprocess.STDOUT, cwd=str(REPO_ROOT)))
    procs[-1].log_path = out.name
  return procs


def read_log(proc):
  with open(proc.log_path, encoding="utf-8", errors="replace") as f:
    return f.read()
