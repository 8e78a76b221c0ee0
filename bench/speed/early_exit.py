"""Early exit (PABEE, docs/early_exit.md): serving latency against our own full-depth export.

  .venv/bin/python -m bench.speed.early_exit [--batch_sizes=1,32] [--rounds=30]

ALBERT-base shape (V 30000, E 128, H 768, L 12, one shared group), random weights,
sequence length 128 (every position real). Every model is exported with export_classifier (the
--export_dir path), loaded back with tf.saved_model.load and called through its token_ids
signature, interleaved round by round (bench/common.py):
  full depth        the plain classifier's export (no internal classifiers): the baseline
  patience p        the same weights with early exit, random internal classifiers: the exit
                    layers are what those heads give (reported as the mean exit layer seen)
  exit at layer k   internal classifiers that answer one class whatever the input (zero
                    weights, a bias), patience k - 1: every example leaves at layer k, so the
                    row is the latency as a function of the exit layer
  mixed batch       batch > 1 only: the batch's first half is one input (A), the rest another
                    (B); heads made so that at patience 1 A leaves at layer 2 and B runs all 12
                    layers (per-example exit: B's rows run on without A's)
The answers of `patience 11` (no example can leave early) are checked bit for bit against
the full-depth export's. `python -m bench.peers.run --early_exit` times the same rows (built by
build_signatures below) beside ONNX Runtime and the model garden. The accuracy of a patience
sweep is an experiment of its own: bench/experiments/early_exit_accuracy/.
"""

import os
import tempfile

from absl import app
from absl import flags

from bench import common

