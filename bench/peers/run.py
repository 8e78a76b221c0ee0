"""Ours against what users pick instead, side by side in one run: ONNX Runtime and HF
transformers (PyTorch) for CPU serving, HF PyTorch for the pretraining step, and the model
garden for both. ALBERT-base shape, seq 128, two intra-op threads each, calls interleaved.

  make bench-peers              # its own venv: requirements.txt + bench/peers/requirements.txt
  .venv-bench/bin/python -m bench.peers.run [--quick]

Serving (batch 1 and 32, 128 real tokens, random weights; every model the same weights: ours is
written as an HF directory with our converter, which HF torch loads and ONNX is exported from):
  ours fp32 / ours bf16      exported classifier SavedModel, `token_ids` signature
  ours TFLite int8           --tflite_quantize=dynamic --tflite_batch_size=0 (a dynamic batch),
                             ai-edge-litert interpreter; at batch 1 also the batch-1 file
  model garden fp32          its AlbertEncoder exported as a SavedModel (no classifier head)
  HF torch fp32 / bf16       AlbertForSequenceClassification, torch.inference_mode (bf16:
                             under torch.autocast("cpu", bfloat16))
  ORT fp32                   the HF model exported to ONNX, ORT_ENABLE_ALL graph optimizations
  ORT fp32 fused             + onnxruntime.transformers fusions (attention, LayerNorm, GELU)
  ORT int8 (fused)           dynamic int8 quantization (weights QInt8) of each graph
Training: one step of batch 8, seq 128, 20 masked positions, MLM + SOP, LAMB: ours (the
Trainer's compiled loop; fp32 and --precision=bf16), the model garden's BertPretrainerV2 + LAMB,
HF AlbertForPreTraining with the MLM head on the gathered positions and a LAMB step written in
torch (fp32, and bf16 under torch.autocast).

Writes bench/peers/results/latest.{md,json}.

With --early_exit (issue 50; bench/peers/early_exit_peers.py) early exit runs beside ORT fp32
and the model garden instead: our full-depth export, patience 1..6 and "exit at layer k" rows,
ORT fp32 (plain and fused), the model garden, batch 1 and 32, written to
bench/peers/results/early_exit[_<isa>].{md,json}; `--early_exit_size=tiny` is a smoke run.

With --sizes (the default of `make bench-peers`; issue 41) the size axis runs instead:
bench/peers/sizes.py (ALBERT-base/-large/-xxlarge x seq 128/512 x batch 1/32, each variant in
its own subprocess with its peak memory, the CPU's ISA class, --isa=AVX2 to emulate an older
one, the exports' sizes on disk, "did not fit (why)" rows), written to
bench/peers/results/sizes[_<isa>].{md,json}; `--sizes=tiny` is a smoke run of the bench itself.
"""

import json
import os
import tempfile

from absl import app
from absl import flags

from bench import common

HERE = os.path.dirname(os.path.abspath(__file__))

FLAGS = flags.FLAGS
flags.DEFINE_bool("quick", False, "Fewer rounds (a smoke run: ratios are noisier).")
flags.DEFINE_bool("train", True, "Also time the pretraining step.")
flags.DEFINE_string("work_dir", None, "Where the exports go (default: a temp dir).")
# The size axis (issue 41; bench/peers/sizes.py): with --sizes, every variant runs in its own
# subprocess (peak memory beside time) and the result goes to results/sizes[_<isa>].{md,json}.
flags.DEFINE_list("sizes", [], "ALBERT sizes to run (tiny, base, large, xxlarge); empty: the "
                  "ALBERT-base seq-128 bench above, all peers in this process.")
flags.DEFINE_list("seq_lens", ["128", "512"], "With --sizes: sequence lengths.")
flags.DEFINE_list("batches", ["1", "32"], "With --sizes: batch sizes (a batch whose estimated "
                  "peak memory exceeds --mem_gib runs at 8 instead, recorded with the reason).")
