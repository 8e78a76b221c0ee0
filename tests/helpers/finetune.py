"""Tiny GLUE / RACE data and a serving client for the fine-tuning and export tests."""

import json
import os
import pathlib

import numpy as np

from tests.helpers import glue_fixtures
from tests.helpers import scripts
from tests.helpers.glue_fixtures import write_file

# The first eight of the official-layout fixtures' sentences (real pieces of the tiny
# SentencePiece model): the data written here, and the tests' expectations on it, cycle through
# exactly these eight.
SENTENCES = glue_fixtures.SENTENCES[:8]


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
  write_file(os.path.join(glue_dir, "MRPC", "train.tsv"), labeled(n_train, 0))
  write_file(os.path.join(glue_dir, "MRPC", "dev.tsv"), labeled(n_dev, 3))
  test = "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n" + "".join(
      f"{i}\t{300 + i}\t{400 + i}\t{a}\t{b}\n" for i, a, b in _pairs(n_test, 5))
  write_file(os.path.join(glue_dir, "MRPC", "test.tsv"), test)
  return glue_dir


def mrpc_setup(root, n_train=8, n_dev=4, n_test=3):
  """A tiny MRPC job in `root`: {"root", "spm" (a tiny SentencePiece model), "config" (the tiny
  albert_config.json), and the data in root/glue}."""
  from tests.helpers.text import make_tiny_spm_model  # pylint: disable=g-import-not-at-top
  from tests.helpers.tiny_config import write_tiny_config  # pylint: disable=g-import-not-at-top
  spm = make_tiny_spm_model(str(root))
  write_mrpc(os.path.join(root, "glue"), n_train=n_train, n_dev=n_dev, n_test=n_test)
  return dict(root=root, spm=spm, config=write_tiny_config(os.path.join(root,
                                                                        "albert_config.json")))


def write_cola(glue_dir, n_train=8, n_dev=4, n_test=3):
  def labeled(n, offset):
    return "".join(f"src{i}\t{i % 2}\t\t{SENTENCES[(i + offset) % len(SENTENCES)]}\n"
                   for i in range(n))
  write_file(os.path.join(glue_dir, "CoLA", "train.tsv"), labeled(n_train, 0))
  write_file(os.path.join(glue_dir, "CoLA", "dev.tsv"), labeled(n_dev, 2))
  write_file(os.path.join(glue_dir, "CoLA", "test.tsv"), "index\tsentence\n" + "".join(
      f"{i}\t{SENTENCES[i % len(SENTENCES)]}\n" for i in range(n_test)))
  return glue_dir


def write_stsb(glue_dir, n_train=8, n_dev=4, n_test=3):
  header = ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
            "\tscore\n")
  def labeled(n, offset):
    return header + "".join(f"{i}\tmain\tf\t2012\t{i}\tnone\tnone\t{a}\t{b}\t{(i % 6) * 0.9:.3f}\n"
                            for i, a, b in _pairs(n, offset))
  write_file(os.path.join(glue_dir, "STS-B", "train.tsv"), labeled(n_train, 0))
  write_file(os.path.join(glue_dir, "STS-B", "dev.tsv"), labeled(n_dev, 1))
  write_file(os.path.join(glue_dir, "STS-B", "test.tsv"), header.replace("\tscore", "") + "".join(
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
        write_file(path, json.dumps(race_passage(f"{split}/{level}/{i}.txt")))
  return data_dir


def run_serving_client(tmp_dir, calls, tensorflow_text):
  """Runs `calls` through scripts.serve (a fresh interpreter that imports only TensorFlow, plus
  tensorflow_text when asked, as TF Serving would); returns a list of output dicts.

  Every call must succeed: the tests here check outputs, not the errors serve records per call.
  """
  results = scripts.serve(tmp_dir, calls, tensorflow_text, name=f"out_{int(tensorflow_text)}")
  for call, result in zip(calls, results):
    assert "__error__" not in result, f"{call['signature']}: {result['__error__']}"
  return results


def feature_records(path):
  """{input_ids, input_mask, segment_ids: int32 [N, length]}, label_ids int [N] of a record."""
  records = scripts.read_feature_records(str(path), ("input_ids", "input_mask", "segment_ids",
                                                     "label_ids"))
  labels = records.pop("label_ids")[:, 0]
  return {k: v.astype(np.int32) for k, v in records.items()}, labels


def middle_gap_boundary(margins):
  """The middle of the widest gap between the sorted middle half of `margins` (a 1-D array): a
  class boundary there splits the examples about in half, and none sits near it (where
  compiled and uncompiled rounding could answer differently)."""
  margin = np.sort(margins)
  n = len(margin)
  k = max(range(n // 4, max(n // 4 + 1, 3 * n // 4)), key=lambda i: margin[i + 1] - margin[i])
  return (margin[k] + margin[k + 1]) / 2


def disagreeing_early_exit_checkpoint(root, record_files, layers=4):
  """A 4-layer early-exit classifier (encoder and heads drawn from a seed) under which, at
  patience 1, the examples of each of `record_files` (TFRecords of MRPC features) exit at three
  or more different layers, the first example early and another of its batch of 4 at the last
  layer; saved as TF1 model.ckpt-1. Returns (config path, checkpoint prefix, the model)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.checkpoints import tf1  # pylint: disable=g-import-not-at-top
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.models.classifier import AlbertClassifier  # pylint: disable=g-import-not-at-top
  from tests.helpers.tiny_config import write_tiny_config  # pylint: disable=g-import-not-at-top
  root = pathlib.Path(root)
  config = write_tiny_config(root / f"albert_config_l{layers}.json", num_hidden_layers=layers)
  inputs = [feature_records(path)[0] for path in record_files]
  for seed in range(40):
    tf.random.set_seed(seed)
    model = AlbertClassifier(AlbertConfig.from_json_file(config), 2, early_exit="patience")
    heads = model.early_exit_classifiers.heads + [model.classifier_head]
    rng = np.random.default_rng(seed)
    for head in heads:
      head.output_weights.assign(
          5 * rng.normal(size=head.output_weights.shape).astype(np.float32))
    # Each layer's boundary in the widest middle gap of these examples' margins.
    layer_logits = np.concatenate([model(x, training=False)["layer_logits"].numpy()
                                   for x in inputs])
    for layer, head in enumerate(heads):
      boundary = middle_gap_boundary(layer_logits[:, layer, 0] - layer_logits[:, layer, 1])
      head.output_bias.assign(np.array([-boundary, 0.0], np.float32))
    model.patience = 1
    exits = [model(x, training=False)["exit_layer"].numpy() for x in inputs]
    # Wanted: a batch's first example leaving early while another of its batch (of 4) runs
    # every layer: the case compiled shrinking batches got wrong.
    if all(e[0] < layers and layers in e[:4] and len(set(e.tolist())) > 2 for e in exits):
      break
  else:
    raise AssertionError(f"no seed gives split exits on {record_files}: {exits}")
  prefix = str(root / "disagreeing" / "model.ckpt-1")
  tf1.save_tf1_checkpoint(model, prefix, global_step=1)
  return config, prefix, model
