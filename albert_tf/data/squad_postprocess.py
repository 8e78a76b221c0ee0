"""SQuAD post-processing: raw model outputs -> n-best answers, predictions and the official metric.

Follows the official ALBERT `squad_utils` (accumulate_predictions_v1/v2, write_predictions_v1/v2,
evaluate_v2) and scores with the SQuAD evaluation code shipped in tf-models-official
(`official.nlp.tools.squad_evaluate_v1_1` / `squad_evaluate_v2_0`).

Raw results are dicts keyed by feature unique_id:
  v1.1: {"start_logits": [seq_len], "end_logits": [seq_len]}
  v2.0: {"start_top_log_probs": [k], "start_top_index": [k], "end_top_log_probs": [k * k_end],
         "end_top_index": [k * k_end], "cls_logits": scalar}

Deliberate differences from the official code: (1) v1.1: a candidate whose start lies before the
passage (in the question) is dropped, as the official v2.0 code does; the official v1.1 code turned
it into an empty answer. (2) v2.0: a question whose null odds equal the tuned threshold keeps its
answer (see v2_predictions).
"""

import collections
import json
import math
import os

from absl import logging
import numpy as np
from official.nlp.tools import squad_evaluate_v1_1
from official.nlp.tools import squad_evaluate_v2_0

from albert_tf.common import fileio

# What the official code returns when no span is valid.
_EMPTY_V1 = ("empty", 0.0, 0.0)
_EMPTY_V2 = ("", -1e6, -1e6)


def _best_indexes(scores, n_best_size):
  """Indices of the n_best_size largest scores (stable for ties, like the official sort)."""
  scores = np.asarray(scores)
  return list(np.argsort(-scores, kind="stable")[:n_best_size])


def _softmax(scores):
  if not scores:
    return []
  top = max(scores)
  exps = [math.exp(s - top) for s in scores]
  total = sum(exps)
  return [e / total for e in exps]


def _valid_span(feature, start_index, end_index, max_answer_length):
  """Official filters: inside the passage window, start has max context, 0 < length <= max."""
  num_doc = len(feature.tok_start_to_orig_index)
  if start_index - feature.doc_offset < 0 or start_index - feature.doc_offset >= num_doc:
    return False
  if end_index - feature.doc_offset < 0 or end_index - feature.doc_offset >= num_doc:
    return False
  if not feature.token_is_max_context.get(start_index, False):
    return False
  if end_index < start_index:
    return False
  return end_index - start_index + 1 <= max_answer_length


def _span_text(example, feature, start_idx, end_idx):
  """Original paragraph characters covered by window pieces start_idx..end_idx (inclusive)."""
  start_char = feature.tok_start_to_orig_index[start_idx]
  end_char = feature.tok_end_to_orig_index[end_idx]
  return example.paragraph_text[start_char:end_char + 1].strip()


def _group_features(features):
  by_example = collections.defaultdict(list)
  for feature in features:
    by_example[feature.example_index].append(feature)
  return by_example


def _nbest(example, candidates, n_best_size, empty):
  """candidates: (feature, start_idx, end_idx, start_score, end_score) -> n-best json list."""
  candidates = sorted(candidates, key=lambda c: c[3] + c[4], reverse=True)
  seen = set()
  nbest = []
  for feature, start_idx, end_idx, start_score, end_score in candidates:
    if len(nbest) >= n_best_size:
      break
    text = _span_text(example, feature, start_idx, end_idx)
    if text in seen:
      continue
    seen.add(text)
    nbest.append((text, start_score, end_score))
  if not nbest:
    nbest.append(empty)
  probs = _softmax([s + e for _, s, e in nbest])
  return [collections.OrderedDict([("text", text), ("probability", prob),
                                   ("start_log_prob", float(s)), ("end_log_prob", float(e))])
          for (text, s, e), prob in zip(nbest, probs)]


def v1_nbest(examples, features, results, n_best_size=20, max_answer_length=30):
  """SQuAD v1.1 n-best lists: top n_best_size starts x ends by logit, summed.

  Returns (predictions, nbest): OrderedDicts qas_id -> best text / n-best json list.
  """
  by_example = _group_features(features)
  predictions, all_nbest = collections.OrderedDict(), collections.OrderedDict()
  for example_index, example in enumerate(examples):
    candidates = []
    for feature in by_example[example_index]:
      result = results[feature.unique_id]
      start_logits = np.asarray(result["start_logits"])
      end_logits = np.asarray(result["end_logits"])
      for start_index in _best_indexes(start_logits, n_best_size):
        for end_index in _best_indexes(end_logits, n_best_size):
          if not _valid_span(feature, start_index, end_index, max_answer_length):
            continue
          candidates.append((feature, start_index - feature.doc_offset,
                             end_index - feature.doc_offset,
                             float(start_logits[start_index]), float(end_logits[end_index])))
    nbest = _nbest(example, candidates, n_best_size, _EMPTY_V1)
    predictions[example.qas_id] = nbest[0]["text"]
    all_nbest[example.qas_id] = nbest
  return predictions, all_nbest


