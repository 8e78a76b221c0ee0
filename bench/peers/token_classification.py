"""Token classification (NER, docs/token_classification.md) beside HF transformers' PyTorch
AlbertForTokenClassification and ONNX Runtime, on the same weights, in one run (issue 61 item 5):

  /work/hfref/bin/python -m bench.peers.token_classification [--shapes=quickstart,base]
  .venv-bench/bin/python -m bench.peers.token_classification     (make bench-peers' venv)

Per shape (quickstart: configs/albert_quickstart.json, H 128, L 4, V 8000; base: bench/common.py
ALBERT_BASE), 9 CoNLL-2003 tags, sequence 128 (every position real), random weights, dropout 0.
Our AlbertTokenClassifier is written as an HF directory with our save_hf_checkpoint, which HF
torch loads and the ONNX graph is exported from, so every row serves the same weights; before
anything is timed each row's logits are compared with ours (largest |difference|, limit 1e-4).

Serving, batch 1 and 32, logits [batch, 128, 9]:
  ours in-process       the model called in a tf.function (training=False)
  ours SavedModel       export_token_classifier's `token_ids` signature, loaded back
  HF torch fp32         AlbertForTokenClassification, eval, torch.inference_mode
  ORT fp32 / fused      its ONNX export (eager attention), ORT_ENABLE_ALL; + onnxruntime.transformers
                        fusions (bench/peers/torch_peers.py, as bench/peers/run.py's table)
Training, one step of --train_batch x 128 with 9 tags on every other piece (the rest ignored, as
a word's later pieces are): ours is the Trainer's compiled loop on TokenClassificationTask (its
loss: each window's mean cross-entropy over labelled pieces, averaged over the batch; global-norm
clip 1.0; the official AdamW), HF torch the same loss, clip and torch.optim.AdamW.

Two intra-op threads each (torch_peers.THREADS); calls interleaved round by round in a rotated
order (bench/common.py time_interleaved), so load hits every row alike; `time_vs_ours` is the
median over rounds of the row's time / ours in-process (> 1: ours is faster). Results:
bench/peers/results/token_classification.{json,md} with the CPU, date and load before/after.
"""

import json
import os
import tempfile

import numpy as np
from absl import app
from absl import flags

from bench import common
from bench.peers import torch_peers

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results", "token_classification")
SEQ = 128
TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
AGREEMENT_LIMIT = 1e-4  # largest |logit difference| of a peer to ours on the same inputs
OURS = "ours in-process"
SAVEDMODEL = "ours SavedModel token_ids"


def quickstart_config():
  with open(os.path.join(common.REPO, "configs", "albert_quickstart.json"), encoding="utf-8") as f:
    return json.load(f)


SHAPES = {"quickstart": quickstart_config, "base": lambda: dict(common.ALBERT_BASE),
          "tiny": lambda: dict(quickstart_config(), vocab_size=1000, hidden_size=64,
                               embedding_size=32, intermediate_size=256, num_hidden_layers=2)}

FLAGS = flags.FLAGS


def define_flags():
  """The command line's flags: defined when run as a script only, so that tests import this
  module beside the other benches (whose flags share names) without a DuplicateFlagError."""
  flags.DEFINE_list("shapes", ["quickstart", "base"], f"Model shapes, of {sorted(SHAPES)}.")
  flags.DEFINE_integer("rounds", 20, "Timed rounds at batch 1 (batch 32: a quarter, at least 3).")
  flags.DEFINE_integer("train_rounds", 5, "Timed training steps of each row.")
  flags.DEFINE_list("train_batch", ["quickstart:32", "base:8"], "Training batch per shape.")
  flags.DEFINE_string("work_dir", None, "Where the exports go (default: a temp dir).")


def inputs(batch, vocab, seed=0):
  """numpy int32 input_ids, input_mask, segment_ids [batch, SEQ] (all real, one segment) and
  label_ids [batch, SEQ]: a tag on every other piece from 1, -100 (ignored) elsewhere."""
  rng = np.random.default_rng(seed + batch)
  ids = rng.integers(5, vocab, size=(batch, SEQ)).astype(np.int32)
  labels = rng.integers(0, len(TAGS), size=(batch, SEQ)).astype(np.int32)
  labels[:, ::2] = -100
  return ids, np.ones_like(ids), np.zeros_like(ids), labels


