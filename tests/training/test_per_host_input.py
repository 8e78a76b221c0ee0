"""Per-host training input (`DistributedInput.training`,
`strategy.distribute_datasets_from_function`) resumed mid-epoch on 4 logical CPUs under
MirroredStrategy: the examples every step trains on, across a stop and a resume, are those of
an uninterrupted run, which are the shuffled stream's consecutive global batches.

One subprocess (logical devices are fixed when TensorFlow starts): a task whose model records
the `example_id` of every row it trains on (a py_function in the replica step), 40 examples
shuffled with a seed (an epoch is 5 steps of 8), 2 accumulation micro-batches per replica.
"""

import json
import os
import subprocess
import sys

from tests.helpers import training as helpers

_SCRIPT = """
import json, os, sys
import numpy as np
import tensorflow as tf
import tf_keras
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 4)
from albert_tf.tasks.base import Task
from albert_tf.training import optimizer as opt_lib, trainer as trainer_lib
out = sys.argv[1]
NUM, BATCH = 40, 8
SEEN = []

def stream():
  ids = np.arange(NUM, dtype=np.int32)
  return tf.data.Dataset.from_tensor_slices(ids).shuffle(NUM, seed=7).repeat()

class Model(tf_keras.Model):
  def __init__(self):
    super().__init__(name="recording")
    self.encoder = tf_keras.layers.Embedding(NUM, 4, name="encoder")
    self.classifier = tf_keras.layers.Dense(2, name="classifier")

  def call(self, inputs, training=None):
    ids = inputs["example_id"]
    if training:
      record = tf.py_function(lambda x: SEEN.append(x.numpy().tolist()) or 0, [ids], tf.int32)
      ids = ids + 0 * record
    return {"logits": self.classifier(self.encoder(ids))}

  def official_variable_names(self):
    return [(self.encoder.embeddings, "toy/embeddings"),
            (self.classifier.kernel, "toy/classifier/kernel"),
            (self.classifier.bias, "toy/classifier/bias")]

class RecordingTask(Task):
  name = "recording"
  fine_tunes = False

  def build_model(self):
    return Model()

  def build_inputs(self, mode, batch_size, input_context=None):
    return stream().batch(batch_size, drop_remainder=True).map(
        lambda i: ({"example_id": i}, {"label": i % 2}))

  def build_losses(self, labels, outputs, global_batch_size):
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels["label"], outputs["logits"])
    return tf.reduce_sum(loss) / global_batch_size, {}

strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(4)])

def train(name, steps, start=0):
  trainer = trainer_lib.Trainer(
      RecordingTask(), strategy, os.path.join(out, name),
      optimizer_fn=lambda: opt_lib.create_optimizer("adamw", 0.01, 8, 0),
      gradient_accumulation_steps=2, save_checkpoints_steps=3, log_every_n_steps=1,
      steps_per_loop=1)
  del SEEN[:]
  trainer.train(steps, BATCH)
  # 4 replicas x 2 micro-batches of 1 example per step; the replicas' order within a step
  # varies: each step's examples, sorted.
  rows = [i for call in SEEN for i in call]
  assert len(rows) == BATCH * (steps - start), rows
  return [sorted(rows[s:s + BATCH]) for s in range(0, len(rows), BATCH)]

per_replica = iter(trainer_lib.Trainer(RecordingTask(), strategy).inputs.training(BATCH)[0])
shape = [v.shape.as_list() for v in strategy.experimental_local_results(
    next(per_replica)[0]["example_id"])]
expected = [sorted(b) for b in stream().batch(BATCH).take(8).as_numpy_iterator()]
expected = [[int(i) for i in b] for b in expected]
result = {"shape": shape, "expected": expected, "straight": train("straight", 8),
          "first": train("resumed", 3), "then": train("resumed", 8, start=3)}
print("RESULT " + json.dumps(result))
"""


def test_mid_epoch_resume_on_four_replicas_sees_the_uninterrupted_examples(tmp_path):
  proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path)],
                        env=helpers.subprocess_env(), capture_output=True, text=True,
                        timeout=600, cwd=str(helpers.REPO_ROOT))
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
  line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
  result = json.loads(line[len("RESULT "):])
  # Each of the 4 replicas gets its 2 examples (2 micro-batches of 1), a static shape, cut from
  # the pipeline's batch of 8 in the pipeline.
  assert result["shape"] == [[2]] * 4
  # The uninterrupted run trains on the seeded stream's consecutive batches of 8.
  assert result["straight"] == result["expected"]
  # Stopped after step 3 (mid-epoch: an epoch is 5 steps), resumed to step 8: steps 4-8 are
  # the uninterrupted run's, nothing repeated, nothing lost.
  assert result["first"] == result["expected"][:3]
  assert result["then"] == result["expected"][3:]
  assert "at step 3 (input position restored)" in proc.stdout + proc.stderr


def test_an_unseeded_training_shuffle_gets_one_seed_per_output_dir(tmp_path):
  """The resume's skip (above) needs the same order again: a task shuffling without a seed gets
  one derived from --output_dir (the same for every resume and worker, another for another
  directory); a seed the user gave wins."""
  import types  # pylint: disable=g-import-not-at-top
  from albert_tf.training import runner, runtime  # pylint: disable=g-import-not-at-top
  first, second = str(tmp_path / "run_a"), str(tmp_path / "run_b")
  seed = runtime.input_order_seed(None, first)
  assert isinstance(seed, int) and seed == runtime.input_order_seed(None, first)
  assert seed == runtime.input_order_seed(None, os.path.relpath(first))
  assert seed != runtime.input_order_seed(None, second)
  assert runtime.input_order_seed(5, first) == 5
  unseeded = types.SimpleNamespace(params=types.SimpleNamespace(shuffle_seed=None))
  runner._seed_input_order(unseeded, None, first)  # pylint: disable=protected-access
  assert unseeded.params.shuffle_seed == seed
  seeded = types.SimpleNamespace(params=types.SimpleNamespace(shuffle_seed=3))
  runner._seed_input_order(seeded, 9, first)  # pylint: disable=protected-access
  assert seeded.params.shuffle_seed == 3
