"""SQuAD post-processing (n-best decoding) and the official metric on hand-computed cases."""

import json

import numpy as np
import pytest

from albert_tf.data import squad
from albert_tf.data import squad_postprocess as post

# ----------------------------------------------------------------------------- metric


def _dataset(qas):
  return [{"paragraphs": [{"context": "unused", "qas": qas}]}]


def _qa(qid, *answers):
  return {"id": qid, "question": "?", "answers": [{"text": a, "answer_start": 0} for a in answers]}


def test_v1_metric_matches_hand_computed():
  dataset = _dataset([_qa("q1", "Mount Fuji"), _qa("q2", "Mount Fuji"),
                      _qa("q3", "Paris", "the city of Paris"), _qa("q4", "blue")])
  predictions = {
      "q1": "the Mount Fuji.",   # normalises to "mount fuji": EM 1, F1 1
      "q2": "Fuji",              # P 1/1, R 1/2 -> F1 2/3, EM 0
      # q3 vs "paris": P 1/2 R 1 -> 2/3; vs "city of paris": P 1/2 R 1/3 -> 0.4; max 2/3
      "q3": "Paris France",
      # q4 missing: scores 0
  }
  scores = post.evaluate_v1(dataset, predictions)
  assert scores["exact_match"] == pytest.approx(100 * 1 / 4)
  assert scores["f1"] == pytest.approx(100 * (1 + 2 / 3 + 2 / 3 + 0) / 4)


def test_has_gold_answers():
  assert post.has_gold_answers(_dataset([_qa("a", "x"), _qa("b")]))
  assert not post.has_gold_answers(_dataset([_qa("a", "x"), {"id": "b", "question": "?"}]))


