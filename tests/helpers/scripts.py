"""Running the repo's scripts as a user would, and reading what they leave behind.

* `run_script`: `python run_classifier.py ...` in a subprocess (real flags, real exit codes).
* `serve`: calls exported SavedModels in a fresh interpreter that imports only TensorFlow
  (+ tensorflow_text for the raw-text signatures), as TF Serving would; every call's outputs or
  error is recorded separately, so one broken export does not hide the others.
* readers for eval_results.txt, submission files, TFRecords of features, TF1 checkpoints, the
  training losses of a run's TensorBoard scalars.

Nothing here imports albert_tf.
"""

import base64
import json
import os
import subprocess
import sys

import numpy as np

from tests.helpers.paths import REPO  # re-exported: tests build script paths from it


def run_script(script, args, cwd, timeout=900):
  """Runs `python <repo>/<script> <args>` in `cwd`; returns the CompletedProcess."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO)
  return subprocess.run([sys.executable, os.path.join(REPO, script)] + list(args),
                        capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout,
                        check=False)


def describe(proc):
  """The end of a failed run's stderr, for assertion messages."""
  return f"exit {proc.returncode}:\n{proc.stderr[-3000:]}"


def last_line(text):
  lines = [l for l in text.strip().splitlines() if l.strip()]
  return lines[-1] if lines else ""


# ----------------------------------------------------------------------------- results files
def eval_blocks(path):
  """eval_results.txt -> one {key: value string} dict per evaluated checkpoint.

  The official layout: per checkpoint `key = value` lines (incl. global_step), `best = ...`
  and a line of 50 "=".
  """
  with open(path, encoding="utf-8") as f:
    text = f.read()
  blocks = []
  for chunk in text.split("=" * 50):
    block = {}
    for line in chunk.splitlines():
      if " = " in line:
        key, value = line.split(" = ", 1)
        block.setdefault(key.strip(), value.strip())
    if "global_step" in block:
      blocks.append(block)
  return blocks


def read_submission(path):
  """A GLUE submission file -> (header line, [(index, prediction)])."""
  with open(path, encoding="utf-8") as f:
    lines = f.read().splitlines()
  return lines[0], [tuple(line.split("\t")) for line in lines[1:]]


def read_test_results(path):
  """test_results.tsv (one line of tab-separated probabilities per example) -> [N, C]."""
  with open(path, encoding="utf-8") as f:
    return np.array([[float(v) for v in line.split("\t")] for line in f.read().splitlines()
                     if line.strip()])


def read_feature_records(path, names=("input_ids", "input_mask", "segment_ids")):
  """A TFRecord of tf.Examples -> {name: int64 array [N, length]} (variable-length parse)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  out = {name: [] for name in names}
  for record in tf.data.TFRecordDataset(path):
    example = tf.train.Example.FromString(record.numpy())
    for name in names:
      out[name].append(list(example.features.feature[name].int64_list.value))
  return {name: np.array(values, np.int64) for name, values in out.items()}


def tf_examples_b64(features):
  """{name: [N, L] ints} -> {"b64": [...]} serialized tf.Examples with int64 features."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  n = len(next(iter(features.values())))
  encoded = []
  for i in range(n):
    feature = {name: tf.train.Feature(int64_list=tf.train.Int64List(
        value=[int(v) for v in np.ravel(values[i])])) for name, values in features.items()}
    example = tf.train.Example(features=tf.train.Features(feature=feature))
    encoded.append(base64.b64encode(example.SerializeToString()).decode())
  return {"b64": encoded}