FLAGS = flags.FLAGS
RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def set_heads(model, constant):
  """Internal heads answering class 0 whatever the input (constant), else random ones."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  for head in model.early_exit_classifiers.heads:
    shape = head.output_weights.shape
    head.output_weights.assign(np.zeros(shape, np.float32) if constant else
                               rng.normal(0, 0.02, shape).astype(np.float32))
    head.output_bias.assign(np.array([1.0, 0.0], np.float32) if constant else
                            np.zeros([2], np.float32))


def mixed_inputs(batch, seq, vocab=30000):
  """Token inputs [batch, seq]: the first half of the rows one random sequence (A), the rest
  another (B), every position real."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(7)
  a, b = rng.integers(5, vocab, [2, seq])
  ids = np.stack([a if i < max(1, batch // 2) else b for i in range(batch)])
  return dict(input_ids=ids.astype(np.int32), input_mask=np.ones([batch, seq], np.int32),
              segment_ids=(np.arange(seq)[None] >= seq // 2).astype(np.int32).repeat(batch, 0))


def set_mixed_heads(model, seq):
  """Internal heads under which, at patience 1, input A leaves at layer 2 and input B runs every
  layer: even layers answer class 0 for anything (bias); odd layers answer 0 for A and 1 for B
  (the direction between their pooled outputs at that layer), so B never answers the same twice
  in a row."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  encoder = model.encoder
  inputs = mixed_inputs(2, seq, encoder.config.vocab_size)
  hidden = encoder(inputs, training=False)["encoder_outputs"]
  for layer, head in enumerate(model.early_exit_classifiers.heads, start=1):
    pooled = encoder.pooler(hidden[layer - 1][:, 0, :]).numpy().astype(np.float64)
    weights = np.zeros(head.output_weights.shape, np.float32)
    bias = np.array([1.0, 0.0], np.float32)
    if layer % 2:
      direction = pooled[0] - pooled[1]
      direction /= np.linalg.norm(direction) ** 2 / 10  # margin: +-5 at A and B
      weights[0] = direction
      bias = np.array([-direction @ (pooled[0] + pooled[1]) / 2, 0.0], np.float32)
    head.output_weights.assign(weights)
    head.output_bias.assign(bias)


def build_signatures(work_dir, config, seq, patiences, exit_layers, mixed):
  """Our exports of one random ALBERT (`config`: a dict like common.ALBERT_BASE) at sequence
  length `seq`, loaded back: the rows of the docstring above ("full depth", "patience p" for p in
  `patiences` and L - 1, "exit at layer k" for k in `exit_layers`, and "mixed batch" if
  `mixed`). Returns (the plain classifier, {row name: its `token_ids` signature})."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.checkpoints import official_names  # pylint: disable=g-import-not-at-top
  from albert_tf.export import export_classifier  # pylint: disable=g-import-not-at-top
  from albert_tf.models.classifier import AlbertClassifier  # pylint: disable=g-import-not-at-top
  config = AlbertConfig.from_dict(config)
  layers = config.num_hidden_layers
  plain = AlbertClassifier(config, 2)
  model = AlbertClassifier(config, 2, early_exit="patience")
  named = official_names.model_variable_map(model)
  for name, variable in official_names.model_variable_map(plain).items():
    named[name].assign(variable)

  def export(name, patience=None):
    target = plain if patience is None else model
    if patience is not None:
      model.patience = patience
    return tf.saved_model.load(export_classifier(target, os.path.join(work_dir, name),
                                                 ["0", "1"], seq)).signatures["token_ids"]

  fns = {"full depth": export("full")}
  set_heads(model, constant=False)
  for p in patiences:
    fns[f"patience {p}"] = export(f"patience_{p}", p)
  fns[f"patience {layers - 1}"] = export("patience_no_exit", layers - 1)
  set_heads(model, constant=True)
  for k in exit_layers:
    fns[f"exit at layer {k}"] = export(f"exit_{k}", k - 1)
  if mixed:
    set_mixed_heads(model, seq)
    fns["mixed batch"] = export("mixed", 1)
  return plain, fns


def signature_calls(fns, batch, seq, vocab=30000):
  """({row name: call()} of build_signatures' exports on one batch of _mixed_inputs (the mixed
  batch only at batch > 1), the batch as numpy arrays)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  arrays = mixed_inputs(batch, seq, vocab)
  inputs = {k: tf.constant(v) for k, v in arrays.items()}
  calls = {name: (lambda f=fn: f(**inputs)) for name, fn in fns.items()
           if batch > 1 or name != "mixed batch"}
  return calls, arrays


def check_outputs(calls, layers):
  """Each call's outputs once, as numpy ({name: {output: array}}), and whether `patience L-1`
  (no example can leave early) answers the full-depth export's probabilities bit for bit."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  outputs = {name: {k: v.numpy() for k, v in call().items()} for name, call in calls.items()}
  exact = bool(np.array_equal(outputs["full depth"]["probabilities"],
                              outputs[f"patience {layers - 1}"]["probabilities"]))
  return outputs, exact


def latency_rows(times, batch, rounds, outputs, references=None):
  """One row per timed model: its median/p10/p90/min ms, `vs_full_depth` and `speedup` (the
  median of per-round ratios to "full depth"), for each {key: reference row} of `references`
  the same ratio to that row (when it was timed), and the mean exit layer of its outputs."""
  rows = []
  for name, ms in times.items():
    vs_full = common.paired_ratio(ms, times["full depth"])
    row = dict(batch=batch, model=name, rounds=rounds, **common.summarize(ms),
               vs_full_depth=vs_full, speedup=1.0 / vs_full)
    for key, reference in (references or {}).items():
      if reference in times:
        row[key] = common.paired_ratio(ms, times[reference])
    if "exit_layer" in outputs.get(name, {}):
      row["mean_exit_layer"] = float(outputs[name]["exit_layer"].mean())
    rows.append(row)
  return rows


def _latency(work_dir):
  seq = FLAGS.seq_length
  layers = common.ALBERT_BASE["num_hidden_layers"]
  batch_sizes = [int(b) for b in FLAGS.batch_sizes.split(",")]
  _, fns = build_signatures(work_dir, common.ALBERT_BASE, seq,
                            [int(p) for p in FLAGS.patiences.split(",")],
                            [int(k) for k in FLAGS.exit_layers.split(",")],
                            mixed=max(batch_sizes) > 1)
  results = {"rows": [], "machine": common.machine(), "seq_length": seq, "layers": layers}
  for batch in batch_sizes:
    rounds = FLAGS.rounds if batch == 1 else max(4, FLAGS.rounds // 6)
    calls, _ = signature_calls(fns, batch, seq)
    outputs, exact = check_outputs(calls, layers)
    if "mixed batch" in outputs:
      results.setdefault("mixed_batch_exit_layers", {})[str(batch)] = (
          outputs["mixed batch"]["exit_layer"].tolist())
    times = common.time_interleaved(calls, rounds, warmup=2)
    results["rows"] += latency_rows(times, batch, rounds, outputs)
    results.setdefault("no_exit_bit_exact", {})[str(batch)] = exact
  results["uptime_after"] = common.uptime()
  return results


def _define_flags():
  """The script's flags (defined only when it runs as a script: bench/peers/early_exit_peers.py
  imports its functions into a process with flags of its own)."""
  flags.DEFINE_string("batch_sizes", "1,32", "Comma-separated batch sizes.")
  flags.DEFINE_integer("seq_length", 128, "Sequence length.")
  flags.DEFINE_integer("rounds", 30, "Timed rounds at batch 1 (a sixth, at least 4, at larger "
                       "batches).")
  flags.DEFINE_string("patiences", "1,2,3,4,5,6", "Patience values (random internal heads).")
  flags.DEFINE_string("exit_layers", "2,4,6,8,10,12", "Forced exit layers.")
  flags.DEFINE_string("work_dir", None, "Where the SavedModels go (default: a temp dir).")
  flags.DEFINE_string("output_json", None, "Where the results go (default: "
                      "bench/speed/results/early_exit_latency.json).")


def main(_):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  del tf
  results = _latency(FLAGS.work_dir or tempfile.mkdtemp(prefix="early_exit_"))
  print(f"CPU: {results['machine']['machine']}; {results['machine']['uptime_before']}")
  print(f"{'batch':>5} {'model':<20} {'median ms':>10} {'p10-p90 ms':>16} {'speedup':>8} "
        f"{'exit layer':>10}")
  for r in results["rows"]:
    print(f"{r['batch']:>5} {r['model']:<20} {r['median']:>10.1f} "
          f"{r['p10']:>7.1f}-{r['p90']:<8.1f} {r['speedup']:>8.2f} "
          f"{r.get('mean_exit_layer', results['layers']):>10.2f}")
  print(f"patience {results['layers'] - 1} == full depth, bit for bit: "
        f"{results['no_exit_bit_exact']}")
  common.write_results(FLAGS.output_json or os.path.join(RESULTS_DIR, "early_exit_latency.json"),
                       results)


if __name__ == "__main__":
  _define_flags()
  app.run(main)
