"""Latency of the exported classifier SavedModel vs the model garden's exported AlbertEncoder.

ALBERT-base shape (V 30000, E 128, H 768, L 12, 12 heads, I 3072), sequence length 128, random
weights (latency does not depend on them). Both SavedModels are loaded back with
tf.saved_model.load and called through their signatures, as a TF Serving process would.

  .venv/bin/python bench/serving_latency.py [--batch_sizes=1,32] [--iterations=20]

Rows:
  ours token_ids    exported classifier, token-id signature (core TF ops)
  ours raw_text     exported classifier, serving_default (in-graph SentencePiece + packing)
  garden encoder    official.nlp.modeling.networks.AlbertEncoder exported with a token-id
                    signature (encoder + pooler only: no classification head)
Inputs: full-length sequences (all 128 positions real), and the same with only 32 real tokens
(input_mask 0 after), reported separately.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

flags.DEFINE_string("batch_sizes", "1,32", "Comma-separated batch sizes.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("iterations", 20, "Timed calls per configuration (batch 1; fewer for "
                     "larger batches).")
flags.DEFINE_string("work_dir", None, "Where the SavedModels go (default: a temp dir).")
flags.DEFINE_enum("precision", "fp32", ["fp32", "bf16"], "Compute precision of our export.")

FLAGS = flags.FLAGS

BASE = dict(vocab_size=30000, embedding_size=128, hidden_size=768, num_hidden_layers=12,
            num_hidden_groups=1, num_attention_heads=12, intermediate_size=3072,
            inner_group_num=1, hidden_act="gelu", hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, max_position_embeddings=512, type_vocab_size=2,
            initializer_range=0.02)


def _spm_model(work_dir):
  """A small SentencePiece model (the vocabulary size does not change the encoder's cost)."""
  from albert_tf.data.corpus import build_docstring_corpus  # pylint: disable=g-import-not-at-top
  from albert_tf.text import train_sentencepiece  # pylint: disable=g-import-not-at-top
  corpus = os.path.join(work_dir, "corpus.txt")
  build_docstring_corpus(corpus, max_bytes=2_000_000)
  return train_sentencepiece([corpus], os.path.join(work_dir, "spm"), vocab_size=4000)


def export_ours(work_dir, seq_length, precision):
  import tf_keras  # pylint: disable=g-import-not-at-top
  from albert_tf import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.export import export_classifier  # pylint: disable=g-import-not-at-top
  from albert_tf.models.classifier import AlbertClassifier  # pylint: disable=g-import-not-at-top
  spm = _spm_model(work_dir)
  policy = tf_keras.mixed_precision.global_policy()
  if precision == "bf16":
    tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    model = AlbertClassifier(AlbertConfig.from_dict(BASE), num_classes=2)
  finally:
    tf_keras.mixed_precision.set_global_policy(policy)
  path = os.path.join(work_dir, f"ours_{precision}")
  export_classifier(model, path, ["0", "1"], seq_length, spm, True, "bench", True)
  return path


def export_garden(work_dir, seq_length):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from official.nlp.modeling import networks  # pylint: disable=g-import-not-at-top
  encoder = networks.AlbertEncoder(
      vocab_size=BASE["vocab_size"], embedding_width=BASE["embedding_size"],
      hidden_size=BASE["hidden_size"], num_layers=BASE["num_hidden_layers"],
      num_attention_heads=BASE["num_attention_heads"],
      max_sequence_length=BASE["max_position_embeddings"],
      type_vocab_size=BASE["type_vocab_size"], intermediate_size=BASE["intermediate_size"],
      dropout_rate=0.0, attention_dropout_rate=0.0, dict_outputs=True)
  spec = tf.TensorSpec([None, None], tf.int32)

  class Serving(tf.Module):
    def __init__(self):
      super().__init__()
      self.encoder = encoder

    @tf.function(input_signature=[spec, spec, spec])
    def serve(self, input_word_ids, input_mask, input_type_ids):
      outputs = self.encoder(dict(input_word_ids=input_word_ids, input_mask=input_mask,
                                  input_type_ids=input_type_ids), training=False)
      return {"sequence_output": outputs["sequence_output"],
              "pooled_output": outputs["pooled_output"]}

  module = Serving()
  path = os.path.join(work_dir, "garden")
  tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
  return path


def _time(fn, iterations):
  fn()  # warm-up (graph instantiation, oneDNN primitive creation)
  fn()
  times = []
  for _ in range(iterations):
    start = time.perf_counter()
    fn()
    times.append((time.perf_counter() - start) * 1000)
  return statistics.median(times), min(times)


def measure(ours_dir, garden_dir, batch_sizes, seq_length, iterations):
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  ours = tf.saved_model.load(ours_dir)
  garden = tf.saved_model.load(garden_dir)
  token_fn = ours.signatures["token_ids"]
  text_fn = ours.signatures["serving_default"]
  garden_fn = garden.signatures["serving_default"]
  words = ("the quick brown fox jumps over the lazy dog while rivers flow to the sea and "
           "mountains rise above the clouds").split()
  rows = []
  for batch in batch_sizes:
    n = iterations if batch == 1 else max(3, iterations // 4)
    for real in (seq_length, 32):
      rng = np.random.default_rng(0)
      ids = rng.integers(5, 4000, size=(batch, seq_length)).astype(np.int32)
      mask = (np.arange(seq_length) < real).astype(np.int32)[None].repeat(batch, 0)
      segments = (np.arange(seq_length) >= real // 2).astype(np.int32)[None] * mask
      ids, mask, segments = (tf.constant(x) for x in (ids * mask, mask, segments))
      label = f"batch {batch:>2}, {real:>3} real tokens"
      rows.append((label, "ours token_ids", *_time(
          lambda: token_fn(input_ids=ids, input_mask=mask, segment_ids=segments), n)))
      rows.append((label, "garden encoder", *_time(
          lambda: garden_fn(input_word_ids=ids, input_mask=mask, input_type_ids=segments), n)))
    # Raw text long enough to fill the 128 positions after tokenization.
    text_a = tf.constant([" ".join(words * 4)] * batch)
    text_b = tf.constant([" ".join(reversed(words * 4))] * batch)
    rows.append((f"batch {batch:>2}, raw text (fills {seq_length})", "ours raw_text",
                 *_time(lambda: text_fn(text_a=text_a, text_b=text_b), n)))
  return rows


def main(_):
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="serving_latency_")
  batch_sizes = [int(b) for b in FLAGS.batch_sizes.split(",")]
  ours_dir = export_ours(work_dir, FLAGS.seq_length, FLAGS.precision)
  garden_dir = export_garden(work_dir, FLAGS.seq_length)
  load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
  rows = measure(ours_dir, garden_dir, batch_sizes, FLAGS.seq_length, FLAGS.iterations)
  print(f"\nuptime before timing: {load}")
  print(f"our export precision: {FLAGS.precision}; SavedModels in {work_dir}")
  print(f"{'inputs':<32} {'model':<16} {'median ms':>10} {'min ms':>8}")
  for label, model, median, fastest in rows:
    print(f"{label:<32} {model:<16} {median:>10.1f} {fastest:>8.1f}")
  by_key = {(r[0], r[1]): r[2] for r in rows}
  for label in sorted({r[0] for r in rows if "real tokens" in r[0]}):
    ratio = by_key[(label, "ours token_ids")] / by_key[(label, "garden encoder")]
    print(f"ratio ours/garden token-id, {label}: {ratio:.2f}")
  print(f"uptime after timing: "
        f"{subprocess.run(['uptime'], capture_output=True, text=True, check=False).stdout.strip()}")


if __name__ == "__main__":
  app.run(main)
