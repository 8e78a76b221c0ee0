"""run_classifier.py on your own data (--task_name=custom), through the real script: TSV with a
header (3 inferred labels: train, eval every checkpoint, predict, export, serve), a later
--do_predict run reading JSON Lines with the recorded label order, CSV without a header
(regression), and one-line errors for malformed rows."""

import json
import os
import shutil

import numpy as np
import pytest

from tests.helpers import finetune
from tests.helpers import scripts

SENTENCES = finetune.SENTENCES
LABELS = ("neg", "neutral", "pos")  # the inferred (sorted) order; the file lists pos first


def _write(path, text):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return path


def _job_args(setup, data_dir, out, *extra):
  return [f"--data_dir={data_dir}", f"--output_dir={out}",
          f"--albert_config_file={setup['config']}", f"--spm_model_file={setup['spm']}",
          "--max_seq_length=24", "--train_step=2", "--save_checkpoints_steps=1",
          "--train_batch_size=4", "--eval_batch_size=4", "--predict_batch_size=4",
          "--learning_rate=3e-4", *extra]


def _classifier(args, cwd):
  return scripts.run_script("run_classifier.py", args, cwd=str(cwd))


def _tsv_rows(path):
  with open(path, encoding="utf-8") as f:
    return [line.split("\t") for line in f.read().splitlines()]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  return finetune.mrpc_setup(tmp_path_factory.mktemp("own_data"))


@pytest.fixture(scope="module")
def tsv_run(setup):
  """3 labels inferred from a TSV with a header; train, eval, predict and export."""
  root = setup["root"]
  labeled = lambda n, offset: "id\tsentence\tlabel\n" + "".join(
      f"s{i}\t{SENTENCES[(i + offset) % 8]}\t{LABELS[::-1][i % 3]}\n" for i in range(n))
  _write(str(root / "tsv" / "train.tsv"), labeled(9, 0))
  _write(str(root / "tsv" / "dev.tsv"), labeled(6, 3))
  _write(str(root / "tsv" / "test.tsv"), "id\tsentence\n" + "".join(
      f"t{i}\t{SENTENCES[i + 2]}\n" for i in range(4)))
  proc = _classifier(["--task_name=custom", "--text_a_column=sentence", "--id_column=id",
                      "--do_train", "--do_eval", "--do_predict", "--export_dir=serving",
                      *_job_args(setup, "tsv", "out")], root)
  assert proc.returncode == 0, scripts.describe(proc)
  return root


def test_eval_picks_the_best_checkpoint_by_accuracy(tsv_run):
  blocks = scripts.eval_blocks(str(tsv_run / "out" / "eval_results.txt"))
  assert [b["global_step"] for b in blocks] == ["1", "2"]
  for block in blocks:
    assert {"eval_accuracy", "matthew_corr", "eval_loss"} <= set(block)
    assert "f1" not in block  # F1 only for two labels
  best = json.loads((tsv_run / "out" / "best_checkpoint.json").read_text())
  assert best["metric"] == "eval_accuracy"
  assert best["value"] == max(float(b["eval_accuracy"]) for b in blocks)


def test_predictions_name_the_labels_in_the_recorded_order(tsv_run):
  out = tsv_run / "out"
  record = json.loads((out / "label_list.json").read_text())
  assert record["labels"] == list(LABELS)
  assert record["problem_type"] == "single_label_classification"
  probabilities = scripts.read_test_results(str(out / "test_results.tsv"))
  rows = _tsv_rows(str(out / "predictions.tsv"))
  assert rows[0] == ["id", "prediction", "probability"]
  assert [r[0] for r in rows[1:]] == ["t0", "t1", "t2", "t3"]
  assert [r[1] for r in rows[1:]] == [LABELS[i] for i in probabilities.argmax(-1)]
  np.testing.assert_allclose([float(r[2]) for r in rows[1:]], probabilities.max(-1), atol=1e-6)


def test_export_answers_the_label_names(tsv_run):
  export = scripts.versioned_export(str(tsv_run / "serving"))
  with open(os.path.join(export, "assets.extra", "albert_export.json"), encoding="utf-8") as f:
    info = json.load(f)
  assert info["task"] == "custom" and info["labels"] == list(LABELS)
  texts = [SENTENCES[i + 2] for i in range(4)]
  (served,) = finetune.run_serving_client(
      str(tsv_run / "client"), [dict(export_dir=export, signature="serving_default",
                                     inputs={"text_a": texts})], tensorflow_text=True)
  expected = [r[1] for r in _tsv_rows(str(tsv_run / "out" / "predictions.tsv"))[1:]]
  assert [label.decode() for label in served["label"]] == expected
  np.testing.assert_allclose(served["probabilities"], scripts.read_test_results(
      str(tsv_run / "out" / "test_results.tsv")), atol=1e-5)


