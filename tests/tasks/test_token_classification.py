"""The token-classification task in-process: windows back to words, seqeval's numbers, the loss
and metric skipping unlabelled pieces, the tag list resolved and recorded."""

import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data.token_alignment import IGNORE
from albert_tf.errors import AlbertError
from albert_tf.tasks.token_classification import (TokenClassificationConfig,
                                                  TokenClassificationTask, seqeval_results)
from tests.helpers.ner import SENTENCES, write_ner_data
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_albert_config


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  root = tmp_path_factory.mktemp("ner")
  return {"spm": make_tiny_spm_model(str(root)), "data": write_ner_data(str(root / "data")),
          "root": root}


def _task(setup, tmp_path, **overrides):
  values = dict(albert_config=tiny_albert_config(), data_dir="", max_seq_length=10, doc_stride=2,
                spm_model_file=setup["spm"], train_file=f"{setup['data']}/train.txt",
                dev_file=f"{setup['data']}/dev.txt", test_file=f"{setup['data']}/test.txt",
                tag_list_file=str(tmp_path / "tag_list.json"))
  values.update(overrides)
  return TokenClassificationTask(TokenClassificationConfig(**values))


def _perfect_outputs(task, mode, wrong_words=()):
  """Per-batch outputs whose argmax is each labelled word's gold tag (and a wrong tag for the
  words of `wrong_words`: (sentence, word) pairs)."""
  features = task.features(mode)
  num_tags = len(task.label_list)
  state = None
  for start in range(0, len(features["input_ids"]), 4):
    batch = {k: v[start:start + 4] for k, v in features.items()}
    probs = np.full(batch["label_ids"].shape + (num_tags,), 0.01, np.float32)
    gold = np.maximum(batch["label_ids"], 0).copy()
    for row, (sentence, word_ids) in enumerate(zip(batch["sentence_index"], batch["word_ids"])):
      for position, word in enumerate(word_ids):
        if (int(sentence), int(word)) in wrong_words:
          gold[row, position] = (gold[row, position] + 1) % num_tags
    np.put_along_axis(probs, gold[..., None], 0.9, axis=-1)
    state = task.aggregate_outputs(state, batch, {"label_ids": batch["label_ids"]},
                                   {"probabilities": probs})
  return state


def test_every_word_back_from_its_window_and_seqeval_numbers(setup, tmp_path):
  task = _task(setup, tmp_path)
  features = task.features("eval")
  assert len(features["input_ids"]) > len(SENTENCES)  # windows: sentences longer than 8 pieces
  result, _ = task.reduce_outputs(_perfect_outputs(task, "eval"), "eval")
  assert result["eval_f1"] == 1.0 and result["eval_f1_LOC"] == 1.0
  assert result["num_sentences"] == len(SENTENCES)
  # One LOC word wrong: the numbers are seqeval's on exactly those tags.
  result, _ = task.reduce_outputs(_perfect_outputs(task, "eval", wrong_words={(0, 5)}), "eval")
  gold = [[tag for _, tag in sentence] for sentence in SENTENCES]
  predicted = [list(tags) for tags in gold]
  tags = task.label_list
  predicted[0][5] = tags[(tags.index(gold[0][5]) + 1) % len(tags)]
  from seqeval.metrics import classification_report, f1_score, precision_score, recall_score
  assert result["eval_f1"] == pytest.approx(f1_score(gold, predicted))
  assert result["eval_precision"] == pytest.approx(precision_score(gold, predicted))
  assert result["eval_recall"] == pytest.approx(recall_score(gold, predicted))
  report = classification_report(gold, predicted, output_dict=True)
  assert result["eval_f1_LOC"] == pytest.approx(report["LOC"]["f1-score"])
  assert result["eval_support_LOC"] == report["LOC"]["support"]
  assert result["eval_f1"] < 1.0