def checkpoint_variables(prefix):
  """{name: shape} of a checkpoint (TF1 name-based or TF2 object-based alike)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return dict(tf.train.load_checkpoint(prefix).get_variable_to_shape_map())


def training_losses(output_dir):
  """The loss of each logged training step, in step order, from a run's TensorBoard scalars
  (`<output_dir>/train/events.out.tfevents.*`; --log_every_n_steps=1 logs every step)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  losses = {}
  for events in tf.io.gfile.glob(os.path.join(output_dir, "train", "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(events):
      for value in event.summary.value:
        if value.tag == "loss":
          losses[event.step] = float(tf.make_ndarray(value.tensor))
  return [losses[s] for s in sorted(losses)]


def versioned_export(export_dir):
  """`export_dir/<integer version>/` holding saved_model.pb, the layout TF Serving's
  --model_base_path reads; the highest version when there are several. Asserts it exists."""
  versions = [int(name) for name in os.listdir(export_dir)
              if name.isdigit() and os.path.exists(
                  os.path.join(export_dir, name, "saved_model.pb"))] if os.path.isdir(
                      export_dir) else []
  listing = sorted(os.listdir(export_dir)) if os.path.isdir(export_dir) else "missing"
  assert versions, (f"{export_dir} has no <version>/saved_model.pb that TF Serving could "
                    f"serve; it holds: {listing}")
  return os.path.join(export_dir, str(max(versions)))


# ----------------------------------------------------------------------------- serving
SERVING_CLIENT = r'''
import base64, json, sys, traceback
import numpy as np
import tensorflow as tf
spec = json.load(open(sys.argv[1]))
if spec["tensorflow_text"]:
  import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
loaded = {}
for call in spec["calls"]:
  try:
    if call["export_dir"] not in loaded:
      loaded[call["export_dir"]] = tf.saved_model.load(call["export_dir"])
    signatures = loaded[call["export_dir"]].signatures
    if call["signature"] not in signatures:
      raise KeyError(f"no signature {call['signature']!r}; has {sorted(signatures)}")
    fn = signatures[call["signature"]]
    inputs = {}
    for name, value in call["inputs"].items():
      if isinstance(value, dict):  # {"b64": [...]} -> serialized protos
        inputs[name] = tf.constant([base64.b64decode(v) for v in value["b64"]])
      elif value and isinstance(np.ravel(np.array(value, dtype=object))[0], str):
        inputs[name] = tf.constant(value)
      else:
        inputs[name] = tf.constant(value, tf.int32)
    outputs = {k: v.numpy() for k, v in fn(**inputs).items()}
    np.savez(call["output"], **{k: v.astype(bytes) if v.dtype == object else v
                                for k, v in outputs.items()})
  except Exception as e:  # recorded per call; the test reports it
    with open(call["output"] + ".error", "w") as f:
      f.write(f"{type(e).__name__}: {str(e)[:2000]}")
assert "albert_tf" not in sys.modules
if not spec["tensorflow_text"]:
  assert "tensorflow_text" not in sys.modules
print("ok")
'''


def serve(tmp_dir, calls, tensorflow_text=True, name="serve"):
  """Runs every call {export_dir, signature, inputs} in one fresh interpreter.

  Returns a list (same order) of {output name: array} dicts, or {"__error__": message} for a
  call that raised.
  """
  os.makedirs(tmp_dir, exist_ok=True)
  script = os.path.join(tmp_dir, "serving_client.py")
  with open(script, "w", encoding="utf-8") as f:
    f.write(SERVING_CLIENT)
  for i, call in enumerate(calls):
    call["output"] = os.path.join(tmp_dir, f"{name}_{i}.npz")
  spec = os.path.join(tmp_dir, f"{name}.json")
  with open(spec, "w", encoding="utf-8") as f:
    json.dump({"tensorflow_text": tensorflow_text, "calls": calls}, f)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH="")
  proc = subprocess.run([sys.executable, script, spec], capture_output=True, text=True,
                        env=env, cwd=tmp_dir, timeout=600, check=False)
  assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-3000:]
  results = []
  for call in calls:
    if os.path.exists(call["output"] + ".error"):
      with open(call["output"] + ".error", encoding="utf-8") as f:
        results.append({"__error__": f.read()})
    else:
      results.append(dict(np.load(call["output"])))
  return results