def v2_nbest(examples, features, results, n_best_size=20, max_answer_length=30):
  """SQuAD v2.0 n-best lists from the beam outputs, and each question's null score.

  The null score ("null odds") of a question is the smallest cls logit over its windows (a large
  value means "no answer").

  Returns (nbest, null_odds): OrderedDicts qas_id -> n-best json list / float.
  """
  by_example = _group_features(features)
  all_nbest, null_odds = collections.OrderedDict(), collections.OrderedDict()
  for example_index, example in enumerate(examples):
    candidates = []
    score_null = 1000000.0
    for feature in by_example[example_index]:
      result = results[feature.unique_id]
      score_null = min(score_null, float(np.asarray(result["cls_logits"]).reshape(())))
      start_top_index = np.asarray(result["start_top_index"])
      start_top_log_probs = np.asarray(result["start_top_log_probs"])
      end_top_index = np.asarray(result["end_top_index"])
      end_top_log_probs = np.asarray(result["end_top_log_probs"])
      start_n_top = len(start_top_index)
      end_n_top = len(end_top_index) // start_n_top
      for i in range(start_n_top):
        for j in range(end_n_top):
          start_index = int(start_top_index[i])
          end_index = int(end_top_index[i * end_n_top + j])
          if not _valid_span(feature, start_index, end_index, max_answer_length):
            continue
          candidates.append((feature, start_index - feature.doc_offset,
                             end_index - feature.doc_offset, float(start_top_log_probs[i]),
                             float(end_top_log_probs[i * end_n_top + j])))
    all_nbest[example.qas_id] = _nbest(example, candidates, n_best_size, _EMPTY_V2)
    null_odds[example.qas_id] = score_null
  return all_nbest, null_odds


def v2_predictions(nbest, null_odds, null_score_diff_threshold=None):
  """Best span per question, or "" where the null odds exceed the threshold.

  With threshold None every question gets its best span (the official first pass). A question
  whose odds equal the threshold keeps its span: that is how the metric's best threshold is
  defined (`na_prob > thresh` means "no answer"). The official write_predictions_v2 used `<`, which
  blanked the very question the tuned threshold was taken from.
  """
  predictions = collections.OrderedDict()
  for qas_id, entries in nbest.items():
    if null_score_diff_threshold is None or null_odds[qas_id] <= null_score_diff_threshold:
      predictions[qas_id] = entries[0]["text"]
    else:
      predictions[qas_id] = ""
  return predictions


# ----------------------------------------------------------------------------- evaluation


def has_gold_answers(dataset):
  """Whether every question of a SQuAD "data" list has an "answers" list (needed to score)."""
  return all(isinstance(qa.get("answers"), list)
             for article in dataset for paragraph in article["paragraphs"]
             for qa in paragraph["qas"])


def evaluate_v1(dataset, predictions):
  """Official SQuAD v1.1 metric (tf-models-official copy), in percent: exact_match, f1."""
  scores = squad_evaluate_v1_1.evaluate(dataset, predictions)
  return {"exact_match": 100.0 * scores["exact_match"], "f1": 100.0 * scores["final_f1"]}


def evaluate_v2(dataset, predictions, null_odds):
  """Official SQuAD v2.0 metric (tf-models-official copy): exact, f1, HasAns_*, NoAns_*,
  final_exact/final_f1 at the best threshold and those thresholds, all in percent.

  As the official ALBERT code does, the null odds are passed as the no-answer probabilities.
  """
  return dict(squad_evaluate_v2_0.evaluate(dataset, predictions, na_probs=null_odds))


def tune_and_evaluate_v2(dataset, nbest, null_odds, null_score_diff_threshold=None):
  """The official run_squad_v2 evaluation.

  When null_score_diff_threshold is None (official): predict every best span, let the metric find
  the null-odds threshold with the best F1, then predict "" above that threshold and score
  again. A given threshold is used as is.

  Returns (predictions, metrics); metrics include null_score_diff_threshold.
  """
  threshold = null_score_diff_threshold
  if threshold is None:
    first = evaluate_v2(dataset, v2_predictions(nbest, null_odds, None), null_odds)
    threshold = first["final_f1_thresh"]
  predictions = v2_predictions(nbest, null_odds, threshold)
  metrics = evaluate_v2(dataset, predictions, null_odds)
  metrics["null_score_diff_threshold"] = float(threshold)
  return predictions, metrics


# ----------------------------------------------------------------------------- output files


def _write_json(obj, path):
  """JSON with indent 4 and a final newline, as the official files; written atomically."""
  fileio.write_text(path, json.dumps(obj, indent=4) + "\n")
  logging.info("Wrote %s", path)


def write_prediction_files(output_dir, predictions, nbest, null_odds=None):
  """predictions.json, nbest_predictions.json and (v2) null_odds.json in output_dir."""
  fileio.makedirs(output_dir)
  paths = {"predictions": os.path.join(output_dir, "predictions.json"),
           "nbest": os.path.join(output_dir, "nbest_predictions.json")}
  _write_json(predictions, paths["predictions"])
  _write_json(nbest, paths["nbest"])
  if null_odds is not None:
    paths["null_odds"] = os.path.join(output_dir, "null_odds.json")
    _write_json(null_odds, paths["null_odds"])
  return paths
