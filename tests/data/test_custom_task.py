"""Your own data: TSV / CSV / JSON Lines readers, their file:line errors, the label list (given,
recorded, inferred) and the predictions file."""

import json
import os

import numpy as np
import pytest

from albert_tf.data import custom_task, table_files
from albert_tf.data.custom_task import Columns
from albert_tf.errors import AlbertError
from albert_tf.metrics import glue_metrics


def _write(directory, name, text):
  path = os.path.join(directory, name)
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return path


def _spec(data_dir, text_a="text", **kwargs):
  columns = Columns(text_a=text_a, text_b=kwargs.pop("text_b", None),
                    label=kwargs.pop("label", "label"), id=kwargs.pop("id", None))
  return custom_task.build_spec("custom", str(data_dir), columns, **kwargs)


def _error(fn, *args, **kwargs):
  with pytest.raises(AlbertError) as info:
    fn(*args, **kwargs)
  message = str(info.value)
  assert "\n" not in message
  return message


# ---------------------------------------------------------------------------- the three formats
def test_tsv_csv_and_jsonl_give_the_same_examples(tmp_path):
  tsv, csv, jsonl = (tmp_path / name for name in ("tsv", "csv", "jsonl"))
  for d in (tsv, csv, jsonl):
    d.mkdir()
  _write(tsv, "train.tsv", 'id\ttext\tlabel\nx1\tsays "hi", twice\tpos\nx2\tno\tneg\n')
  # No header: columns by number; a quoted field holding a comma, quotes and a line break.
  _write(csv, "train.csv", 'x1,"says ""hi"", twice",pos\nx2,no,neg\n')
  _write(jsonl, "train.jsonl", '{"id": "x1", "text": "says \\"hi\\", twice", "label": "pos"}\n'
         '{"id": "x2", "text": "no", "label": "neg"}\n\n')
  read = {
      "tsv": _spec(tsv, id="id").read_examples(str(tsv), "train"),
      "csv": _spec(csv, text_a="1", label="2", id="0", header=False).read_examples(
          str(csv), "train"),
      "jsonl": _spec(jsonl, id="id").read_examples(str(jsonl), "train"),
  }
  for examples in read.values():
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in examples] == [
        ("x1", 'says "hi", twice', None, "pos"), ("x2", "no", None, "neg")]


def test_csv_records_are_reported_at_the_line_they_start_on(tmp_path):
  _write(tmp_path, "train.csv", 'text,label\n"two\nlines",a\nok,b\n')
  table = table_files.read_table(str(tmp_path / "train.csv"), "csv")
  assert table.header == ["text", "label"]
  assert table.records == [(2, ["two\nlines", "a"]), (4, ["ok", "b"])]
  _write(tmp_path, "train.csv", 'text,label\n"two\nlines",a\nok,b\nbad,c,extra\n')
  message = _error(table_files.read_table, str(tmp_path / "train.csv"), "csv")
  assert message == (f"{tmp_path / 'train.csv'}:5: expected 2 comma-separated fields (as line 1), "
                     "found 3")


def test_pairs_ids_and_test_files_without_labels(tmp_path):
  _write(tmp_path, "train.tsv", "a\tb\tlabel\nx\ty\t1\nz\tw\t0\n")
  _write(tmp_path, "test.tsv", "a\tb\nq\tr\n")  # no label column
  spec = _spec(tmp_path, text_a="a", text_b="b")
  assert spec.text_pair and spec.labels == ("0", "1")
  (test,) = spec.read_examples(str(tmp_path), "test", process_text=str.upper)
  # Ids default to the example's number in its file; the placeholder label is the first one.
  assert (test.guid, test.text_a, test.text_b, test.label) == ("0", "Q", "R", "0")


def test_headerless_test_file_may_drop_a_trailing_label_column(tmp_path):
  _write(tmp_path, "train.csv", "x,pos\ny,neg\n")
  _write(tmp_path, "test.csv", "u\nv\n")
  spec = _spec(tmp_path, text_a="0", label="1", header=False)
  assert [e.text_a for e in spec.read_examples(str(tmp_path), "test")] == ["u", "v"]


