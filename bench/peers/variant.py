"""One variant of the size-axis bench (bench/peers/sizes.py), alone in this process: load it,
warm it up, time `calls` calls, save its outputs, report the times and the process's peak memory.

  python -m bench.peers.variant <spec.json>

The spec (written by sizes.py) names the kind of variant and its files:
  savedmodel   our export's `token_ids` signature -> probabilities
  garden       the model garden encoder's `serving_default` + our classifier head in numpy
               (with "head"; without, its own random weights: no probabilities)
  tflite       our TFLite file (ai-edge-litert interpreter, two threads) -> probabilities
  hf / ort     HF torch AlbertForSequenceClassification / ONNX Runtime (torch_peers.py)
  train_ours / train_garden / train_hf   one pretraining step (bench/common.py, torch_peers.py)
The last stdout line is JSON: {"ms": [...], "load_s": s, "vmhwm_kib": peak RSS, "out": npy}.
"""

import json
import os
import resource
import sys
import time


def peak_kib():
  """The process's peak resident memory in KiB: VmHWM of /proc/self/status, else ru_maxrss."""
  try:
    with open("/proc/self/status", encoding="utf-8") as f:
      for line in f:
        if line.startswith("VmHWM:"):
          return int(line.split()[1])
  except OSError:
    pass
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def inputs(batch, seq):
  """The bench's all-real batch (as run.py's serving_calls): ids, mask, segments, int32."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(batch)
  ids = rng.integers(5, 30000, size=(batch, seq)).astype(np.int32)
  mask = np.ones_like(ids)
  segments = (np.arange(seq) >= seq // 2).astype(np.int32)[None].repeat(batch, 0)
  return ids, mask, segments


def build_call(spec):
  """spec -> call() returning the variant's output (probabilities, a loss, or None)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  kind = spec["kind"]
  if kind.startswith("train_"):
    return build_train_call(spec)
  ids, mask, segments = inputs(spec["batch"], spec["seq"])
  if kind in ("savedmodel", "garden"):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    t = {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
         "segment_ids": tf.constant(segments)}
    loaded = tf.saved_model.load(spec["path"])
    if kind == "savedmodel":
      signature = loaded.signatures["token_ids"]
      return lambda: signature(**t)["probabilities"].numpy()
    garden = loaded.signatures["serving_default"]
    if not spec.get("head"):  # the garden's own random weights: encoder outputs only
      return lambda: (garden(input_word_ids=t["input_ids"], input_mask=t["input_mask"],
                             input_type_ids=t["segment_ids"]), None)[1]
    head = np.load(spec["head"])  # our classifier head (official [classes, H] layout)
    weights, bias = head["weights"].T, head["bias"]

    def call():
      pooled = garden(input_word_ids=t["input_ids"], input_mask=t["input_mask"],
                      input_type_ids=t["segment_ids"])["pooled_output"].numpy()
      logits = pooled @ weights + bias
      e = np.exp(logits - logits.max(-1, keepdims=True))
      return e / e.sum(-1, keepdims=True)
    return call
  if kind == "tflite":
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=g-import-not-at-top
    runner = Interpreter(model_path=spec["path"], num_threads=2).get_signature_runner()
    return lambda: np.asarray(runner(input_ids=ids, input_mask=mask,
                                     segment_ids=segments)["probabilities"])
  from bench.peers import torch_peers as peers  # pylint: disable=g-import-not-at-top
  if kind == "hf":
    return peers.hf_call(peers.load_hf_classifier(spec["path"]), ids, mask, segments,
                         bf16=spec.get("bf16", False))
  if kind == "ort":
    return peers.ort_call(spec["path"], ids, mask, segments)
  raise ValueError(f"unknown variant kind {kind!r}")


def build_train_call(spec):
  """One pretraining step of batch spec["batch"], seq spec["seq"], 20 masked positions."""
  from bench import common  # pylint: disable=g-import-not-at-top
  features, labels = common.synthetic_pretraining_batch(spec["batch"], spec["seq"], 20,
                                                        spec["config"]["vocab_size"])
  kind = spec["kind"]
  if kind == "train_hf":
    return peers_step(spec, features, labels)
  from albert_tf import AlbertConfig  # pylint: disable=g-import-not-at-top
  config = AlbertConfig.from_dict(spec["config"])
  if kind == "train_ours":
    run, _ = common.build_our_pretraining_step(config, features, labels, spec["batch"],
                                               spec["seq"], 20,
                                               precision=spec.get("precision", "fp32"))
    return lambda: run(1)
  step, garden_inputs, _ = common.build_model_garden_step(config, features, labels)
  return lambda: float(step(garden_inputs, labels).numpy())


def peers_step(spec, features, labels):
  from bench.peers import torch_peers as peers  # pylint: disable=g-import-not-at-top
  return peers.hf_pretraining_step(dict(spec["config"]), features, labels,
                                   bf16=spec.get("bf16", False))


def main(spec_file):
  import numpy as np  # pylint: disable=g-import-not-at-top
  with open(spec_file, encoding="utf-8") as f:
    spec = json.load(f)
  start = time.perf_counter()
  call = build_call(spec)
  for _ in range(spec.get("warmup", 2)):  # graph instantiation, oneDNN primitive creation
    out = call()
  load_s = time.perf_counter() - start
  ms = []
  for _ in range(spec["calls"]):
    start = time.perf_counter()
    out = call()
    ms.append((time.perf_counter() - start) * 1000)
  saved = None
  if spec.get("out") and isinstance(out, np.ndarray):
    np.save(spec["out"], out)
    saved = spec["out"]
  print(json.dumps({"ms": ms, "load_s": load_s, "vmhwm_kib": peak_kib(), "out": saved}),
        flush=True)


if __name__ == "__main__":
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  main(sys.argv[1])
