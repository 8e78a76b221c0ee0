"""Tiny GLUE / RACE data and a tiny model setup for the fine-tuning and export tests."""

import json
import os

# Sentences drawn from the tiny SentencePiece corpus's vocabulary (tests/helpers/text.py), so
# tokenization yields real pieces rather than mostly <unk>.
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A sentence piece model splits words into frequent pieces.",
    "Albert shares parameters across all transformer layers.",
    "The factorized embedding keeps the vocabulary matrix small.",
    "Sentence order prediction asks whether two segments were swapped.",
    "Masked language modelling hides some tokens and predicts them.",
    "Tokyo is the capital of Japan, and Paris is the capital of France.",
    "Rivers flow to the sea, and mountains rise above the clouds.",
]


def _write(path, text):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return path


def _pairs(n, offset=0):
  for i in range(n):
    a = SENTENCES[(i + offset) % len(SENTENCES)]
    b = SENTENCES[(i * 3 + 1 + offset) % len(SENTENCES)]
    yield i, a, b


def write_mrpc(glue_dir, n_train=16, n_dev=8, n_test=5):
  """MRPC in the GLUE layout; label 1 when the two sentences are identical (learnable)."""
  header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
  def labeled(n, offset):
    rows = []
    for i, a, b in _pairs(n, offset):
      if i % 2 == 0:
        b = a
      rows.append(f"{int(a == b)}\t{100 + i}\t{200 + i}\t{a}\t{b}\n")
    return header + "".join(rows)
  _write(os.path.join(glue_dir, "MRPC", "train.tsv"), labeled(n_train, 0))
  _write(os.path.join(glue_dir, "MRPC", "dev.tsv"), labeled(n_dev, 3))
  test = "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n" + "".join(
      f"{i}\t{300 + i}\t{400 + i}\t{a}\t{b}\n" for i, a, b in _pairs(n_test, 5))
  _write(os.path.join(glue_dir, "MRPC", "test.tsv"), test)
  return glue_dir


def write_cola(glue_dir, n_train=8, n_dev=4, n_test=3):
  def labeled(n, offset):
    return "".join(f"src{i}\t{i % 2}\t\t{SENTENCES[(i + offset) % len(SENTENCES)]}\n"
                   for i in range(n))
  _write(os.path.join(glue_dir, "CoLA", "train.tsv"), labeled(n_train, 0))
  _write(os.path.join(glue_dir, "CoLA", "dev.tsv"), labeled(n_dev, 2))
  _write(os.path.join(glue_dir, "CoLA", "test.tsv"), "index\tsentence\n" + "".join(
      f"{i}\t{SENTENCES[i % len(SENTENCES)]}\n" for i in range(n_test)))
  return glue_dir


def write_stsb(glue_dir, n_train=8, n_dev=4, n_test=3):
  header = ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
            "\tscore\n")
  def labeled(n, offset):
    return header + "".join(f"{i}\tmain\tf\t2012\t{i}\tnone\tnone\t{a}\t{b}\t{(i % 6) * 0.9:.3f}\n"
                            for i, a, b in _pairs(n, offset))
  _write(os.path.join(glue_dir, "STS-B", "train.tsv"), labeled(n_train, 0))
  _write(os.path.join(glue_dir, "STS-B", "dev.tsv"), labeled(n_dev, 1))
  _write(os.path.join(glue_dir, "STS-B", "test.tsv"), header.replace("\tscore", "") + "".join(
      f"{i}\tmain\tf\t2012\t{i}\tnone\tnone\t{a}\t{b}\n" for i, a, b in _pairs(n_test, 2)))
  return glue_dir


def race_passage(passage_id, n_questions=2, with_answers=True):
  passage = {
      "id": passage_id,
      "article": " ".join(SENTENCES[:4]),
      "questions": ["What does the fox jump over?", "Albert shares _ across layers."][
          :n_questions],
      "options": [["the lazy dog", "the sea", "Paris", "the clouds"],
                  ["parameters", "rivers", "pieces", "tokens"]][:n_questions],
  }
  if with_answers:
    passage["answers"] = ["A", "A"][:n_questions]
  return passage


def write_race(data_dir, splits=("train", "dev", "test"), files_per_level=2):
  """RACE layout: RACE/<split>/<middle|high>/<n>.txt, one JSON passage per file."""
  for split in splits:
    for level in ("middle", "high"):
      for i in range(files_per_level):
        path = os.path.join(data_dir, "RACE", split, level, f"{i}.txt")
        _write(path, json.dumps(race_passage(f"{split}/{level}/{i}.txt")))
  return data_dir


def write_tiny_config(path, **overrides):
  """The repo's tiny config (H=32, L=2, vocab 1000) as an albert_config.json file."""
  from tests.conftest import tiny_config_dict  # pylint: disable=g-import-not-at-top
  cfg = tiny_config_dict(**overrides)
  _write(path, json.dumps(cfg))
  return path


# A client for exported SavedModels, run in a fresh interpreter that imports only TensorFlow
# (plus tensorflow_text when the spec asks for it) -- never albert_tf -- as TF Serving would.
SERVING_CLIENT = r'''
import base64, json, sys
import numpy as np
import tensorflow as tf
spec = json.load(open(sys.argv[1]))
if spec["tensorflow_text"]:
  import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
loaded = {}
for call in spec["calls"]:
  if call["export_dir"] not in loaded:
    loaded[call["export_dir"]] = tf.saved_model.load(call["export_dir"])
  fn = loaded[call["export_dir"]].signatures[call["signature"]]
  inputs = {}
  for name, value in call["inputs"].items():
    if isinstance(value, dict):  # {"b64": [...]} -> serialized protos
      inputs[name] = tf.constant([base64.b64decode(v) for v in value["b64"]])
    elif value and isinstance(np.ravel(value)[0], str):
      inputs[name] = tf.constant(value)
    else:
      inputs[name] = tf.constant(value, tf.int32)
  outputs = fn(**inputs)
  arrays = {k: v.numpy() for k, v in outputs.items()}
  # String outputs come back as object arrays; store them as bytes (npz without pickle).
  np.savez(call["output"], **{k: v.astype(bytes) if v.dtype == object else v
                              for k, v in arrays.items()})
assert "albert_tf" not in sys.modules
if not spec["tensorflow_text"]:
  assert "tensorflow_text" not in sys.modules
print("ok")
'''


def run_serving_client(tmp_dir, calls, tensorflow_text, python):
  """Runs SERVING_CLIENT on `calls` in a subprocess; returns a list of output dicts."""
  import subprocess  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  script = os.path.join(tmp_dir, "serving_client.py")
  _write(script, SERVING_CLIENT)
  for i, call in enumerate(calls):
    call["output"] = os.path.join(tmp_dir, f"out_{int(tensorflow_text)}_{i}.npz")
  spec = os.path.join(tmp_dir, f"spec_{int(tensorflow_text)}.json")
  _write(spec, json.dumps({"tensorflow_text": tensorflow_text, "calls": calls}))
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH="")
  proc = subprocess.run([python, script, spec], capture_output=True, text=True, env=env,
                        cwd=tmp_dir, timeout=300, check=False)
  assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-3000:]
  return [dict(np.load(call["output"])) for call in calls]