flags.DEFINE_string("isa", None, "With --sizes or --early_exit: ONEDNN_MAX_CPU_ISA for "
                    "TensorFlow (and torch with --sizes), e.g. AVX2, to play an older CPU "
                    "class; ONNX Runtime has no such cap; rows are labelled.")
flags.DEFINE_integer("passes", 2, "With --sizes: interleaved passes per cell (one subprocess "
                     "per variant per pass); a cell estimated at over 10 s per call runs 1.")
flags.DEFINE_integer("calls", 10, "With --sizes: timed calls per subprocess at batch 1 seq "
                     "128 (fewer for bigger requests, at least 3).")
flags.DEFINE_float("budget_s", 3600, "With --sizes: one variant subprocess's time limit.")
flags.DEFINE_float("total_budget_h", 12, "With --sizes: variants not started by then are "
                   "reported as not fitting the bench's time.")
flags.DEFINE_float("mem_gib", 24, "With --sizes: the machine's memory for the fit estimates.")
flags.DEFINE_string("out_name", None, "With --sizes or --early_exit: the results' file stem "
                    "(default sizes or early_exit, + _<isa> with --isa).")
flags.DEFINE_float("assumed_gflops", 100, "With --sizes: sustained GFLOP/s for the printed "
                   "run-time estimate only.")
# Early exit beside the peers (issue 50; bench/peers/early_exit_peers.py).
flags.DEFINE_bool("early_exit", False, "Early exit's rows (full depth, patience, exit at layer "
                  "k) beside ORT fp32 and the model garden, batch 1 and 32; results in "
                  "results/early_exit[_<isa>].{md,json}. Runs alone (PEERS_ARGS=--early_exit).")
flags.DEFINE_enum("early_exit_size", "base", ["base", "tiny"], "With --early_exit: ALBERT-base "
                  "shape, or tiny (a smoke run of the bench; results go to --work_dir).")
flags.DEFINE_integer("early_exit_rounds", 30, "With --early_exit: timed rounds at batch 1 (a "
                     "sixth, at least 4, at batch 32); --quick: 3.")
flags.DEFINE_list("early_exit_batches", ["1", "32"], "With --early_exit: batch sizes.")
flags.DEFINE_list("early_exit_refresh_goals", [], "Result stems (e.g. early_exit,early_exit_avx2)"
                  " whose goal lines are read again through the current accuracy sweep "
                  "(bench/experiments/results/early_exit_accuracy_order.json), without timing "
                  "anything.")
flags.DEFINE_list("patiences", [], "With --early_exit: patience rows (default 1..6; tiny 1,2).")
flags.DEFINE_list("exit_layers", [], "With --early_exit: forced exit layers (default "
                  "2,4,..,12; tiny 2,4).")

SEQ = 128
GOALS = {  # serving: our time / the peer's; training: our step time / the peer's
    ("batch 1", "ours fp32", "model garden fp32"): 0.8,
    ("batch 1", "ours fp32", "ORT best fp32"): 1.0,
    # The same fp32 export with TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 (README: serving with frozen
    # weights); --sizes runs only.
    ("batch 1", "ours fp32, frozen weights", "model garden fp32"): 0.8,
    ("batch 1", "ours fp32, frozen weights", "ORT best fp32"): 1.0,
    ("batch 1", "ours bf16", "ORT best fp32"): 0.8,
    ("batch 1", "ours bf16", "HF torch bf16"): 1.0,
    ("batch 1", "ours TFLite int8", "ORT int8"): 1.0,
    ("batch 32", "ours fp32", "ORT best fp32"): 1.0,
    ("batch 32", "ours fp32", "model garden fp32"): 1.0,
    ("batch 32", "ours bf16", "HF torch bf16"): 1.0,
    ("batch 32", "ours TFLite int8", "ORT int8"): 1.0,
    ("train", "ours fp32", "HF torch fp32"): 0.9,
    ("train", "ours fp32", "model garden fp32"): 1 / 1.3,
    ("train", "ours bf16", "HF torch bf16"): 1.0,
}
# Largest |probability difference| to ours fp32 (int8 rows: the same weights served at int8).
AGREEMENT_GOALS = {("batch 1", "ours TFLite int8"): 1e-2, ("batch 32", "ours TFLite int8"): 1e-2}


