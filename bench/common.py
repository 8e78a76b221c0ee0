"""Pieces shared by the benchmarks: the ALBERT-base shape, synthetic pretraining batches, our
and the model garden's pretraining step, interleaved timing and its summary, the machine load.

The benches run as modules from the repository's root (`python -m bench.speed.precision`) and
import it as `bench.common`; TensorFlow and albert_tf are imported inside the functions, so that a
parent process (bench/speed/train_memory.py) stays small and its children import them only once
they run.
"""

import datetime
import json
import os
import statistics
import subprocess
import sys
import time

# The repository's root: the top-level scripts, configs/ and the `bench` package live here.
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ALBERT-base (V 30000, E 128, H 768, L 12, 12 heads, I 3072) without dropout: the shape the
# step and latency benches compare with the model garden.
ALBERT_BASE = dict(vocab_size=30000, embedding_size=128, hidden_size=768, num_hidden_layers=12,
                   num_hidden_groups=1, num_attention_heads=12, intermediate_size=3072,
                   inner_group_num=1, hidden_act="gelu", hidden_dropout_prob=0.0,
                   attention_probs_dropout_prob=0.0, max_position_embeddings=512,
                   type_vocab_size=2, initializer_range=0.02)


# --------------------------------------------------------------------------- child processes
def module_command(module, *args):
  """The command that runs bench module `module` (e.g. "bench.speed.precision", a bench's own
  `__spec__.name` when it starts itself again) in a fresh interpreter, with `args`."""
  return [sys.executable, "-m", module, *args]


def child_env(**extra):
  """This process's environment with the repository's root first on PYTHONPATH (so a child
  imports `bench` and this checkout's albert_tf whatever its cwd), plus `extra`."""
  path = os.pathsep.join(filter(None, (REPO, os.environ.get("PYTHONPATH"))))
  return dict(os.environ, PYTHONPATH=path, **extra)


# --------------------------------------------------------------------------- pretraining step
def synthetic_pretraining_batch(batch, seq, preds, vocab, seed=0):
  """One random pretraining batch (features, labels) in the official feature names."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  features = {
      "input_ids": rng.integers(5, vocab, size=(batch, seq)).astype(np.int32),
      "input_mask": np.ones((batch, seq), np.int32),
      "segment_ids": np.concatenate([np.zeros((batch, seq // 2)), np.ones((batch, seq - seq // 2))],
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


def write_pretraining_records(directory, vocab_size, seq, preds, num_files, records_per_file):
  """Official-format pretraining TFRecord files of random records (ids in range); returns
  their paths."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def ints(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

  paths = []
  for i in range(num_files):
    features, labels = synthetic_pretraining_batch(records_per_file, seq, preds, vocab_size,
                                                   seed=i)
    path = os.path.join(directory, f"pretrain-{i}.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
      for r in range(records_per_file):
        example = tf.train.Example(features=tf.train.Features(feature={
            "input_ids": ints(features["input_ids"][r]),
            "input_mask": ints(features["input_mask"][r]),
            "segment_ids": ints(features["segment_ids"][r]),
            "token_boundary": ints(np.ones(seq, np.int64)),
            "masked_lm_positions": ints(features["masked_lm_positions"][r]),
            "masked_lm_ids": ints(labels["masked_lm_ids"][r]),
            "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(
                value=labels["masked_lm_weights"][r])),
            "next_sentence_labels": ints([labels["next_sentence_labels"][r]]),
        }))
        writer.write(example.SerializeToString())
    paths.append(path)
  return paths


def build_our_pretraining_step(config, features, labels, batch, seq_length, num_predictions,
                               **trainer_kwargs):
  """Our Trainer's train loop (MLM + SOP, global-norm clip, official LAMB) on one in-memory
  batch repeated. Returns (run, trainer): run(steps) trains `steps` steps, returns the loss.

  trainer_kwargs go to the Trainer (jit_compile, recompute, ...).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks import pretraining as pretraining_task  # pylint: disable=g-import-not-at-top
  from albert_tf.training import optimizer as opt_lib  # pylint: disable=g-import-not-at-top

  class InMemoryPretraining(pretraining_task.PretrainingTask):

    def build_inputs(self, mode, batch_size, input_context=None):
      return tf.data.Dataset.from_tensors((features, labels)).repeat()

  task = InMemoryPretraining(pretraining_task.PretrainingConfig(
      config, max_seq_length=seq_length, max_predictions_per_seq=num_predictions))
  return build_trainer_loop(
      task, batch, lambda: opt_lib.create_optimizer("lamb", 1e-4, 1000, 10), **trainer_kwargs)


def build_trainer_loop(task, batch, optimizer_fn, **trainer_kwargs):
  """The Trainer's own compiled train loop for `task` (whose build_inputs gives the batches),
  without its checkpointing and logging around it: a bench times the steps alone.
  Returns (run, trainer): run(steps) trains `steps` steps in one call, returns the loss."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
  trainer = trainer_lib.Trainer(task, None, None, optimizer_fn=optimizer_fn, **trainer_kwargs)
  dataset, spec = trainer.inputs.training(batch)
  iterator = iter(dataset)
  trainer.build(spec)
  train_fn = trainer.train_loop(batch)

  def run(steps):
    return float(train_fn(iterator, tf.constant(steps))[0].numpy())
  return run, trainer


