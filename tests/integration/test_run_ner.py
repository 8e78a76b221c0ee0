"""run_ner.py through the real script, once: train, evaluate every checkpoint (seqeval's numbers
in eval_results.txt), predict (the test file written back with a predicted-tag column) and export
(the served entities and tags equal the predictions file's); the export is queried with
query_savedmodel's client call. The one-line errors of bad input are tested in-process
(tests/data/test_tagged_files.py, tests/tasks/test_token_classification.py,
tests/cli/test_ner_flags.py)."""

import os

import pytest
from seqeval.metrics import f1_score, precision_score, recall_score

from tests.helpers import scripts
from tests.helpers.ner import SENTENCES, write_ner_data
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import write_tiny_config


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  root = tmp_path_factory.mktemp("ner_run")
  spm = make_tiny_spm_model(str(root))
  config = write_tiny_config(str(root / "albert_config.json"))
  data = write_ner_data(str(root / "data"), repeats=4)
  proc = scripts.run_script("run_ner.py", [
      f"--data_dir={data}", "--output_dir=out", f"--albert_config_file={config}",
      f"--spm_model_file={spm}", "--do_train", "--do_eval", "--do_predict",
      "--export_dir=serving", "--max_seq_length=32", "--doc_stride=8", "--train_step=40",
      "--save_checkpoints_steps=20", "--train_batch_size=4", "--eval_batch_size=4",
      "--predict_batch_size=4", "--learning_rate=2e-3", "--seed=1"], cwd=str(root))
  assert proc.returncode == 0, scripts.describe(proc)
  return {"root": root, "out": root / "out", "proc": proc}


def _read_predictions(path):
  """[(words, gold tags, predicted tags)] of a CoNLL file with a predicted-tag column."""
  sentences = []
  for block in open(path, encoding="utf-8").read().strip().split("\n\n"):
    rows = [line.split() for line in block.split("\n")]
    sentences.append(([r[0] for r in rows], [r[-2] for r in rows], [r[-1] for r in rows]))
  return sentences


def test_eval_results_are_seqeval_numbers_of_the_predictions(run):
  blocks = scripts.eval_blocks(str(run["out"] / "eval_results.txt"))
  assert [b["global_step"] for b in blocks] == ["20", "40"]
  best = max(blocks, key=lambda b: float(b["eval_f1"]))
  for key in ("eval_precision", "eval_recall", "eval_f1_LOC", "eval_f1_PER", "eval_loss"):
    assert key in best
  predictions = _read_predictions(str(run["out"] / "test_predictions.txt"))
  assert [p[0] for p in predictions] == [[w for w, _ in s] for s in SENTENCES[::-1]]
  # dev and test hold the same sentences (in another order): the best checkpoint's dev numbers
  # are seqeval's on the test predictions it wrote.
  gold, predicted = [p[1] for p in predictions], [p[2] for p in predictions]
  assert float(best["eval_f1"]) == pytest.approx(f1_score(gold, predicted))
  assert float(best["eval_precision"]) == pytest.approx(precision_score(gold, predicted))
  assert float(best["eval_recall"]) == pytest.approx(recall_score(gold, predicted))
  assert float(best["eval_f1"]) > 0  # it learned something in 40 steps
  assert (run["out"] / "tag_list.json").exists()


def test_served_answer_equals_the_predictions_file(run):
  from albert_tf.tools import savedmodel_query  # pylint: disable=g-import-not-at-top
  predictions = _read_predictions(str(run["out"] / "test_predictions.txt"))
  texts = [" ".join(words) for words, _, _ in predictions]
  served = savedmodel_query.query(str(run["root"] / "serving"), texts, None)
  for row, (words, _, predicted) in enumerate(predictions):
    n = int(served["num_words"][row])
    assert [t.decode() for t in served["word_tag"][row][:n]] == predicted
    for kind, start, end, span, _ in savedmodel_query.entities(served, row):
      assert texts[row][start:end] == span and kind in ("LOC", "PER")
  assert os.path.exists(run["root"] / "serving" / "albert_model.tflite")


def test_from_pretrained_reads_the_output_dir_with_its_tags(run):
  from albert_tf import from_pretrained  # pylint: disable=g-import-not-at-top
  loaded = from_pretrained(str(run["out"]))
  assert loaded.model_type == "token_classifier"
  assert loaded.label_list == ["O", "B-LOC", "B-PER", "I-LOC", "I-PER"]
