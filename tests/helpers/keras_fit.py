"""TextClassifier.fit() under tf.distribute strategies, in a process of its own (logical devices
and TF_CONFIG must be set before TensorFlow starts): tests/training/test_text_models_distributed.py.

  python -m tests.helpers.keras_fit devices INIT OUT
      8 logical CPU devices (a v3-8's core count); the same seeded fit three ways (raw texts
      under a MirroredStrategy: tests/training/test_text_models.py):
        one:       one device, raw texts in the model;
        tpu_input: MirroredStrategy over the 8 on the TPU recipe's input: the preprocessor in
                   the tf.data pipeline (no strings reach the replicas) and static shapes
                   (drop_remainder);
        tpu_xla:   that input with compile(jit_compile=True), on one replica (XLA has no CPU
                   kernel for the replicas' sum: the compiled step and the 8-way split are
                   checked apart, as tests/helpers/tpu_simulation.py does for the scripts).
  python -m tests.helpers.keras_fit worker INIT OUT
      one MultiWorkerMirroredStrategy worker (TF_CONFIG names the cluster and this worker's
      index): the same fit on raw texts, the global batch split over the workers.

Each run writes OUT/<run>.npz (the weights before and after fit) and its loss history to
OUT/<run>.json.
"""

import json
import os
import sys

import numpy as np

BATCH, EPOCHS, LENGTH, SEED, LEARNING_RATE = 8, 2, 16, 1, 1e-2
NUM_EXAMPLES = 32


def _data():
  from tests.helpers.text import VARIED_TEXTS  # pylint: disable=g-import-not-at-top
  texts = (list(VARIED_TEXTS) * NUM_EXAMPLES)[:NUM_EXAMPLES]
  return texts, np.array([i % 2 for i in range(NUM_EXAMPLES)], np.int32)


def _fit(name, strategy, init, out, tpu_input=False, jit_compile=False):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.training.text_models import TextClassifier  # pylint: disable=g-import-not-at-top
  texts, labels = _data()
  with strategy.scope():
    model = TextClassifier.from_pretrained(init, num_classes=2, sequence_length=LENGTH,
                                           dropout_rate=0.0, seed=SEED)
    model.compile(learning_rate=LEARNING_RATE, num_warmup_steps=1, jit_compile=jit_compile)
  before = model.get_weights()
  if tpu_input:
    data = (tf.data.Dataset.from_tensor_slices((texts, labels))
            .batch(BATCH, drop_remainder=True)
            .map(lambda t, y: (model.preprocessor(t), y)))
    history = model.fit(data, epochs=EPOCHS, verbose=0)
  else:
    history = model.fit(texts, labels, batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=0)
  np.savez(os.path.join(out, f"{name}.npz"), *before, *model.get_weights())
  with open(os.path.join(out, f"{name}.json"), "w", encoding="utf-8") as f:
    json.dump({"loss": history.history["loss"], "weights": len(before)}, f)


def main(mode, init, out):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if mode == "devices":
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 8)
    devices = [f"/cpu:{i}" for i in range(8)]
    _fit("one", tf.distribute.get_strategy(), init, out)
    _fit("tpu_input", tf.distribute.MirroredStrategy(devices), init, out, tpu_input=True)
    _fit("tpu_xla", tf.distribute.get_strategy(), init, out, tpu_input=True, jit_compile=True)
  elif mode == "worker":
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    _fit(f"worker{index}", strategy, init, out)
  else:
    raise SystemExit(f"unknown mode {mode!r}: devices or worker")


if __name__ == "__main__":
  main(*sys.argv[1:4])