def build_model_garden_step(config, features, labels, jit_compile=None):
  """The reference: the model garden's AlbertEncoder + BertPretrainerV2 (SOP as a
  ClassificationHead) + its LAMB, the same loss and clip as ours, in a tf.function.

  Returns (step, inputs, encoder): step(inputs, labels) trains one step and returns the loss.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from official.modeling.optimization import lamb  # pylint: disable=g-import-not-at-top
  from official.nlp.modeling import layers, models, networks  # pylint: disable=g-import-not-at-top
  encoder = networks.AlbertEncoder(
      vocab_size=config.vocab_size, embedding_width=config.embedding_size,
      hidden_size=config.hidden_size, num_layers=config.num_hidden_layers,
      num_attention_heads=config.num_attention_heads,
      max_sequence_length=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size, intermediate_size=config.intermediate_size,
      activation=tf_keras.activations.gelu, dropout_rate=config.hidden_dropout_prob,
      attention_dropout_rate=config.attention_probs_dropout_prob, dict_outputs=True)
  model = models.BertPretrainerV2(
      encoder, mlm_activation=tf_keras.activations.gelu,
      classification_heads=[layers.ClassificationHead(
          inner_dim=config.hidden_size, num_classes=2, name="next_sentence")])
  optimizer = lamb.LAMB(1e-4, weight_decay_rate=0.01,
                        exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"])
  inputs = {"input_word_ids": features["input_ids"], "input_mask": features["input_mask"],
            "input_type_ids": features["segment_ids"],
            "masked_lm_positions": features["masked_lm_positions"]}
  model(inputs)

  @tf.function(jit_compile=jit_compile)
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

  return step, inputs, encoder


def export_model_garden_encoder(work_dir, config=None, name="garden", checkpoint=None):
  """The model garden's AlbertEncoder (`config`, a dict like ALBERT_BASE, default ALBERT-base;
  random weights, or those of `checkpoint`: the garden's own TF1 converter's output,
  tf2_albert_encoder_checkpoint_converter, object name "encoder") as a SavedModel with a
  token-id `serving_default` (encoder + pooler, no head) at <work_dir>/<name>. Returns its
  directory."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from official.nlp.modeling import networks  # pylint: disable=g-import-not-at-top
  c = config or ALBERT_BASE
  encoder = networks.AlbertEncoder(
      vocab_size=c["vocab_size"], embedding_width=c["embedding_size"],
      hidden_size=c["hidden_size"], num_layers=c["num_hidden_layers"],
      num_attention_heads=c["num_attention_heads"],
      max_sequence_length=c["max_position_embeddings"],
      type_vocab_size=c["type_vocab_size"], intermediate_size=c["intermediate_size"],
      dropout_rate=0.0, attention_dropout_rate=0.0, dict_outputs=True,
      **({"activation": _garden_activation(c)} if checkpoint else {}))
  if checkpoint:
    ones = tf.ones([1, 8], tf.int32)
    encoder(dict(input_word_ids=ones, input_mask=ones, input_type_ids=ones))
    tf.train.Checkpoint(encoder=encoder).read(checkpoint).assert_existing_objects_matched()
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
  path = os.path.join(work_dir, name)
  tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
  return path


def _garden_activation(config):
  """The activation the garden's converter builds its AlbertEncoder with (the official gelu)."""
  from official.modeling import tf_utils  # pylint: disable=g-import-not-at-top
  return tf_utils.get_activation(config.get("hidden_act", "gelu"))


# --------------------------------------------------------------------------- timing
def time_interleaved(calls, rounds, warmup=3):
  """calls: {name: fn}. Returns {name: [ms per round]}, one call of each per round.

  The order is rotated every round, so drifts in machine speed hit all calls alike.
  """
  names = list(calls)
  for name in names:
    for _ in range(warmup):  # graph instantiation, oneDNN primitive creation
      calls[name]()
  times = {name: [] for name in names}
  for r in range(rounds):
    shift = r % len(names)
    for name in names[shift:] + names[:shift]:
      start = time.perf_counter()
      calls[name]()
      times[name].append((time.perf_counter() - start) * 1000)
  return times


def summarize(ms):
  """Median, 10th and 90th percentile and min of a list of timings."""
  deciles = statistics.quantiles(ms, n=10) if len(ms) > 1 else [ms[0]] * 9
  return dict(median=statistics.median(ms), p10=deciles[0], p90=deciles[-1], min=min(ms))


def paired_ratio(times, reference):
  """Median over rounds of the per-round ratio: robust to drifts that hit a whole round."""
  return statistics.median(t / r for t, r in zip(times, reference))


def machine():
  """The machine a result was measured on: CPU model and flags, core count, date, load."""
  from albert_tf.export.precision import machine_summary  # lazy: a parent process stays small
  return {"cpu": cpu_model(), "machine": machine_summary(), "cpus": os.cpu_count(),
          "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
          "uptime_before": uptime()}


def write_results(path, results):
  """Writes `results` as indented JSON to `path` (its folder made first) and says where."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(results, f, indent=2)
  print(f"wrote {path}")


def uptime():
  """`uptime`'s line (load averages): other work shares the benchmark machine's CPU."""
  return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def cpu_model():
  """The CPU's model name (the first `model name` of /proc/cpuinfo), e.g. "AMD EPYC"."""
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  import platform  # pylint: disable=g-import-not-at-top
  return platform.processor() or "unknown CPU"


def spm_model(work_dir):
  """A small SentencePiece model trained on the docstring corpus (the vocabulary size does not
  change the encoder's cost; its ids fit any ALBERT vocabulary of 4000 pieces or more)."""
  from albert_tf.tools.docstring_corpus import build_docstring_corpus  # pylint: disable=g-import-not-at-top
  from albert_tf.text.sentencepiece_training import train_sentencepiece  # pylint: disable=g-import-not-at-top
  corpus = os.path.join(work_dir, "corpus.txt")
  build_docstring_corpus(corpus, max_bytes=2_000_000)
  return train_sentencepiece([corpus], os.path.join(work_dir, "spm"), vocab_size=4000)
