"""Times one pretraining step of ALBERT-base (seq 128, 20 predictions, batch 8) on CPU.

Ours: the shared Trainer's train loop (AlbertPretrainer + MLM/SOP loss + global-norm clip +
official LAMB). Reference: the model garden's AlbertEncoder + BertPretrainerV2 (SOP as a
ClassificationHead) + its LAMB, in a tf.function (graph mode; --model_garden_jit adds XLA).
Rounds of the two are interleaved in one process so CPU contention hits both alike.

Prints per-step time, examples/s, the speed ratio (model garden time / ours), and the fraction
of the measured fp32 matmul peak: model FLOPs per step (3 x forward matmul FLOPs) / time / peak.
Run: .venv/bin/python bench/pretrain_step.py [--rounds 4 --steps_per_round 3]
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

flags.DEFINE_integer("batch_size", 8, "Examples per step.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("num_predictions", 20, "Masked positions per sequence.")
flags.DEFINE_integer("rounds", 4, "Interleaved timing rounds.")
flags.DEFINE_integer("steps_per_round", 3, "Steps per round and model.")
flags.DEFINE_bool("jit_compile", False, "XLA for our step.")
flags.DEFINE_bool("model_garden_jit", False, "XLA for the model garden step.")
FLAGS = flags.FLAGS

BASE = dict(vocab_size=30000, embedding_size=128, hidden_size=768, num_hidden_layers=12,
            num_hidden_groups=1, num_attention_heads=12, intermediate_size=3072,
            inner_group_num=1, hidden_act="gelu", hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, max_position_embeddings=512, type_vocab_size=2,
            initializer_range=0.02)


def forward_matmul_flops(batch, seq, preds, c):
  """Multiply-add FLOPs (x2) of the forward pass: encoder, pooler, gathered MLM head, SOP."""
  h, e, i, v, layers = (c["hidden_size"], c["embedding_size"], c["intermediate_size"],
                        c["vocab_size"], c["num_hidden_layers"])
  per_layer = 2 * seq * h * h * 4 + 2 * seq * seq * h * 2 + 2 * seq * h * i * 2
  per_example = (2 * seq * e * h + layers * per_layer + 2 * h * h + 2 * h * 2
                 + 2 * preds * h * e + 2 * preds * e * v)
  return batch * per_example


def measure_matmul_peak(n=2048, repeats=10):
  a = tf.random.normal([n, n])
  b = tf.random.normal([n, n])

  @tf.function
  def mm(a, b):
    return tf.reduce_sum(tf.matmul(a, b))
  mm(a, b).numpy()
  best = float("inf")
  for _ in range(repeats):
    t = time.perf_counter()
    mm(a, b).numpy()
    best = min(best, time.perf_counter() - t)
  return 2.0 * n ** 3 / best


def synthetic_batch(batch, seq, preds, vocab, seed=0):
  rng = np.random.default_rng(seed)
  features = {
      "input_ids": rng.integers(5, vocab, size=(batch, seq)).astype(np.int32),
      "input_mask": np.ones((batch, seq), np.int32),
      "segment_ids": np.concatenate([np.zeros((batch, seq // 2)), np.ones((batch, seq // 2))],
                                    1).astype(np.int32),
      "masked_lm_positions": np.sort(rng.choice(np.arange(1, seq), size=(batch, preds)),
                                     axis=1).astype(np.int32),
  }
  labels = {
      "masked_lm_ids": rng.integers(5, vocab, size=(batch, preds)).astype(np.int32),
      "masked_lm_weights": np.ones((batch, preds), np.float32),
      "next_sentence_labels": rng.integers(0, 2, size=(batch,)).astype(np.int32),
  }
  return features, labels


def build_ours(features, labels):
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.training import optimizer as opt_lib  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks import pretraining as pretraining_task  # pylint: disable=g-import-not-at-top
  from albert_tf.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top

  class InMemoryPretraining(pretraining_task.PretrainingTask):

    def build_inputs(self, mode, batch_size, input_context=None):
      return tf.data.Dataset.from_tensors((features, labels)).repeat()

  task = InMemoryPretraining(pretraining_task.PretrainingConfig(
      AlbertConfig(**BASE), max_seq_length=FLAGS.seq_length,
      max_predictions_per_seq=FLAGS.num_predictions))
  trainer = trainer_lib.Trainer(
      task, None, None, jit_compile=FLAGS.jit_compile,
      optimizer_fn=lambda: opt_lib.create_optimizer("lamb", 1e-4, 1000, 10))
  iterator, spec = trainer._train_dataset_iterator(FLAGS.batch_size)  # pylint: disable=protected-access
  trainer._ensure_built(spec)  # pylint: disable=protected-access
  train_fn = trainer._build_train_fn(FLAGS.batch_size)  # pylint: disable=protected-access

  def run(steps):
    loss, _, _, _ = train_fn(iterator, tf.constant(steps))
    return float(loss.numpy())
  return run, trainer.model.count_params()


def build_model_garden(features, labels):
  from official.modeling.optimization import lamb  # pylint: disable=g-import-not-at-top
  from official.nlp.modeling import layers, models, networks  # pylint: disable=g-import-not-at-top
  c = BASE
  encoder = networks.AlbertEncoder(
      vocab_size=c["vocab_size"], embedding_width=c["embedding_size"],
      hidden_size=c["hidden_size"], num_layers=c["num_hidden_layers"],
      num_attention_heads=c["num_attention_heads"], max_sequence_length=512,
      type_vocab_size=2, intermediate_size=c["intermediate_size"],
      activation=tf_keras.activations.gelu, dropout_rate=0.0, attention_dropout_rate=0.0,
      dict_outputs=True)
  model = models.BertPretrainerV2(
      encoder, mlm_activation=tf_keras.activations.gelu,
      classification_heads=[layers.ClassificationHead(
          inner_dim=c["hidden_size"], num_classes=2, name="next_sentence")])
  optimizer = lamb.LAMB(1e-4, weight_decay_rate=0.01,
                        exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"])
  inputs = {"input_word_ids": features["input_ids"], "input_mask": features["input_mask"],
            "input_type_ids": features["segment_ids"],
            "masked_lm_positions": features["masked_lm_positions"]}
  model(inputs)

  @tf.function(jit_compile=FLAGS.model_garden_jit)
  def step(inputs, labels):
    with tf.GradientTape() as tape:
      out = model(inputs, training=True)
      log_probs = tf.nn.log_softmax(tf.cast(out["mlm_logits"], tf.float32))
      ce = -tf.gather(log_probs, labels["masked_lm_ids"], axis=-1, batch_dims=2)
      w = labels["masked_lm_weights"]
      mlm = tf.reduce_sum(w * ce) / (tf.reduce_sum(w) + 1e-5)
      sop = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels["next_sentence_labels"], out["next_sentence"]))
      loss = mlm + sop
    grads = tape.gradient(loss, model.trainable_variables)
    grads, _ = tf.clip_by_global_norm(grads, 1.0)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  @tf.function
  def loop(inputs, labels, steps):
    loss = tf.constant(0.0)
    for _ in tf.range(steps):
      loss = step(inputs, labels)
    return loss

  def run(steps):
    return float(loop(inputs, labels, tf.constant(steps)).numpy())
  return run, encoder.count_params()


def main(argv):
  del argv
  features, labels = synthetic_batch(FLAGS.batch_size, FLAGS.seq_length, FLAGS.num_predictions,
                                     BASE["vocab_size"])
  load_before = os.getloadavg()
  peak = measure_matmul_peak()
  ours, our_params = build_ours(features, labels)
  garden, garden_params = build_model_garden(features, labels)
  for run in (ours, garden):   # trace + warm up
    run(1)
    run(1)
  times = {"ours": [], "model_garden": []}
  for _ in range(FLAGS.rounds):
    for name, run in (("ours", ours), ("model_garden", garden)):
      t = time.perf_counter()
      run(FLAGS.steps_per_round)
      times[name].append((time.perf_counter() - t) / FLAGS.steps_per_round)
  peak_after = measure_matmul_peak()
  load_after = os.getloadavg()
  flops = 3 * forward_matmul_flops(FLAGS.batch_size, FLAGS.seq_length, FLAGS.num_predictions,
                                   BASE)
  peak = max(peak, peak_after)
  print(f"ALBERT-base train step: batch {FLAGS.batch_size}, seq {FLAGS.seq_length}, "
        f"{FLAGS.num_predictions} predictions, CPU ({os.cpu_count()} cores)")
  print(f"params: ours {our_params:,} (full pretrainer); model garden encoder {garden_params:,}")
  print(f"measured fp32 matmul peak: {peak / 1e9:.1f} GFLOP/s; model FLOPs/step "
        f"{flops / 1e9:.1f} G")
  result = {}
  for name, values in times.items():
    t = statistics.median(values)
    result[name] = t
    print(f"{name:13s} median {t * 1000:8.1f} ms/step (min {min(values) * 1000:.1f}) | "
          f"{FLAGS.batch_size / t:6.2f} examples/s | {flops / t / peak * 100:5.1f}% of peak"
          f"{' (XLA)' if (name == 'ours' and FLAGS.jit_compile) or (name == 'model_garden' and FLAGS.model_garden_jit) else ''}")
  print(f"speed ratio (model garden time / ours): {result['model_garden'] / result['ours']:.2f}x")
  print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
        "(other work shares this CPU)")


if __name__ == "__main__":
  app.run(main)