def test_v2_metric_matches_hand_computed():
  dataset = _dataset([_qa("a1", "Paris"), _qa("a2", "3,776 metres"), _qa("n1"), _qa("n2")])
  predictions = {"a1": "Paris", "a2": "3,776", "n1": "", "n2": "the moon"}
  null_odds = {"a1": -3.0, "a2": -1.0, "n1": 0.5, "n2": -2.0}
  scores = post.evaluate_v2(dataset, predictions, null_odds)
  # Raw: a1 EM1 F1 1; a2 EM0 F1 P1 R1/2 -> 2/3; n1 "" on no-answer: 1/1; n2 text on no-answer: 0/0.
  assert scores["exact"] == pytest.approx(100 * 2 / 4)
  assert scores["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1 + 0) / 4)
  assert scores["HasAns_exact"] == pytest.approx(100 * 1 / 2)
  assert scores["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
  assert scores["NoAns_exact"] == scores["NoAns_f1"] == pytest.approx(100 * 1 / 2)
  assert scores["HasAns_total"] == scores["NoAns_total"] == 2
  # Best threshold, by hand: walk questions by increasing odds from a score of #no-answer = 2.
  #   a1 (-3): +1 -> 3 (best, thresh -3); n2 (-2): text on no-answer -> -1 -> 2;
  #   a2 (-1): +0 (EM) -> 2; n1 (0.5): "" -> 0 -> 2.   best exact 3/4 at -3.
  #   F1: a1 +1 -> 3 (thresh -3); n2 -1 -> 2; a2 +2/3 -> 2.667; n1 0 -> 2.667. best 3/4 at -3.
  assert scores["final_exact"] == pytest.approx(100 * 3 / 4)
  assert scores["final_exact_thresh"] == -3.0
  assert scores["final_f1"] == pytest.approx(100 * 3 / 4)
  assert scores["final_f1_thresh"] == -3.0


def test_official_v2_flow_tunes_threshold_then_predicts_null():
  nbest = {q: [{"text": t, "probability": 1.0, "start_log_prob": 0.0, "end_log_prob": 0.0}]
           for q, t in (("a1", "Paris"), ("n1", "Rome"), ("n2", "moon"))}
  null_odds = {"a1": -2.0, "n1": 0.7, "n2": 0.3}
  dataset = _dataset([_qa("a1", "Paris"), _qa("n1"), _qa("n2")])
  predictions, metrics = post.tune_and_evaluate_v2(dataset, nbest, null_odds)
  # First pass (every text): the best F1 threshold is a1's odds, -2.0 (a1 answered, n1 and n2
  # blank). The second pass answers exactly the questions with odds <= -2.0.
  assert metrics["null_score_diff_threshold"] == -2.0
  assert predictions == {"a1": "Paris", "n1": "", "n2": ""}
  assert metrics["exact"] == metrics["f1"] == 100.0
  fixed, _ = post.tune_and_evaluate_v2(dataset, nbest, null_odds, null_score_diff_threshold=0.5)
  assert fixed == {"a1": "Paris", "n1": "", "n2": "moon"}


# ----------------------------------------------------------------------------- n-best decoding


def _feature(unique_id, example_index, doc_offset, starts, ends, max_context, seq_len=12):
  return squad.SquadFeature(
      unique_id=unique_id, example_index=example_index, doc_span_index=0,
      tok_start_to_orig_index=starts, tok_end_to_orig_index=ends,
      token_is_max_context={doc_offset + i: m for i, m in enumerate(max_context)},
      tokens=[], input_ids=[0] * seq_len, input_mask=[1] * seq_len, segment_ids=[0] * seq_len,
      p_mask=[0] * seq_len, paragraph_len=seq_len, doc_offset=doc_offset)


PARAGRAPH = "Paris is the capital of France."
# Pieces: "Paris" "is" "the" "capital" "of" "France" "." -> character spans (inclusive ends).
STARTS = [0, 6, 9, 13, 21, 24, 30]
ENDS = [4, 7, 11, 19, 22, 29, 30]


def test_v1_nbest_decodes_best_valid_span():
  example = squad.SquadExample("q", "Capital?", PARAGRAPH)
  feature = _feature(7, 0, 3, STARTS, ENDS, [True] * 7)
  start = np.full(12, -5.0)
  end = np.full(12, -5.0)
  start[0] = 9.0          # [CLS]: outside the passage, must be ignored
  start[3 + 5] = 4.0      # "France"
  end[3 + 6] = 3.5        # "."
  end[3 + 5] = 3.0        # "France"
  start[3 + 0] = 2.0      # "Paris"
  predictions, nbest = post.v1_nbest([example], [feature],
                                     {7: {"start_logits": start, "end_logits": end}},
                                     n_best_size=3, max_answer_length=30)
  assert predictions["q"] == "France."
  texts = [e["text"] for e in nbest["q"]]
  assert texts == ["France.", "France", "Paris is the capital of France."]
  assert nbest["q"][0]["start_log_prob"] == 4.0 and nbest["q"][0]["end_log_prob"] == 3.5
  probs = [e["probability"] for e in nbest["q"]]
  totals = np.array([7.5, 7.0, 5.5])
  np.testing.assert_allclose(probs, np.exp(totals) / np.exp(totals).sum())
  # max_answer_length 1 keeps only one-piece spans.
  predictions, _ = post.v1_nbest([example], [feature],
                                 {7: {"start_logits": start, "end_logits": end}},
                                 n_best_size=3, max_answer_length=1)
  assert predictions["q"] == "France"


def test_v1_nbest_uses_max_context_window_across_features():
  example = squad.SquadExample("q", "Capital?", PARAGRAPH)
  # Two windows over the same passage; "France" (piece 5) has max context only in the second.
  first = _feature(1, 0, 2, STARTS[:6], ENDS[:6], [True] * 4 + [False] * 2)
  second = _feature(2, 0, 2, STARTS[3:], ENDS[3:], [False, True, True, True])
  scores_first = {"start_logits": np.full(12, -9.0), "end_logits": np.full(12, -9.0)}
  scores_first["start_logits"][2 + 4] = 10.0   # "of": not max context here -> never a start
  scores_first["end_logits"][2 + 5] = 5.0      # France as an end is fine in any window
  scores_first["start_logits"][2 + 0] = 0.5    # Paris ... France = 5.5
  scores_second = {"start_logits": np.full(12, -9.0), "end_logits": np.full(12, -9.0)}
  scores_second["start_logits"][2 + 2] = 3.0    # France (piece 5 = index 2 of window 2)
  scores_second["end_logits"][2 + 2] = 3.0
  predictions, _ = post.v1_nbest([example], [first, second],
                                 {1: scores_first, 2: scores_second})
  assert predictions["q"] == "France"


def test_v2_nbest_and_null_odds():
  examples = [squad.SquadExample("q1", "?", PARAGRAPH), squad.SquadExample("q2", "?", PARAGRAPH)]
  features = [_feature(1, 0, 3, STARTS, ENDS, [True] * 7),
              _feature(2, 1, 3, STARTS, ENDS, [True] * 7),
              _feature(3, 1, 3, STARTS, ENDS, [True] * 7)]
  # Beam of 2 starts x 2 ends; candidate (i, j) at end index i * 2 + j.
  results = {
      1: {"start_top_index": [3 + 5, 0], "start_top_log_probs": [-0.1, -3.0],
          "end_top_index": [3 + 6, 3 + 5, 3 + 6, 3 + 0],
          "end_top_log_probs": [-0.5, -0.9, -0.2, -1.0],
          "cls_logits": -4.0},
      2: {"start_top_index": [3 + 0, 3 + 3], "start_top_log_probs": [-0.2, -0.4],
          "end_top_index": [3 + 0, 3 + 3, 3 + 3, 3 + 0],
          "end_top_log_probs": [-0.3, -0.1, -0.1, -0.1],
          "cls_logits": 2.0},
      3: {"start_top_index": [3 + 1, 3 + 1], "start_top_log_probs": [-0.3, -0.3],
          "end_top_index": [3 + 1, 3 + 1, 3 + 1, 3 + 1],
          "end_top_log_probs": [-0.3, -0.3, -0.3, -0.3],
          "cls_logits": 1.5},
  }
  nbest, null_odds = post.v2_nbest(examples, features, results, n_best_size=5,
                                   max_answer_length=30)
  # q1: (France, .) -0.6; (France, France) -1.0; [CLS] start invalid.
  assert [e["text"] for e in nbest["q1"]] == ["France.", "France"]
  # q2: (Paris,capital) -0.3 = "Paris is the capital"; (Paris,Paris) -0.5; (capital,capital) -0.5;
  #     (is,is) from feature 3 -0.6; (capital, Paris) invalid (end < start).
  assert [e["text"] for e in nbest["q2"]] == ["Paris is the capital", "Paris", "capital", "is"]
  assert null_odds == {"q1": -4.0, "q2": 1.5}  # min over the question's windows
  assert post.v2_predictions(nbest, null_odds, 0.0) == {"q1": "France.", "q2": ""}
  answered = {"q1": "France.", "q2": "Paris is the capital"}
  assert post.v2_predictions(nbest, null_odds, 1.5) == answered  # odds == threshold: answered
  assert post.v2_predictions(nbest, null_odds, None) == answered


def test_prediction_files_written_atomically(tmp_path):
  paths = post.write_prediction_files(str(tmp_path), {"q": "x"}, {"q": []}, {"q": 0.5})
  assert sorted(p.name for p in tmp_path.iterdir()) == [
      "nbest_predictions.json", "null_odds.json", "predictions.json"]
  assert json.load(open(paths["predictions"])) == {"q": "x"}
  assert json.load(open(paths["null_odds"])) == {"q": 0.5}