def build(config_dict, work_dir, spm_model):
  """Our token classifier, its SavedModel, its HF directory and the ONNX graphs.
  Returns (model, SavedModel version dir, HF dir, {ORT row: ONNX file}, build notes)."""
  from albert_tf import AlbertConfig  # lazy: TensorFlow loads once the flags are read
  from albert_tf.checkpoints.hf.save import save_hf_checkpoint  # lazy: as above
  from albert_tf.export import export_token_classifier  # lazy: as above
  from albert_tf.models.token_classifier import AlbertTokenClassifier  # lazy: as above
  model = AlbertTokenClassifier(AlbertConfig.from_dict(config_dict), num_classes=len(TAGS),
                                dropout_rate=0.0)
  saved = export_token_classifier(model, os.path.join(work_dir, "export"), TAGS, SEQ, spm_model)
  hf_dir = os.path.join(work_dir, "hf")
  save_hf_checkpoint(model, hf_dir, label_list=TAGS)
  onnx_path = torch_peers.export_onnx(
      torch_peers.load_hf_classifier(hf_dir, attention="eager",
                                     architecture="AlbertForTokenClassification"),
      os.path.join(work_dir, "hf.onnx"), SEQ)
  variants, notes = torch_peers.onnx_variants(onnx_path, config_dict["hidden_size"],
                                              config_dict["num_attention_heads"])
  onnx_files = {n: variants[n] for n in ("ORT fp32", "ORT fp32 fused") if n in variants}
  return model, saved, hf_dir, onnx_files, notes


def serving_calls(model, saved, hf_model, onnx_files, batch, vocab):
  """{row: call() -> logits [batch, SEQ, tags]} on one batch."""
  import tensorflow as tf  # lazy: as build
  ids, mask, segments, _ = inputs(batch, vocab)
  t = {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
       "segment_ids": tf.constant(segments)}
  in_process = tf.function(lambda: model(t, training=False)["logits"])
  signature = tf.saved_model.load(saved).signatures["token_ids"]
  calls = {OURS: lambda: in_process().numpy(),
           SAVEDMODEL: lambda: signature(**t)["logits"].numpy(),
           "HF torch fp32": torch_peers.hf_call(hf_model, ids, mask, segments, logits=True)}
  for name, path in onnx_files.items():
    calls[name] = torch_peers.ort_call(path, ids, mask, segments, logits=True)
  return calls


def rows_of(times, reference, batch=None):
  """{row: median, p10, p90, min, time_vs_ours, per-round ms (+ per second at `batch`)}."""
  rows = {}
  for name, ms in times.items():
    row = dict(common.summarize(ms), ms=[round(m, 3) for m in ms],
               time_vs_ours=common.paired_ratio(ms, times[reference]))
    if batch:
      row["sequences_per_s"] = batch * 1000 / row["median"]
    else:
      row["steps_per_s"] = 1000 / row["median"]
    rows[name] = row
  return rows