def test_format_from_extension_or_flag(tmp_path):
  _write(tmp_path, "train.tsv", "text\tlabel\na\tx\nb\ty\n")
  _write(tmp_path, "train.jsonl", '{"text": "a", "label": "x"}\n{"text": "b", "label": "z"}\n')
  message = _error(_spec, tmp_path)
  assert message == (f"{tmp_path}: several train files ({tmp_path}/train.tsv, "
                     f"{tmp_path}/train.jsonl); say which format to read with --data_format")
  assert _spec(tmp_path, data_format="jsonl").labels == ("x", "z")
  assert _spec(tmp_path, data_format="tsv").labels == ("x", "y")
  message = _error(_spec(tmp_path, data_format="tsv").split_path, str(tmp_path), "dev")
  assert message.endswith("dev.tsv: file not found (your own data: <data_dir>/dev.tsv, .csv, "
                          ".jsonl or .json)")


def test_clue_json_files_are_json_lines(tmp_path):
  """CLUE's AFQMC / TNEWS layout: train.json, dev.json, test.json, one object per line."""
  _write(tmp_path, "train.json", '{"sentence1": "我们", "sentence2": "好", "label": "1"}\n'
         '{"sentence1": "电影", "sentence2": "不", "label": "0"}\n')
  _write(tmp_path, "test.json", '{"id": 0, "sentence1": "中国", "sentence2": "人"}\n')
  spec = _spec(tmp_path, text_a="sentence1", text_b="sentence2", id="id")
  assert spec.labels == ("0", "1")
  (test,) = spec.read_examples(str(tmp_path), "test")
  assert (test.guid, test.text_a, test.text_b) == ("0", "中国", "人")
  # Ids name predictions: a training file without the id field numbers its examples.
  assert [e.guid for e in spec.read_examples(str(tmp_path), "train")] == ["0", "1"]
  assert table_files.format_of("dev.JSON") == "jsonl"
  _write(tmp_path, "train.jsonl", '{"sentence1": "a", "sentence2": "b", "label": "1"}\n')
  assert "several train files" in _error(_spec, tmp_path, text_a="sentence1")


# ---------------------------------------------------------------------------- malformed rows
@pytest.mark.parametrize("name, text, spec_kwargs, expected", [
    ("train.tsv", "text\tlabel\na\tx\nb\n", {},
     "train.tsv:3: expected 2 tab-separated fields (as line 1), found 1"),
    ("train.tsv", "text\tlabel\na\tx\n\nb\ty\n", {},
     "train.tsv:3: empty line (expected 2 tab-separated fields)"),
    ("train.tsv", "sentence\tlabel\na\tx\n", {"labels": ["x", "y"]},
     "train.tsv:1: no column 'text' in the header (--text_a_column; the columns are "
     "'sentence', 'label')"),
    ("train.csv", "a,x\n", {"header": False, "labels": ["x", "y"]},
     "--text_a_column='text': {dir}/train.csv has no header line, so its columns are numbers "
     "from 0 (it has 2)"),
    ("train.csv", "a,x\n", {"header": False, "text_a": "0", "label": "2"},
     "train.csv:1: --label_column=2 but the file has 2 comma-separated fields (columns 0..1)"),
    ("train.csv", 'text,label\n"open,x\n', {}, "train.csv:2: not valid CSV"),
    ("train.jsonl", '{"text": "a", "label": "x"}\n{"text": "b", "label": "y"\n', {},
     "train.jsonl:2: not JSON (column 27: Expecting ',' delimiter)"),
    ("train.jsonl", '{"text": "a", "label": "x"}\n["b", "y"]\n', {},
     "train.jsonl:2: found a list, expected a JSON object"),
    ("train.jsonl", '{"text": "a", "label": "x"}\n{"label": "y"}\n', {},
     "train.jsonl:2: no field 'text' (--text_a_column; the record has 'label')"),
    ("train.jsonl", '{"text": "a", "label": "x"}\n{"text": 3, "label": "y"}\n', {},
     "train.jsonl:2: --text_a_column value 3 is not text (expected a string)"),
    ("train.jsonl", '{"text": "a", "label": "x"}\n{"text": "b", "label": null}\n', {},
     "train.jsonl:2: label null is not a label name"),
    ("train.tsv", "text\tlabel\na\tx\nb\tz\n", {"labels": ["x", "y"]},
     "train.tsv:3: label 'z' is not one of the labels x, y (--labels)"),
    ("train.csv", "text,label\na,1.5\nb,high\n", {"regression": True},
     "train.csv:3: label 'high' is not a number (a regression task)"),
    ("train.jsonl", '{"text": "a", "label": "nan"}\n', {"regression": True},
     "train.jsonl:1: label 'nan' is not a finite number (a regression task)"),
])
def test_every_malformed_record_is_one_line_naming_file_and_line(tmp_path, name, text,
                                                                 spec_kwargs, expected):
  _write(tmp_path, name, text)
  def read():
    spec = _spec(tmp_path, **spec_kwargs)
    return spec.read_examples(str(tmp_path), "train")
  message = _error(read)
  expected = expected.format(dir=tmp_path)
  assert message.startswith(expected if expected.startswith("--") else f"{tmp_path}/{expected}")