def build_exports(work_dir):
  """Our classifier exported (fp32, bf16, TFLite int8), as an HF directory, and the model
  garden's encoder. Returns {name: path}."""
  from albert_tf import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.checkpoints.hf.save import save_hf_checkpoint  # pylint: disable=g-import-not-at-top
  from albert_tf.export import export_classifier  # pylint: disable=g-import-not-at-top
  from albert_tf.export.tflite import write_tflite  # pylint: disable=g-import-not-at-top
  from albert_tf.models.classifier import AlbertClassifier  # pylint: disable=g-import-not-at-top
  model = AlbertClassifier(AlbertConfig.from_dict(common.ALBERT_BASE), num_classes=2,
                           dropout_rate=0.0)
  paths = {}
  for precision in ("fp32", "bf16"):
    paths[f"ours {precision}"] = export_classifier(
        model, os.path.join(work_dir, f"ours_{precision}"), ["0", "1"], SEQ, precision=precision)
  paths["ours TFLite int8"] = write_tflite(model, os.path.join(work_dir, "ours_int8.tflite"),
                                           SEQ, quantize="dynamic", batch_size=None)
  paths["ours TFLite int8, batch-1 file"] = write_tflite(
      model, os.path.join(work_dir, "ours_int8_b1.tflite"), SEQ, quantize="dynamic")
  paths["hf"] = os.path.join(work_dir, "hf")
  save_hf_checkpoint(model, paths["hf"], label_list=["0", "1"])
  paths["model garden fp32"] = common.export_model_garden_encoder(work_dir)
  return paths


def serving_calls(paths, peers, batch):
  """{name: call() -> probabilities or encoder outputs} on one all-real batch."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from ai_edge_litert.interpreter import Interpreter  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(batch)
  ids = rng.integers(5, 30000, size=(batch, SEQ)).astype(np.int32)
  mask = np.ones_like(ids)
  segments = (np.arange(SEQ) >= SEQ // 2).astype(np.int32)[None].repeat(batch, 0)
  t = {k: tf.constant(v) for k, v in (("input_ids", ids), ("input_mask", mask),
                                      ("segment_ids", segments))}
  calls = {}
  for name in ("ours fp32", "ours bf16"):
    signature = tf.saved_model.load(paths[name]).signatures["token_ids"]
    calls[name] = lambda s=signature: s(**t)["probabilities"].numpy()
  garden = tf.saved_model.load(paths["model garden fp32"]).signatures["serving_default"]
  calls["model garden fp32"] = lambda: garden(input_word_ids=t["input_ids"],
                                              input_mask=t["input_mask"],
                                              input_type_ids=t["segment_ids"])
  tflite = ["ours TFLite int8"] + (["ours TFLite int8, batch-1 file"] if batch == 1 else [])
  for name in tflite:
    # The dynamic-batch file's runner resizes its inputs to the batch on the first call.
    runner = Interpreter(model_path=paths[name], num_threads=2).get_signature_runner()
    calls[name] = lambda r=runner: np.asarray(r(
        input_ids=ids, input_mask=mask, segment_ids=segments)["probabilities"])
  calls["HF torch fp32"] = peers.hf_call(peers_model(paths, peers), ids, mask, segments)
  calls["HF torch bf16"] = peers.hf_call(peers_model(paths, peers), ids, mask, segments,
                                         bf16=True)
  for name, model_file in paths["onnx"].items():
    calls[name] = peers.ort_call(model_file, ids, mask, segments)
  return calls


_HF = {}


def peers_model(paths, peers):
  if "model" not in _HF:
    _HF["model"] = peers.load_hf_classifier(paths["hf"])
  return _HF["model"]


def agreement(calls):
  """Max |probability difference| of each model to ours fp32 (int8: to its own fp32)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  out = {name: np.asarray(call()) for name, call in calls.items() if "garden" not in name}
  reference = {"ORT int8 fused": "ORT fp32 fused", "ORT int8": "ORT fp32"}
  return {name: float(np.abs(value - out[reference.get(name, "ours fp32")]).max())
          for name, value in out.items()
          if name != "ours fp32" and reference.get(name, "ours fp32") in out}