def time_serving(model, saved, hf_dir, onnx_files, vocab, rounds):
  """{"batch 1": {...}, "batch 32": {...}}: each row's timing and its logits' agreement."""
  hf_model = torch_peers.load_hf_classifier(hf_dir, architecture="AlbertForTokenClassification")
  result = {}
  for batch, n in ((1, rounds), (32, max(3, rounds // 4))):
    calls = serving_calls(model, saved, hf_model, onnx_files, batch, vocab)
    ours = calls[OURS]()
    diffs = {name: float(np.abs(call() - ours).max()) for name, call in calls.items()
             if name != OURS}
    bad = {name: d for name, d in diffs.items() if d > AGREEMENT_LIMIT}
    if bad:  # timing models that compute something else would compare nothing
      raise RuntimeError(f"batch {batch}: logits differ from ours by more than "
                         f"{AGREEMENT_LIMIT}: {bad}")
    times = common.time_interleaved(calls, n, warmup=2)
    result[f"batch {batch}"] = {"batch": batch, "rounds": n, "max_logit_diff": diffs,
                                "rows": rows_of(times, OURS, batch)}
  return result


def our_training_step(config_dict, features, labels, weights):
  """The Trainer's compiled loop on TokenClassificationTask, one in-memory batch repeated, the
  official AdamW, from `weights` (the served model's get_weights(): those HF torch loads).
  Returns step() -> loss."""
  import tensorflow as tf  # lazy: as build
  from albert_tf import AlbertConfig  # lazy: as build
  from albert_tf.tasks import token_classification as task_lib  # lazy: as build
  from albert_tf.training import optimizer as opt_lib  # lazy: as build
  from albert_tf.training import trainer as trainer_lib  # lazy: as build

  class InMemoryTokenClassification(task_lib.TokenClassificationTask):

    def build_inputs(self, mode, batch_size, input_context=None):
      return tf.data.Dataset.from_tensors((features, labels)).repeat()

    def build_model(self):
      model = super().build_model()
      model.set_weights(weights)
      return model

  params = task_lib.TokenClassificationConfig(
      AlbertConfig.from_dict(config_dict), data_dir="", max_seq_length=SEQ, labels=TAGS,
      dropout_rate=0.0)
  task = InMemoryTokenClassification(params, tokenizer=object())  # no text is tokenized
  trainer = trainer_lib.Trainer(
      task, None, None, optimizer_fn=lambda: opt_lib.create_optimizer("adamw", 5e-5, 1000, 10))
  batch = len(labels["label_ids"])
  dataset, spec = trainer.inputs.training(batch)
  iterator = iter(dataset)
  trainer.build(spec)
  train_fn = trainer.train_loop(batch)
  return lambda: float(train_fn(iterator, tf.constant(1))[0].numpy())


def hf_training_step(hf_dir, ids, mask, segments, label_ids):
  """HF AlbertForTokenClassification's step on the same batch and weights: each window's mean
  cross-entropy over its labelled pieces, averaged over the batch (ours), global-norm clip 1.0,
  torch.optim.AdamW. Returns step() -> loss."""
  import torch  # lazy: the peers' venv only
  model = torch_peers.load_hf_classifier(hf_dir, architecture="AlbertForTokenClassification")
  model.train()
  feed = {name: torch.from_numpy(value.astype("int64")) for name, value in
          (("input_ids", ids), ("attention_mask", mask), ("token_type_ids", segments))}
  labels = torch.from_numpy(label_ids.astype("int64"))
  labelled = (labels != -100).float()
  optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, eps=1e-6, weight_decay=0.01)

  def step():
    optimizer.zero_grad(set_to_none=True)
    logits = model(**feed).logits
    ce = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.clamp(min=0).flatten(),
                                           reduction="none").view_as(labelled) * labelled
    loss = (ce.sum(1) / labelled.sum(1).clamp(min=1.0)).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.item()
  return step


def time_training(config_dict, weights, hf_dir, batch, rounds):
  ids, mask, segments, label_ids = inputs(batch, config_dict["vocab_size"], seed=1)
  features = {"input_ids": ids, "input_mask": mask, "segment_ids": segments}
  calls = {OURS: our_training_step(config_dict, features, {"label_ids": label_ids}, weights),
           "HF torch fp32": hf_training_step(hf_dir, ids, mask, segments, label_ids)}
  # The first step's loss, before any update: the same weights and batch give the same loss.
  first = {name: call() for name, call in calls.items()}
  times = common.time_interleaved(calls, rounds, warmup=1)
  return {"batch": batch, "rounds": rounds, "first_loss": first,
          "first_loss_diff": abs(first[OURS] - first["HF torch fp32"]),
          "rows": rows_of(times, OURS)}


def run(shapes, work_dir, rounds, train_rounds, train_batches, log=print):
  import tensorflow as tf  # lazy: as build
  tf.config.threading.set_intra_op_parallelism_threads(torch_peers.THREADS)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  result = dict(common.machine(), seq=SEQ, tags=TAGS, threads=torch_peers.THREADS,
                versions=torch_peers.versions(), agreement_limit=AGREEMENT_LIMIT, shapes={})
  spm_model = os.path.join(common.REPO, "tests", "fixtures", "official_training", "spm.model")
  for shape in shapes:
    config = SHAPES[shape]()
    shape_dir = os.path.join(work_dir, shape)
    log(f"{shape}: building ours, the HF directory, ONNX ... ({common.uptime()})")
    model, saved, hf_dir, onnx_files, notes = build(config, shape_dir, spm_model)
    log(f"{shape}: serving ...")
    serving = time_serving(model, saved, hf_dir, onnx_files, config["vocab_size"], rounds)
    log(f"{shape}: training at batch {train_batches[shape]} ...")
    training = time_training(config, model.get_weights(), hf_dir, train_batches[shape],
                             train_rounds)
    result["shapes"][shape] = {"config": config, "serving": serving, "training": training,
                               "onnx_fusions": notes.pop("fusions", {}), "failures": notes}
  result["uptime_after"] = common.uptime()
  return result


def markdown(result):
  """The result as a Markdown page: one serving table, one training table per shape."""
  lines = ["# Token classification beside HF torch and ONNX Runtime", "",
           f"{result['date']}; CPU {result['cpu']} ({result['cpus']} logical CPUs), "
           f"{result['threads']} intra-op threads each; seq {result['seq']}, "
           f"{len(result['tags'])} tags; versions: "
           + ", ".join(f"{k} {v}" for k, v in sorted(result["versions"].items())) + ".",
           f"Load before: `{result['uptime_before']}`; after: `{result['uptime_after']}`.",
           "time vs ours: the row's time / ours in-process, median of per-round ratios "
           "(> 1: ours is faster).", ""]
  for shape, block in result["shapes"].items():
    c = block["config"]
    lines += [f"## {shape} (H {c['hidden_size']}, L {c['num_hidden_layers']}, "
              f"V {c['vocab_size']})", "",
              "| batch | model | median ms | p10-p90 ms | sequences/s | time vs ours "
              "| max logit diff |", "|---|---|---|---|---|---|---|"]
    for cell in block["serving"].values():
      for name, row in cell["rows"].items():
        diff = cell["max_logit_diff"].get(name)
        lines.append(f"| {cell['batch']} | {name} | {row['median']:.1f} | {row['p10']:.1f}-"
                     f"{row['p90']:.1f} | {row['sequences_per_s']:.1f} | "
                     f"{row['time_vs_ours']:.2f} | {'' if diff is None else f'{diff:.1e}'} |")
    training = block["training"]
    lines += ["", f"Training step, batch {training['batch']} x {result['seq']} "
              f"({training['rounds']} rounds):", "",
              "| model | median ms | steps/s | time vs ours | first loss |", "|---|---|---|---|---|"]
    for name, row in training["rows"].items():
      lines.append(f"| {name} | {row['median']:.0f} | {row['steps_per_s']:.2f} | "
                   f"{row['time_vs_ours']:.2f} | {training['first_loss'][name]:.4f} |")
    for name, reason in block["failures"].items():
      lines.append(f"\n{name}: {reason}")
    lines.append("")
  return "\n".join(lines)


def main(_):
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  unknown = [s for s in FLAGS.shapes if s not in SHAPES]
  if unknown:
    raise app.UsageError(f"--shapes: unknown {unknown}; known: {sorted(SHAPES)}")
  try:
    batches = {k: int(v) for k, v in (item.split(":") for item in FLAGS.train_batch)}
  except ValueError as e:
    raise app.UsageError(f"--train_batch: expected shape:batch items, got "
                         f"{FLAGS.train_batch}") from e
  batches = {shape: batches.get(shape, 8) for shape in FLAGS.shapes}
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="albert_tf_peers_ner_")
  result = run(FLAGS.shapes, work_dir, FLAGS.rounds, FLAGS.train_rounds, batches)
  text = markdown(result)
  print(text)
  # A smoke run (tiny only) writes into its work dir: it never overwrites a real result.
  stem = os.path.join(work_dir, "token_classification") if FLAGS.shapes == ["tiny"] else RESULTS
  common.write_results(stem + ".json", result)
  with open(stem + ".md", "w", encoding="utf-8") as f:
    f.write(text)


if __name__ == "__main__":
  define_flags()
  app.run(main)
