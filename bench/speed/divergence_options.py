"""What each way of naming a good checkpoint after a diverged run costs (issue 52), at ALBERT-base.

A checkpoint saved at step s is only known to be good once step s + 1 (its weights' first loss)
was finite. Three ways to name a checkpoint that is:
  * keep the checkpoint before last (what we do, with setting the newest aside on a NaN):
    nothing per step; one more checkpoint on disk while training (its size is measured);
  * check the loss of the weights before saving: one extra forward pass on the next batch per
    save (measured against the train step), and the next batch must be read ahead;
  * check the weights are finite before saving (not enough alone: the weights that gave the
    NaN in issue 52 were finite, 4e8 at most): one pass over the weights per save.
Our train step (MLM + SOP, LAMB, batch 8, seq 128, 20 predictions) and a forward pass of the same
model are timed interleaved in one process.

  python -m bench.speed.divergence_options [--rounds 8]
"""

import argparse
import os
import tempfile
import time

from bench import common

SEQ, PREDS, BATCH = 128, 20, 8


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rounds", type=int, default=8)
  args = parser.parse_args()
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.checkpoints import init as checkpoint_init  # pylint: disable=g-import-not-at-top

  print(common.uptime())
  config = AlbertConfig(**common.ALBERT_BASE)
  features, labels = common.synthetic_pretraining_batch(BATCH, SEQ, PREDS, config.vocab_size)
  run, trainer = common.build_our_pretraining_step(config, features, labels, BATCH, SEQ, PREDS)
  model, task = trainer.model, trainer.task
  inputs = {k: tf.constant(v) for k, v in features.items()}
  targets = {k: tf.constant(v) for k, v in labels.items()}

  @tf.function
  def forward_loss():
    return task.build_losses(targets, model(inputs, training=False), BATCH)[0]

  times = common.time_interleaved({
      "train step": lambda: run(1),
      "forward loss": lambda: float(forward_loss()),
      "weights finite": lambda: checkpoint_init.refuse_non_finite_weights(model, "bench"),
  }, args.rounds)
  step = common.summarize(times["train step"])["median"]
  for name, ms in times.items():
    median = common.summarize(ms)["median"]
    print(f"{name:15s} median {median:8.1f} ms  ({median / step:.3f} x the train step)")
  with tempfile.TemporaryDirectory() as tmp:
    started = time.perf_counter()
    prefix = trainer.checkpoint().write(os.path.join(tmp, "ckpt"))
    seconds = time.perf_counter() - started
    size = sum(os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp))
  print(f"one checkpoint (weights + LAMB moments): {size / 2**20:.1f} MiB, written in "
        f"{seconds:.2f} s ({os.path.basename(prefix)})")
  print(f"CPU: {common.cpu_model()}; {common.uptime()}")


if __name__ == "__main__":
  main()