def time_serving(paths, peers, rounds):
  """[(batch label, {name: [ms]}, {name: max prob diff})] for batch 1 and 32."""
  results = []
  for batch, n in ((1, rounds), (32, max(5, rounds // 8))):
    calls = serving_calls(paths, peers, batch)
    diffs = agreement(calls)
    results.append((f"batch {batch}", common.time_interleaved(calls, n, warmup=2), diffs))
  return results


def time_training(peers, rounds):
  """{name: [ms per step]} of the three pretraining steps, interleaved."""
  from albert_tf import AlbertConfig  # pylint: disable=g-import-not-at-top
  features, labels = common.synthetic_pretraining_batch(8, SEQ, 20, 30000)
  config = AlbertConfig.from_dict(common.ALBERT_BASE)
  ours, _ = common.build_our_pretraining_step(config, features, labels, 8, SEQ, 20)
  ours_bf16, _ = common.build_our_pretraining_step(config, features, labels, 8, SEQ, 20,
                                                   precision="bf16")
  garden_step, inputs, _ = common.build_model_garden_step(config, features, labels)
  calls = {"ours fp32": lambda: ours(1), "ours bf16": lambda: ours_bf16(1),
           "model garden fp32": lambda: garden_step(inputs, labels).numpy(),
           "HF torch fp32": peers.hf_pretraining_step(dict(common.ALBERT_BASE), features, labels),
           "HF torch bf16": peers.hf_pretraining_step(dict(common.ALBERT_BASE), features, labels,
                                                      bf16=True)}
  return common.time_interleaved(calls, rounds, warmup=1)


def main_sizes():
  """--sizes: the size axis (bench/peers/sizes.py), written to results/sizes[_<isa>].*"""
  from bench.peers import report  # pylint: disable=g-import-not-at-top
  from bench.peers import sizes  # pylint: disable=g-import-not-at-top
  unknown = [s for s in FLAGS.sizes if s not in sizes.SIZES]
  if unknown:
    raise app.UsageError(f"--sizes: unknown {unknown}; known: {sorted(sizes.SIZES)}")
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="albert_tf_peers_sizes_")
  result = sizes.run(FLAGS.sizes, [int(s) for s in FLAGS.seq_lens],
                     [int(b) for b in FLAGS.batches], FLAGS.isa, work_dir, GOALS,
                     passes=FLAGS.passes, calls=FLAGS.calls, budget_s=FLAGS.budget_s,
                     total_budget_h=FLAGS.total_budget_h, mem_gib=FLAGS.mem_gib,
                     train=FLAGS.train, gflops=FLAGS.assumed_gflops)
  text = report.markdown_sizes(result)
  print(text)
  stem = FLAGS.out_name or "sizes" + (f"_{FLAGS.isa.lower()}" if FLAGS.isa else "")
  # A smoke run (tiny only) writes into its work dir: it never overwrites a real result.
  out_dir = work_dir if set(FLAGS.sizes) == {"tiny"} else os.path.join(HERE, "results")
  os.makedirs(out_dir, exist_ok=True)
  with open(os.path.join(out_dir, stem + ".json"), "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1, sort_keys=True)
  with open(os.path.join(out_dir, stem + ".md"), "w", encoding="utf-8") as f:
    f.write(text)
  print(f"written: {os.path.join(out_dir, stem)}.{{md,json}}")


def main_early_exit():
  """--early_exit: early exit beside ORT and the model garden (bench/peers/early_exit_peers.py),
  written to results/early_exit[_<isa>].*"""
  from bench.peers import early_exit_peers  # pylint: disable=g-import-not-at-top
  from absl import logging  # pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.WARNING)  # the exports' SavedModel INFO lines
  if FLAGS.sizes:
    raise app.UsageError("--early_exit runs alone, without --sizes: make bench-peers "
                         "PEERS_ARGS=--early_exit")
  tiny = FLAGS.early_exit_size == "tiny"
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="albert_tf_peers_early_exit_")
  patiences, exit_layers = [int(p) for p in FLAGS.patiences], [int(k) for k in FLAGS.exit_layers]
  try:
    early_exit_peers.settings(FLAGS.early_exit_size, FLAGS.isa, patiences, exit_layers)
  except ValueError as e:
    raise app.UsageError(str(e)) from e
  result = early_exit_peers.run(
      FLAGS.early_exit_size, work_dir, FLAGS.isa, rounds=3 if FLAGS.quick else
      FLAGS.early_exit_rounds, warmup=1 if FLAGS.quick else 2,
      batches=[int(b) for b in FLAGS.early_exit_batches], patiences=patiences,
      exit_layers=exit_layers)
  print(early_exit_peers.markdown(result))
  stem = FLAGS.out_name or "early_exit" + (f"_{FLAGS.isa.lower()}" if FLAGS.isa else "")
  # A smoke run (tiny) writes into its work dir: it never overwrites a real result.
  out = early_exit_peers.write(result, work_dir if tiny else os.path.join(HERE, "results"), stem)
  print(f"written: {out}.{{md,json}}")


def main_refresh_goals(results_dir=os.path.join(HERE, "results")):
  """--early_exit_refresh_goals: rewrites results/<stem>.{json,md} with goals from the current
  accuracy sweep (early_exit_peers.refresh_goals)."""
  from bench.peers import early_exit_peers  # pylint: disable=g-import-not-at-top
  with open(early_exit_peers.ACCURACY_FILE, encoding="utf-8") as f:
    accuracy = json.load(f)
  for stem in FLAGS.early_exit_refresh_goals:
    path = os.path.join(results_dir, stem + ".json")
    if not os.path.exists(path):
      raise app.UsageError(f"--early_exit_refresh_goals: no {path}")
    with open(path, encoding="utf-8") as f:
      result = json.load(f)
    result = early_exit_peers.refresh_goals(result, accuracy,
                                            accuracy.get("machine", {}).get("date"))
    print(f"written: {early_exit_peers.write(result, results_dir, stem)}.{{md,json}}")


def main(_):
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  if FLAGS.early_exit_refresh_goals:
    main_refresh_goals()
    return
  if FLAGS.early_exit:
    main_early_exit()
    return
  if FLAGS.sizes:
    main_sizes()
    return
  from bench.peers import torch_peers as peers  # pylint: disable=g-import-not-at-top
  from bench.peers import report  # pylint: disable=g-import-not-at-top
  work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="albert_tf_peers_")
  paths = build_exports(work_dir)
  # Exported with eager attention: its graph is the one onnxruntime.transformers fuses.
  onnx_path = peers.export_onnx(peers.load_hf_classifier(paths["hf"], attention="eager"),
                                os.path.join(work_dir, "hf.onnx"), SEQ)
  paths["onnx"], failures = peers.onnx_variants(onnx_path, 768, 12)
  load_before = common.uptime()
  rounds = 8 if FLAGS.quick else 24
  serving = time_serving(paths, peers, rounds)
  training = time_training(peers, 2 if FLAGS.quick else 6) if FLAGS.train else {}
  result = report.build(serving, training, failures, peers.versions(), load_before,
                        common.uptime(), GOALS, AGREEMENT_GOALS)
  print(report.markdown(result))
  os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
  with open(os.path.join(HERE, "results", "latest.json"), "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1, sort_keys=True)
  with open(os.path.join(HERE, "results", "latest.md"), "w", encoding="utf-8") as f:
    f.write(report.markdown(result))


if __name__ == "__main__":
  app.run(main)
