"""How long a SIGTERM takes to become a saved, resumable checkpoint at ALBERT-base size.

Runs the real `run_pretraining.py` (ALBERT-base, LAMB, batch 8, seq 128, 20 predictions) on
synthetic official-format records in a subprocess, sends SIGTERM once training is under way and
measures: the time from the signal to the process's exit (finishing the step in progress, the
save of weights + LAMB moments + input position, the exit), the save alone (as the script's
closing line reports it) and the checkpoint's size. Kubernetes and preemptible VMs allow 30 s.

  python -m bench.speed.preemption_save [--repeats 3]
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from bench import common

SEQ, PREDS, BATCH = 128, 20, 8


def _write_records(path, count):
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  features, labels = common.synthetic_pretraining_batch(count, SEQ, PREDS,
                                                        common.ALBERT_BASE["vocab_size"])

  def ints(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

  with tf.io.TFRecordWriter(path) as writer:
    for i in range(count):
      feature = {name: ints(features[name][i]) for name in
                 ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")}
      feature["token_boundary"] = ints(np.ones(SEQ))
      feature["masked_lm_ids"] = ints(labels["masked_lm_ids"][i])
      feature["masked_lm_weights"] = tf.train.Feature(float_list=tf.train.FloatList(
          value=labels["masked_lm_weights"][i]))
      feature["next_sentence_labels"] = ints([labels["next_sentence_labels"][i]])
      writer.write(tf.train.Example(features=tf.train.Features(
          feature=feature)).SerializeToString())


def _one_run(tmp, config, data, index):
  out = os.path.join(tmp, f"run{index}")
  log_path = os.path.join(tmp, f"run{index}.log")
  argv = [sys.executable, os.path.join(common.REPO, "run_pretraining.py"),
          f"--albert_config_file={config}", f"--input_file={data}", f"--output_dir={out}",
          f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PREDS}",
          f"--train_batch_size={BATCH}", "--num_train_steps=100000", "--num_warmup_steps=10",
          "--save_checkpoints_steps=100000", "--log_every_n_steps=1"]
  with open(log_path, "w") as log:
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)  # pylint: disable=consider-using-with
    while "step 3/" not in open(log_path).read():  # past compilation: steady steps
      if proc.poll() is not None:
        raise RuntimeError(open(log_path).read()[-3000:])
      time.sleep(0.05)
    signalled = time.time()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=300)
    exit_seconds = time.time() - signalled
  text = open(log_path).read()
  last = text.strip().splitlines()[-1]
  save_seconds = float(re.search(r"; ([0-9.]+) s\)", last).group(1))
  step = int(re.search(r"step (\d+)/", last).group(1))
  steps = [float(m) for m in re.findall(r"\| ([0-9.]+) examples/s", text)][2:]
  step_seconds = BATCH / (sum(steps) / len(steps)) if steps else float("nan")
  size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out)
             if f.startswith(f"ckpt-{step}."))
  return proc.returncode, exit_seconds, save_seconds, step_seconds, size


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--repeats", type=int, default=3)
  args = parser.parse_args()
  import json  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory() as tmp:
    config = os.path.join(tmp, "albert_config.json")
    with open(config, "w") as f:
      json.dump(common.ALBERT_BASE, f)
    data = os.path.join(tmp, "data.tfrecord")
    _write_records(data, 256)
    print(f"CPU: {common.cpu_model()}; ALBERT-base, LAMB, batch {BATCH}, seq {SEQ}")
    for i in range(args.repeats):
      code, exit_s, save_s, step_s, size = _one_run(tmp, config, data, i)
      print(f"run {i}: exit status {code}; SIGTERM -> exit {exit_s:.1f} s (save {save_s:.1f} s, "
            f"one step {step_s:.2f} s); checkpoint {size / 2**20:.0f} MiB")


if __name__ == "__main__":
  main()
