"""Queries an exported classifier SavedModel with raw sentence pairs, as a client would (or an
exported token classifier with texts: its entities).

  python -m albert_tf.cli.query_savedmodel --export_dir=export \
      --text_a="The cat sat." --text_b="It was tired."
  python -m albert_tf.cli.query_savedmodel --export_dir=cola_export --text_a="The cat sat."
  python -m albert_tf.cli.query_savedmodel --export_dir=export --pair_file=glue/MRPC/dev.tsv

Loads the SavedModel with plain TensorFlow (+ tensorflow_text for the in-graph SentencePiece ops)
and calls its `serving_default` signature, which takes raw text; nothing of albert_tf is needed.
"""

import collections
import csv
import io

import tensorflow as tf
import tensorflow_text  # noqa: F401  pylint: disable=unused-import  (registers the SentencePiece ops)

from albert_tf.common import fileio
from albert_tf.errors import AlbertError, file_error_reason, file_errors
from albert_tf.export.saved_model_writer import latest_export


# How many queried rows the model got right, beside the best constant answer on the same rows.
Score = collections.namedtuple("Score", "right total majority_label majority_right")


def read_pairs(path, limit):
  """(gold label or None, text_a, text_b) from an MRPC-format file; limit 0 (or None): all.

  A labelled file (train/dev.tsv, or heldout.tsv of make_pair_task: a "Quality" header) gives
  the gold labels; test.tsv (an "index" header) gives None.
  """
  rows, labelled = [], True
  try:
    text = fileio.read_text(path)
  except file_errors() as e:
    raise AlbertError(f"{path}: cannot read pair file ({file_error_reason(e)})") from None
  # newline=None: "\r\n" and "\r" end lines as in a file opened in text mode.
  for n, row in enumerate(csv.reader(io.StringIO(text, newline=None), delimiter="\t",
                                     quoting=csv.QUOTE_NONE)):
    if len(row) != 5:
      raise AlbertError(f"{path}:{n + 1}: expected 5 tab-separated columns, got {len(row)}")
    if n == 0:
      labelled = row[0] != "index"
      continue
    rows.append((row[0] if labelled else None, row[3], row[4]))
    if len(rows) == limit:
      break
  return rows


def score(predicted, gold):
  """Score of predicted labels against gold labels (None where a row has none), or None when
  no row is labelled. The majority class is the most frequent gold label of these same rows
  (ties: the smallest label), the best any constant answer scores on them."""
  labelled = [(p, g) for p, g in zip(predicted, gold) if g is not None]
  if not labelled:
    return None
  counts = collections.Counter(g for _, g in labelled)
  majority = min(counts, key=lambda label: (-counts[label], label))
  return Score(right=sum(p == g for p, g in labelled), total=len(labelled),
               majority_label=majority, majority_right=counts[majority])


def query(export_dir, texts_a, texts_b):
  """Calls serving_default; returns its outputs as numpy arrays.

  texts_b: the second sentences (one per text_a) of a pair model; None or empty for a
    single-sentence export (CoLA, SST-2, a text-only custom task), whose signature takes text_a
    only, and for a token classifier (run_ner.py's export: its signature takes `text`).

  export_dir: a SavedModel, or a TF Serving base path (its newest version is queried).
  """
  path = latest_export(export_dir)
  if path is None:
    raise AlbertError(f"{export_dir}: no SavedModel (saved_model.pb) and no numbered version "
                      f"directory in it")
  export_dir = path
  try:
    loaded = tf.saved_model.load(export_dir)
  except (OSError, IOError) as e:
    raise AlbertError(f"{export_dir}: cannot load SavedModel ({e})") from None
  serve = loaded.signatures["serving_default"]
  takes = set(serve.structured_input_signature[1])
  if takes == {"text"}:  # a token classifier (NER): one text each, no pairs
    if any(texts_b or []):
      raise AlbertError(f"{export_dir}: a token classifier (its serving_default takes text); "
                        "drop --text_b")
    return {k: v.numpy() for k, v in serve(text=tf.constant(list(texts_a))).items()}
  if "text_a" not in takes:
    raise AlbertError(f"{export_dir}: serving_default takes {', '.join(sorted(takes))}, not "
                      f"text_a/text_b (not a sentence classifier export)")
  inputs = {"text_a": tf.constant(list(texts_a))}
  texts_b = list(texts_b) if texts_b else []
  if "text_b" in takes:
    # A pair model given one sentence: an empty text_b, as the official conversion reads it.
    inputs["text_b"] = tf.constant(texts_b or [""] * len(texts_a))
  elif any(texts_b):
    raise AlbertError(f"{export_dir}: a single-sentence classifier (its serving_default takes "
                      f"text_a only); drop --text_b")
  outputs = serve(**inputs)
  return {k: v.numpy() for k, v in outputs.items()}



def entities(outputs, row):
  """The entities of one text of a token classifier's outputs: [(type, start, end, text,
  score)], start/end characters of the text (end exclusive)."""
  count = int(outputs["num_entities"][row])
  return [(outputs["entity_type"][row][i].decode(), int(outputs["entity_start"][row][i]),
           int(outputs["entity_end"][row][i]), outputs["entity_text"][row][i].decode(),
           float(outputs["entity_score"][row][i])) for i in range(count)]