def test_ids_must_fit_the_predictions_file(tmp_path):
  _write(tmp_path, "train.jsonl", '{"id": "a\\tb", "text": "t", "label": "x"}\n'
         '{"id": 7, "text": "u", "label": "y"}\n')
  message = _error(_spec(tmp_path, id="id").read_examples, str(tmp_path), "train")
  assert message.startswith(f"{tmp_path}/train.jsonl:1: id 'a\\tb' holds a tab")


# ---------------------------------------------------------------------------- the label list
def test_inferred_label_order_is_stable(tmp_path):
  assert custom_task.stable_label_order({"10", "-1", "2", "0"}) == ["-1", "0", "2", "10"]
  assert custom_task.stable_label_order({"pos", "neg", "Neutral", "10"}) == [
      "10", "Neutral", "neg", "pos"]
  # The file's order does not matter, JSON integers are label names.
  _write(tmp_path, "train.jsonl", "".join(json.dumps({"text": "t", "label": label}) + "\n"
                                          for label in (2, 10, 0, 2)))
  assert _spec(tmp_path).labels == ("0", "2", "10")


def test_inference_refuses_scores_and_single_labels(tmp_path):
  _write(tmp_path, "train.csv", "text,label\na,0.5\nb,1\nc,4.25\n")
  message = _error(_spec, tmp_path)
  assert message == (f"{tmp_path}/train.csv: the labels are numbers with decimals (0.5, 4.25); "
                     "give --regression to predict them, or --labels to classify")
  _write(tmp_path, "train.csv", "text,label\na,yes\nb,yes\n")
  assert "the training labels are only yes; classification needs at least 2" in _error(
      _spec, tmp_path)
  assert _spec(tmp_path, labels=["no", "yes"]).labels == ("no", "yes")  # named: fine


def test_label_list_is_recorded_and_wins_over_inference(tmp_path):
  _write(tmp_path, "train.tsv", "text\tlabel\na\tpos\nb\tneg\n")
  record = str(tmp_path / "out_label_list.json")
  spec = _spec(tmp_path, label_list_file=record)
  assert spec.labels == ("neg", "pos") and spec.labels_from.startswith("inferred from ")
  spec.record_labels()
  assert json.loads(open(record).read())["labels"] == ["neg", "pos"]
  # A later run: the training file now has another label; the recorded order stays, and the
  # new label is an error naming the record.
  _write(tmp_path, "train.tsv", "text\tlabel\na\tpos\nb\taaa\n")
  later = _spec(tmp_path, label_list_file=record)
  assert later.labels == ("neg", "pos") and later.labels_from == f"recorded in {record}"
  message = _error(later.read_examples, str(tmp_path), "train")
  assert message == (f"{tmp_path}/train.tsv:3: label 'aaa' is not one of the labels neg, pos "
                     f"(recorded in {record})")
  # Given labels must agree with the record (same order), as must the task type.
  assert _spec(tmp_path, labels=["neg", "pos"], label_list_file=record).labels == ("neg", "pos")
  message = _error(_spec, tmp_path, labels=["pos", "neg"], label_list_file=record)
  assert message == (f"--labels asks for labels pos, neg, but {record} records labels neg, pos "
                     "for the model trained there; drop --labels or use a new --output_dir")
  assert "--regression asks for regression, but" in _error(
      _spec, tmp_path, regression=True, label_list_file=record)
  # Recording another list over it (a concurrent run) is refused too.
  other = _spec(tmp_path, labels=["a", "b"])
  other = custom_task.CustomTaskSpec(**{**other.__dict__, "label_list_file": record})
  assert "records another label list" in _error(other.record_labels)