def test_bioes_is_scored_strictly():
  gold = [["B-PER", "E-PER", "O", "S-LOC"]]
  assert seqeval_results(gold, gold, "BIOES")["eval_f1"] == 1.0
  # A lone I-PER is no entity in strict IOBES (conlleval's mode would count one).
  result = seqeval_results(gold, [["B-PER", "E-PER", "O", "I-LOC"]], "BIOES")
  assert result["eval_recall_LOC"] == 0.0 and result["eval_precision"] == 1.0


def test_predictions_written_back_with_a_tag_column(setup, tmp_path):
  task = _task(setup, tmp_path)
  state = _perfect_outputs(task, "predict")
  _, outputs = task.reduce_outputs(state, "predict")
  summary = task.write_predictions(str(tmp_path), outputs)
  lines = open(summary["predictions_file"], encoding="utf-8").read().split("\n\n")
  assert len(lines) == len(SENTENCES)
  first = SENTENCES[::-1][0]
  assert lines[0].split("\n") == [f"{w} NN {t} {t}" for w, t in first]


def test_loss_and_metric_skip_unlabelled_pieces(setup, tmp_path):
  task = _task(setup, tmp_path)
  labels = tf.constant([[IGNORE, 1, IGNORE, 0], [IGNORE, IGNORE, IGNORE, IGNORE]])
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(2, 4, len(task.label_list))).astype(np.float32)
  loss, _ = task.build_losses({"label_ids": labels}, {"logits": tf.constant(logits)}, 2)
  changed = logits.copy()
  changed[:, [0, 2]] += 100.0  # only unlabelled positions change
  changed[1] += 50.0
  loss_changed, _ = task.build_losses({"label_ids": labels}, {"logits": tf.constant(changed)}, 2)
  assert float(loss) == pytest.approx(float(loss_changed))
  log_softmax = logits[0] - np.log(np.exp(logits[0]).sum(-1, keepdims=True))
  want = -(log_softmax[1, 1] + log_softmax[3, 0]) / 2 / 2  # one window's mean, global batch 2
  assert float(loss) == pytest.approx(want, rel=1e-5)
  (metric,) = task.build_metrics()
  task.update_metrics([metric], {"label_ids": labels}, {"logits": tf.constant(changed)})
  expected = np.mean([np.argmax(logits[0, 1]) == 1, np.argmax(logits[0, 3]) == 0])
  assert float(metric.result()) == pytest.approx(expected)


def test_tags_from_the_training_file_then_recorded(setup, tmp_path):
  task = _task(setup, tmp_path)
  assert task.label_list == ["O", "B-LOC", "B-PER", "I-LOC", "I-PER"]
  task.record_labels()
  assert json.loads((tmp_path / "tag_list.json").read_text()) == {
      "tag_scheme": "BIO", "labels": task.label_list}
  # A later run on that output dir (no training file) reads the recorded tags.
  again = _task(setup, tmp_path, train_file=None)
  assert again.label_list == task.label_list
  with pytest.raises(AlbertError, match=r"--labels \(O, B-LOC, I-LOC\) differ from the tags "
                                        r"recorded in .*tag_list.json"):
    _ = _task(setup, tmp_path, labels=["O", "B-LOC", "I-LOC"]).label_list
  with pytest.raises(AlbertError, match=r"records --tag_scheme=BIO .* not IO"):
    _ = _task(setup, tmp_path, tag_scheme="IO").label_list


def test_a_tag_outside_the_labels_and_a_word_longer_than_a_window(setup, tmp_path):
  task = _task(setup, tmp_path / "a", labels=["O", "B-LOC", "I-LOC"])
  with pytest.raises(AlbertError, match=r"dev.txt: line 17: tag 'B-PER' is not one of the labels"):
    task.sentences("eval")
  long_word = tmp_path / "long.txt"
  long_word.write_text("a O\nparameterslayerstransformerfactorized B-LOC\n", encoding="utf-8")
  task = _task(setup, tmp_path / "b", max_seq_length=4, train_file=str(long_word))
  with pytest.raises(AlbertError, match=r"long.txt: line 2: a word of \d+ pieces is longer than "
                                        r"a window \(--max_seq_length=4 holds 2\)"):
    task.features("train")