def test_a_later_predict_run_uses_the_recorded_labels(tsv_run, setup):
  """Another run (JSON Lines this time) on the trained output dir: the training file there has
  a 4th label, so inferring would give another head; the recorded list is used instead."""
  root = tsv_run
  shutil.copytree(str(root / "out"), str(root / "later_out"))
  _write(str(root / "jsonl" / "train.jsonl"), "".join(
      json.dumps({"sentence": s, "label": label}) + "\n"
      for s, label in zip(SENTENCES, ["aaa", "pos", "neg", "neutral"])))
  _write(str(root / "jsonl" / "test.jsonl"), "".join(
      json.dumps({"sentence": SENTENCES[i + 2]}) + "\n" for i in range(4)))
  proc = _classifier(["--task_name=custom", "--text_a_column=sentence", "--do_predict",
                      *_job_args(setup, "jsonl", "later_out")], root)
  assert proc.returncode == 0, scripts.describe(proc)
  first = _tsv_rows(str(root / "out" / "predictions.tsv"))[1:]
  later = _tsv_rows(str(root / "later_out" / "predictions.tsv"))[1:]
  assert [r[0] for r in later] == ["0", "1", "2", "3"]  # no --id_column: numbers
  assert [r[1] for r in later] == [r[1] for r in first]
  probabilities = [scripts.read_test_results(str(root / out / "test_results.tsv"))
                   for out in ("out", "later_out")]
  np.testing.assert_allclose(probabilities[1], probabilities[0], atol=1e-6)


def test_regression_on_a_csv_without_header(setup):
  root = setup["root"]
  scored = lambda n, offset: "".join(
      f"\"{SENTENCES[(i + offset) % 8]}\",\"{SENTENCES[(i * 3 + offset) % 8]}\",{i % 5 * 1.25}\n"
      for i in range(n))
  _write(str(root / "csv" / "train.csv"), scored(8, 0))
  _write(str(root / "csv" / "dev.csv"), scored(5, 1))
  _write(str(root / "csv" / "test.csv"), "".join(f"{SENTENCES[i]},{SENTENCES[i + 1]}\n"
                                                 for i in range(3)))  # no score column
  proc = _classifier(["--task_name=scores", "--noheader", "--text_a_column=0",
                      "--text_b_column=1", "--label_column=2", "--regression", "--do_train",
                      "--do_eval", "--do_predict", *_job_args(setup, "csv", "scores_out")], root)
  assert proc.returncode == 0, scripts.describe(proc)
  out = root / "scores_out"
  blocks = scripts.eval_blocks(str(out / "eval_results.txt"))
  assert len(blocks) == 2 and all({"pearson", "spearman", "MSE"} <= set(b) for b in blocks)
  assert json.loads((out / "best_checkpoint.json").read_text())["metric"] == "pearson"
  assert json.loads((out / "label_list.json").read_text())["problem_type"] == "regression"
  assert sorted(p for p in os.listdir(out) if p.endswith(".tf_record")) == [
      "scores_eval.tf_record", "scores_predict.tf_record", "scores_train.tf_record"]
  rows = _tsv_rows(str(out / "predictions.tsv"))
  assert rows[0] == ["id", "prediction"] and len(rows) == 4
  np.testing.assert_allclose([float(r[1]) for r in rows[1:]],
                             scripts.read_test_results(str(out / "test_results.tsv"))[:, 0],
                             atol=1e-6)


def _one_line_error(proc):
  assert proc.returncode == 2, scripts.describe(proc)
  assert "Traceback" not in proc.stderr
  return scripts.last_line(proc.stderr)


def test_malformed_rows_and_unknown_labels_are_one_line_errors(setup):
  root = setup["root"]
  bad = str(root / "bad")
  _write(os.path.join(bad, "train.csv"), "text,label\nfine,pos\nno label here\nok,neg\n")
  proc = _classifier(["--task_name=custom", "--text_a_column=text", "--do_train",
                      *_job_args(setup, "bad", "bad_out")], root)
  assert _one_line_error(proc) == ("error: bad/train.csv:3: expected 2 comma-separated fields "
                                   "(as line 1), found 1")
  _write(os.path.join(bad, "train.csv"), "text,label\nfine,pos\nmeh,neutral\n")
  proc = _classifier(["--task_name=custom", "--text_a_column=text", "--labels=neg,pos",
                      "--do_train", *_job_args(setup, "bad", "bad_out")], root)
  assert _one_line_error(proc) == ("error: bad/train.csv:3: label 'neutral' is not one of the "
                                   "labels neg, pos (--labels)")
  assert not os.path.exists(root / "bad_out" / "ckpt-1.index")
  # A GLUE task name with own-data flags, and an unknown name without them.
  proc = _classifier(["--task_name=mrpc", "--text_a_column=text", "--do_train",
                      *_job_args(setup, "bad", "bad_out")], root)
  assert _one_line_error(proc) == (
      "error: --text_a_column is for your own data, but --task_name=mrpc is a GLUE task (own "
      "data: --task_name=custom, or a name of yours)")
  proc = _classifier(["--task_name=sentiment", "--do_train",
                      *_job_args(setup, "bad", "bad_out")], root)
  assert _one_line_error(proc).endswith(
      "; for your own data: --task_name=custom --text_a_column=... (see the README: Fine-tune "
      "on your own data)")


def test_from_pretrained_reads_the_recorded_labels_and_predicts_as_the_run(tsv_run, setup):
  import albert_tf  # pylint: disable=g-import-not-at-top
  pretrained = albert_tf.from_pretrained(str(tsv_run / "out" / "model.ckpt-best"),
                                         albert_config_file=setup["config"],
                                         spm_model_file=setup["spm"])
  assert pretrained.model_type == "classifier" and pretrained.label_list == list(LABELS)
  answer = pretrained.predict([SENTENCES[i + 2] for i in range(4)], max_seq_length=24)
  written = _tsv_rows(str(tsv_run / "out" / "test_results.tsv"))
  np.testing.assert_allclose(answer["probabilities"], np.array(written, np.float64), atol=1e-5)
  assert set(answer["labels"]) <= set(LABELS)