def test_bad_label_lists_and_options(tmp_path):
  _write(tmp_path, "train.tsv", "text\tlabel\na\tx\n")
  assert "--labels: 1 label(s)" in _error(_spec, tmp_path, labels=["x"])
  assert "label 'x' is listed twice" in _error(_spec, tmp_path, labels=["x", "y", "x"])
  assert "it takes no --labels" in _error(_spec, tmp_path, labels=["x", "y"], regression=True)
  assert "--text_a_column and --label_column both name column 'label'" in _error(
      _spec, tmp_path, text_a="label", labels=["x", "y"])
  assert "--text_a_column is required" in _error(_spec, tmp_path, text_a=None)
  assert "--noheader is for TSV/CSV" in _error(_spec, tmp_path, data_format="jsonl",
                                               header=False)
  message = _error(_spec, tmp_path / "elsewhere", label_list_file="out/label_list.json")
  missing = tmp_path / "elsewhere"
  assert message == ("no label list: no --labels, no out/label_list.json of a training run, and "
                     f"no {missing}/train.tsv, {missing}/train.csv, {missing}/train.jsonl or "
                     f"{missing}/train.json to infer them from")
  record = _write(tmp_path, "label_list.json", '{"labels": "x"}')
  assert _error(_spec, tmp_path, label_list_file=record).startswith(
      f"{record}: not a label list")


def test_multi_label_is_read_though_not_trained(tmp_path):
  _write(tmp_path, "train.jsonl", '{"text": "a", "label": ["sport", "news"]}\n'
         '{"text": "b", "label": []}\n{"text": "c", "label": ["art"]}\n')
  _write(tmp_path, "dev.tsv", "text\tlabel\nd\tart|news\ne\t\n")
  spec = _spec(tmp_path, multi_label=True, data_format="auto")
  assert spec.labels == ("art", "news", "sport") and spec.multi_label and spec.num_labels == 3
  assert [e.label for e in spec.read_examples(str(tmp_path), "train")] == [
      ("sport", "news"), (), ("art",)]
  assert [e.label for e in spec.read_examples(str(tmp_path), "dev")] == [("art", "news"), ()]


# ---------------------------------------------------------------------------- metrics, outputs
def test_metrics_follow_the_label_type(tmp_path):
  _write(tmp_path, "train.tsv", "text\tlabel\na\tx\nb\ty\nc\tz\n")
  three = _spec(tmp_path)
  assert three.best_metric == "eval_accuracy"
  result = three.metrics([0, 1, 2, 2], [0, 2, 2, 2])
  assert set(result) == {"eval_accuracy", "matthew_corr"} and result["eval_accuracy"] == 0.75
  assert set(_spec(tmp_path, labels=["x", "y"]).metrics([0, 1], [0, 1])) == {
      "eval_accuracy", "matthew_corr", "f1"}
  regression = _spec(tmp_path, regression=True, labels=None)
  assert regression.best_metric == "pearson" and regression.num_labels == 1
  assert set(regression.metrics([0.0, 1.0, 2.0], [0.1, 0.9, 2.5])) == {"pearson", "spearman",
                                                                        "MSE"}


def test_multiclass_matthews_against_the_covariance_definition():
  rng = np.random.default_rng(1)
  labels, predictions = rng.integers(0, 4, 200), rng.integers(0, 4, 200)
  predictions[:120] = labels[:120]  # correlated
  one_hot = lambda v: np.eye(4)[v]
  x, y = one_hot(labels), one_hot(predictions)
  cov = lambda a, b: np.sum((a - a.mean(0)) * (b - b.mean(0)))
  expected = cov(x, y) / np.sqrt(cov(x, x) * cov(y, y))
  assert glue_metrics.matthews_corrcoef(labels, predictions) == pytest.approx(expected)
  assert glue_metrics.matthews_corrcoef([2, 2], [2, 2]) == 0.0  # degenerate marginals


def test_predictions_file_names_the_labels(tmp_path):
  _write(tmp_path, "train.tsv", "text\tlabel\na\tx\nb\ty\nc\tz\n")
  spec = _spec(tmp_path)
  examples = spec.read_examples(str(tmp_path), "train")
  spec.write_predictions(str(tmp_path), examples, np.array(
      [[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.3, 0.4, 0.3]]), np.array([0, 2, 1]))
  assert (tmp_path / "predictions.tsv").read_text() == (
      "id\tprediction\tprobability\n0\tx\t0.700000\n1\tz\t0.800000\n2\ty\t0.400000\n")
  regression = _spec(tmp_path, regression=True)
  regression.write_predictions(str(tmp_path), examples[:1], np.array([[7.5]]), np.array([7.5]))
  assert (tmp_path / "predictions.tsv").read_text() == "id\tprediction\n0\t7.500000\n"
