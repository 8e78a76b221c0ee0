"""Benchmark of length bucketing (--bucket_boundaries): examples/s of fine-tuning evaluation and
training on sentence-pair lengths like MRPC's, bucketed vs padded to --max_seq_length, and the
model garden's classifier (always padded), ALBERT-base shape, interleaved in one run.

The lengths: MRPC's sentences are news sentences of about 22 words (the GLUE paper's MRPC
statistics; SentencePiece splits a word into ~1.1 pieces), so each sentence is drawn as
N(25, 7) pieces clipped to [6, 60], and a pair is [CLS] a [SEP] b [SEP]: 53 tokens on average,
95 % below ~75, the longest near 110: what MRPC's dev set gives with the 30k-clean model. The
token ids are random (speed does not depend on them).

  python -m bench.speed.bucketing                      # seq 128 and 512, eval and training
  python -m bench.speed.bucketing --seq_lengths=128 --rounds=2
"""

import os
import tempfile

from absl import app
from absl import flags

from bench import common

FLAGS = flags.FLAGS
flags.DEFINE_list("seq_lengths", ["128", "512"], "--max_seq_length values to compare at.")
flags.DEFINE_integer("eval_examples", 128, "Examples in the evaluation pass (at 128; half at "
                     "longer lengths).")
flags.DEFINE_integer("eval_batch_size", 8, "Official --eval_batch_size default.")
flags.DEFINE_integer("train_batch_size", 32, "Official --train_batch_size default.")
flags.DEFINE_integer("train_steps", 3, "Training steps timed per round (seq 128 only).")
flags.DEFINE_integer("rounds", 3, "Interleaved rounds.")


def mrpc_like_features(count, max_seq_length, seed=0):
  """`count` feature dicts (python lists, padded to max_seq_length) with MRPC-like lengths."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  for _ in range(count):
    a, b = np.clip(rng.normal(25, 7, size=2), 6, 60).astype(int)
    length = min(int(a + b + 3), max_seq_length)
    ids = [2] + rng.integers(5, 30000, size=length - 2).tolist() + [3]
    segments = [0] * (int(a) + 2) + [1] * (length - int(a) - 2)
    pad = [0] * (max_seq_length - length)
    yield {"input_ids": ids + pad, "input_mask": [1] * length + pad,
           "segment_ids": segments[:length] + pad, "label_ids": int(rng.integers(0, 2)),
           "is_real_example": 1}


def datasets(work_dir, max_seq_length, count):
  """(padded, bucketed) eval datasets and (padded, bucketed) training datasets."""
  from albert_tf.data import bucketing, classifier_features  # pylint: disable=g-import-not-at-top
  path = os.path.join(work_dir, f"features_{max_seq_length}.tf_record")
  classifier_features.write_tfrecord(mrpc_like_features(count, max_seq_length), path)
  boundaries = bucketing.default_bucket_boundaries(max_seq_length)

  def make(mode, batch_size, buckets):
    return classifier_features.make_dataset(path, max_seq_length, mode, batch_size,
                                            vocab_size=30000, type_vocab_size=2, num_labels=2,
                                            bucket_boundaries=buckets, seed=0)
  return ({"padded": make("eval", FLAGS.eval_batch_size, None),
           "bucketed": make("eval", FLAGS.eval_batch_size, boundaries)},
          {"padded": make("train", FLAGS.train_batch_size, None),
           "bucketed": make("train", FLAGS.train_batch_size, boundaries)})


def build_models():
  """Ours (AlbertClassifier) and the model garden's BertClassifier over its AlbertEncoder."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from official.nlp.modeling import models as garden_models, networks  # pylint: disable=g-import-not-at-top
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.models import AlbertClassifier  # pylint: disable=g-import-not-at-top
  config = AlbertConfig(**common.ALBERT_BASE)
  ours = AlbertClassifier(config, num_classes=2, dropout_rate=0.0)
  encoder = networks.AlbertEncoder(
      vocab_size=config.vocab_size, embedding_width=config.embedding_size,
      hidden_size=config.hidden_size, num_layers=config.num_hidden_layers,
      num_attention_heads=config.num_attention_heads, max_sequence_length=512,
      type_vocab_size=2, intermediate_size=config.intermediate_size,
      dropout_rate=0.0, attention_dropout_rate=0.0)
  garden = garden_models.BertClassifier(encoder, num_classes=2, dropout_rate=0.0)
  return ours, garden, tf


def eval_calls(ours, garden, tf, eval_sets):
  """One full evaluation pass per call: ours padded, ours bucketed, the model garden padded."""
  ours_step = tf.function(lambda f: ours(f, training=False)["logits"], reduce_retracing=True)
  garden_step = tf.function(lambda f: garden(
      {"input_word_ids": f["input_ids"], "input_mask": f["input_mask"],
       "input_type_ids": f["segment_ids"]}, training=False))
  batches = {name: [f for f, _ in ds] for name, ds in eval_sets.items()}  # input excluded

  def run(step, name):
    return lambda: [step(f).numpy() for f in batches[name]]
  return {"ours padded": run(ours_step, "padded"), "ours bucketed": run(ours_step, "bucketed"),
          "model garden padded": run(garden_step, "padded")}


def train_calls(ours, tf, train_sets):
  """train_steps optimizer steps per call (Adam, cross-entropy): padded / bucketed input."""
  import tf_keras  # pylint: disable=g-import-not-at-top
  optimizer = tf_keras.optimizers.Adam(1e-5)

  @tf.function(reduce_retracing=True)
  def step(features, labels):
    with tf.GradientTape() as tape:
      logits = ours(features, training=True)["logits"]
      loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels["label_ids"], tf.cast(logits, tf.float32)))
    grads = tape.gradient(loss, ours.trainable_variables)
    optimizer.apply_gradients(zip(grads, ours.trainable_variables))
    return loss
  iterators = {name: iter(ds) for name, ds in train_sets.items()}

  def run(name):
    return lambda: [step(*next(iterators[name])).numpy() for _ in range(FLAGS.train_steps)]
  return {"train padded": run("padded"), "train bucketed": run("bucketed")}


def report(title, times, examples, reference):
  print(title)
  for name, ms in times.items():
    median = common.summarize(ms)["median"]
    speedup = common.paired_ratio(times[reference], ms)
    print(f"  {name:22s} {median / 1000:8.2f} s  {examples * 1000 / median:7.1f} examples/s  "
          f"{speedup:5.2f}x {reference}'s speed", flush=True)


def main(_):
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  ours, garden, tf = build_models()
  print(f"CPU: {common.cpu_model()}; {common.uptime()}")
  work_dir = tempfile.mkdtemp(prefix="albert_tf_bench_bucketing_")
  for seq in (int(s) for s in FLAGS.seq_lengths):
    count = FLAGS.eval_examples if seq <= 128 else FLAGS.eval_examples // 2
    eval_sets, train_sets = datasets(work_dir, seq, count)
    times = common.time_interleaved(eval_calls(ours, garden, tf, eval_sets), FLAGS.rounds,
                                    warmup=1)
    report(f"evaluation, max_seq_length={seq}, {count} examples, batch "
           f"{FLAGS.eval_batch_size}", times, count, "ours padded")
    if seq <= 128 and FLAGS.train_steps:
      times = common.time_interleaved(train_calls(ours, tf, train_sets), FLAGS.rounds, warmup=1)
      report(f"training, max_seq_length={seq}, batch {FLAGS.train_batch_size}", times,
             FLAGS.train_steps * FLAGS.train_batch_size, "train padded")
  print(common.uptime())


if __name__ == "__main__":
  app.run(main)
