"""Fine-tuning on your own data: the task spec run_classifier.py builds from its flags instead of
a GLUE task name, the examples of the user's files, the label list and the predictions file.

Files: `<data_dir>/train.<ext>`, `dev.<ext>` and `test.<ext>` (the splits a run needs), where
<ext> is tsv, csv or jsonl (see `table_files` for the formats); the extension says the format
unless the spec names one. Columns are header names / JSON keys, or numbers from 0 in files
without a header. Test files need no label column (one there is ignored); without a header, a
test file keeps the training files' column numbers (a trailing label column may be left out).

The label list fixes which output of the classifier head is which label, so it must be the
same in every run that uses the head:
  * given (`labels`): used in that order;
  * else recorded by an earlier training run in `label_list_file` (<output_dir>/label_list.json):
    used as recorded, so eval / predict / export of later runs see the head as it was trained;
  * else inferred from the training file: its distinct labels, ordered by value when all are
    integers (-1, 0, 2, 10), else by Unicode code points ("neg" < "neutral" < "pos").
Training records the list (`CustomTaskSpec.record_labels`); a run whose given list or task type
disagrees with the recorded one is refused (its head would be read with other label names).

Regression takes a number per example; multi-label classification (a JSON list per example,
or labels joined by "|" in TSV/CSV) is read and recorded here, though the task does not train
it yet.
"""

import dataclasses
import json
import math
import os
import re
from typing import ClassVar, Optional, Tuple

from albert_tf.common import fileio, output_layout
from albert_tf.data import table_files
from albert_tf.data.glue import InputExample
from albert_tf.errors import AlbertError
from albert_tf.metrics import glue_metrics
# The problem types and the label_list.json reader live with the GLUE label lists (a leaf, so
# that the top-level loader reads a run's recorded labels without the data layer).
from albert_tf.common.task_labels import (  # pylint: disable=unused-import
    MULTI_LABEL, PROBLEM_TYPES, REGRESSION, SINGLE_LABEL, read_label_list)

CUSTOM_TASK = "custom"
LABEL_LIST_FILE = output_layout.LABEL_LIST
PREDICTIONS_FILE = output_layout.PREDICTIONS
# The task types, by the names of the HF config's `problem_type`.
MULTI_LABEL_SEPARATOR = "|"  # between the labels of one TSV/CSV field (multi-label)

_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]*")
_INTEGER = re.compile(r"[+-]?[0-9]+")


@dataclasses.dataclass(frozen=True)
class Columns:
  """Which column holds what: header names / JSON keys, or numbers from 0 (no header).

  text_b and id are optional (None); the label column is not read from test files.
  """
  text_a: str
  text_b: Optional[str] = None
  label: str = "label"
  id: Optional[str] = None

  FLAGS: ClassVar[dict] = {"text_a": "--text_a_column", "text_b": "--text_b_column",
                           "label": "--label_column", "id": "--id_column"}


@dataclasses.dataclass(frozen=True)
class CustomTaskSpec:
  """A classification or regression task on the user's files; what ClassificationTask asks of
  a task spec (as `glue.GlueTaskSpec`).

  name: names the cached features (<name>_train.tf_record) and the export's task.
  labels: the label names in head order (empty for regression).
  data_format: "auto" (each file's extension) or one of table_files.FORMATS.
  header: whether TSV/CSV files start with a header line.
  labels_from: where `labels` came from (for messages).
  label_list_file: where training records the label list (None: not recorded).
  """
  name: str
  columns: Columns
  labels: Tuple[str, ...] = ()
  problem_type: str = SINGLE_LABEL
  data_format: str = "auto"
  header: bool = True
  labels_from: str = "--labels"
  label_list_file: Optional[str] = None

  kind: ClassVar[str] = CUSTOM_TASK
  submission_file: ClassVar[str] = PREDICTIONS_FILE

  @property
  def is_regression(self):
    return self.problem_type == REGRESSION

  @property
  def multi_label(self):
    return self.problem_type == MULTI_LABEL

  @property
  def num_labels(self):
    return 1 if self.is_regression else len(self.labels)

  @property
  def text_pair(self):
    return self.columns.text_b is not None

  @property
  def best_metric(self):
    return "pearson" if self.is_regression else "eval_accuracy"

  def split_candidates(self, data_dir, split):
    """The paths the file of `split` ("train", "dev", "test") may have under data_dir."""
    formats = table_files.FORMATS if self.data_format == "auto" else (self.data_format,)
    return [os.path.join(data_dir, f"{split}.{ext}") for fmt in formats
            for ext in table_files.EXTENSIONS[fmt]]

  def split_path(self, data_dir, split):
    """The file of `split` under data_dir; AlbertError if there is none, or several."""
    candidates = self.split_candidates(data_dir, split)
    found = [path for path in candidates if fileio.exists(path)]
    if len(found) > 1:
      raise AlbertError(f"{data_dir}: several {split} files ({', '.join(found)}); say which "
                        "format to read with --data_format")
    if not found:
      raise AlbertError(f"{table_files.names(candidates)}: file not found (your own data: "
                        f"<data_dir>/{split}.tsv, .csv, .jsonl or .json)")
    return found[0]

  def read_table(self, data_dir, split):
    path = self.split_path(data_dir, split)
    return table_files.read_table(path, table_files.format_of(path), self.header)

  def read_examples(self, data_dir, split, process_text=None):
    """The examples of one split (InputExample: labels are names, tuples of names for
    multi-label, floats for regression; test examples get the first label as placeholder).
    Raises AlbertError naming file:line for every malformed record."""
    return _examples(self, self.read_table(data_dir, split), split, process_text or (lambda s: s))

  def cache_settings(self, data_dir, split):
    """What the cached features of `split` depend on."""
    path = self.split_path(data_dir, split)
    return {"task": self.name, "data_file": fileio.file_fingerprint(path),
            "data_format": table_files.format_of(path), "header": self.header,
            "columns": dataclasses.asdict(self.columns), "problem_type": self.problem_type,
            "labels": list(self.labels)}

  def metrics(self, labels, predictions):
    """Accuracy, Matthews correlation (and F1 of the second label for two labels); Pearson,
    Spearman and MSE for regression."""
    if self.is_regression:
      return glue_metrics.regression_metrics(labels, predictions)
    return glue_metrics.classification_metrics(labels, predictions, self.num_labels)

  def write_predictions(self, output_dir, examples, probabilities, predictions,
                        exit_layers=None):
    """predictions.tsv: `id  prediction  probability` (the label name and its probability), or
    `id  prediction` (the score) for regression; one line per test example. With early exit's
    exit_layers [N], a last column `exit_layer` (the 1-based layer of each answer)."""
    path = os.path.join(output_dir, PREDICTIONS_FILE)
    if len(examples) != len(predictions):
      raise AlbertError(f"{path}: {len(predictions)} predictions for {len(examples)} examples")
    if self.is_regression:
      lines = ["id\tprediction"] + [f"{example.guid}\t{float(score):.6f}"
                                    for example, score in zip(examples, predictions)]
    else:
      lines = ["id\tprediction\tprobability"] + [
          f"{example.guid}\t{self.labels[int(index)]}\t{float(row[int(index)]):.6f}"
          for example, row, index in zip(examples, probabilities, predictions)]
    if exit_layers is not None:
      lines = [f"{lines[0]}\texit_layer"] + [f"{line}\t{int(layer)}"
                                              for line, layer in zip(lines[1:], exit_layers)]
    fileio.write_text(path, "\n".join(lines) + "\n")
    return {"predictions_file": path}

  def record_labels(self):
    """Writes label_list_file (training: the head is bound to this order); AlbertError if it
    already records another list."""
    path = self.label_list_file
    if not path:
      return
    if fileio.exists(path):
      if read_label_list(path) != (self.problem_type, self.labels):
        raise AlbertError(f"{path} records another label list than this run's ({self.labels_from}"
                          f": {_describe(self.problem_type, self.labels)}); use a new --output_dir")
      return
    fileio.write_json(path, {"task": self.name, "problem_type": self.problem_type,
                             "labels": list(self.labels), "labels_from": self.labels_from},
                      indent=2)


# ------------------------------------------------------------------ examples
def _examples(spec, table, split, process_text):
  keys = {field: table.column(ref, Columns.FLAGS[field])
          for field, ref in dataclasses.asdict(spec.columns).items()
          if ref is not None and not (field == "label" and split == "test")
          and not (field == "id" and split != "test" and not _has_ids(table, ref))}
  return [_example(spec, table, keys, index, line, record, process_text)
          for index, (line, record) in enumerate(table.records)]


def _has_ids(table, ref):
  """Whether a training or dev file has the --id_column: ids name predictions, so only test
  files must have them (CLUE's train.json and dev.json have no id field, its test.json has)."""
  if table.data_format == "jsonl":
    return all(ref in record for _, record in table.records)
  try:
    table.column(ref, Columns.FLAGS["id"])
  except AlbertError:
    return False
  return True


def _example(spec, table, keys, index, line, record, process_text):
  """The record on `line` (the `index`th of its file) as an InputExample."""
  where = f"{table.path}:{line}"
  values = {field: table.field(line, record, key, Columns.FLAGS[field])
            for field, key in keys.items()}
  return InputExample(
      guid=_id(values["id"], where) if "id" in values else str(index),
      text_a=process_text(_text(values["text_a"], where, "text_a")),
      text_b=process_text(_text(values["text_b"], where, "text_b")) if "text_b" in values
      else None,
      label=parse_label(spec, values["label"], where) if "label" in values else
      _placeholder(spec))


def _text(value, where, field):
  if not isinstance(value, str):
    raise AlbertError(f"{where}: {Columns.FLAGS[field]} value {json.dumps(value)} is not text "
                      "(expected a string)")
  return value


def _id(value, where):
  if isinstance(value, bool) or not isinstance(value, (str, int)):
    raise AlbertError(f"{where}: --id_column value {json.dumps(value)} is not a string or an "
                      "integer")
  value = str(value).strip()
  if any(c in value for c in "\t\r\n"):
    raise AlbertError(f"{where}: id {value!r} holds a tab or a line break (the predictions file "
                      "is tab-separated)")
  return value


def _placeholder(spec):
  """The label of a test example (never used: the converted record needs one)."""
  if spec.is_regression:
    return 0.0
  return () if spec.multi_label else spec.labels[0]


# ------------------------------------------------------------------ labels
def _label_name(value, where):
  """A classification label as text: strings stripped, JSON integers as their digits."""
  if isinstance(value, str):
    name = value.strip()
  elif isinstance(value, int) and not isinstance(value, bool):
    name = str(value)
  else:
    raise AlbertError(f"{where}: label {json.dumps(value)} is not a label name (a string or an "
                      "integer; for numbers to predict give --regression)")
  if not name:
    raise AlbertError(f"{where}: empty label")
  return name


def _label_names(value, where, multi_label):
  """The label names of one example's label field (several for multi-label)."""
  if not multi_label:
    return [_label_name(value, where)]
  if isinstance(value, str):
    parts = value.split(MULTI_LABEL_SEPARATOR) if value.strip() else []
  elif isinstance(value, list):
    parts = value
  else:
    raise AlbertError(f"{where}: multi-label value {json.dumps(value)} is not a list of labels "
                      f"(a JSON list, or labels joined by {MULTI_LABEL_SEPARATOR!r})")
  return [_label_name(part, where) for part in parts]


def _score(value, where):
  if isinstance(value, bool) or not isinstance(value, (int, float, str)):
    raise AlbertError(f"{where}: label {json.dumps(value)} is not a number (a regression task)")
  try:
    score = float(value)
  except ValueError:
    raise AlbertError(f"{where}: label {value!r} is not a number (a regression task)") from None
  if not math.isfinite(score):
    raise AlbertError(f"{where}: label {value!r} is not a finite number (a regression task)")
  return score


def parse_label(spec, value, where):
  """The label of one example: a name from spec.labels, a tuple of them (multi-label) or a
  float (regression). `where`: "file:line" for the AlbertError of a malformed label."""
  if spec.is_regression:
    return _score(value, where)
  names = _label_names(value, where, spec.multi_label)
  for name in names:
    if name not in spec.labels:
      raise AlbertError(f"{where}: label {name!r} is not one of the labels "
                        f"{', '.join(spec.labels)} ({spec.labels_from})")
  return tuple(names) if spec.multi_label else names[0]


def stable_label_order(names):
  """Integers by value (ties by text), anything else by Unicode code points."""
  if all(_INTEGER.fullmatch(name) for name in names):
    return sorted(names, key=lambda name: (int(name), name))
  return sorted(names)


def _is_decimal(name):
  try:
    return not _INTEGER.fullmatch(name) and math.isfinite(float(name))
  except ValueError:
    return False


def infer_labels(table, column, multi_label=False):
  """The distinct labels of `table`'s `column`, in `stable_label_order`.

  AlbertError when a label is malformed (file:line), when there are fewer than two, or when
  they are all numbers and some have decimals (a regression target read as classes).
  """
  key = table.column(column, Columns.FLAGS["label"])
  names = set()
  for line, record in table.records:
    where = f"{table.path}:{line}"
    names.update(_label_names(table.field(line, record, key, Columns.FLAGS["label"]), where,
                              multi_label))
  ordered = stable_label_order(names)
  decimals = [name for name in ordered if _is_decimal(name)]
  if decimals and all(_is_decimal(name) or _INTEGER.fullmatch(name) for name in ordered):
    raise AlbertError(f"{table.path}: the labels are numbers with decimals ("
                      f"{', '.join(decimals[:3])}{', ...' if len(decimals) > 3 else ''}); give "
                      "--regression to predict them, or --labels to classify")
  if len(ordered) < 2:
    raise AlbertError(f"{table.path}: the training labels are only {', '.join(ordered)}; "
                      "classification needs at least 2 (name them all with --labels)")
  return _checked_label_list(ordered, f"{table.path}: inferred labels", multi_label)


def _checked_label_list(labels, source, multi_label):
  """`labels` as a tuple, if they can name a head's outputs (and be written to a TSV file)."""
  labels = tuple(labels)
  if len(labels) < 2:
    raise AlbertError(f"{source}: {len(labels)} label(s); classification needs at least 2")
  forbidden = "\t\r\n" + (MULTI_LABEL_SEPARATOR if multi_label else "")
  for name in labels:
    if not name.strip() or name != name.strip() or any(c in name for c in forbidden):
      raise AlbertError(f"{source}: label {name!r} is empty, starts or ends with a space, or "
                        f"holds one of {forbidden!r}")
  if len(set(labels)) != len(labels):
    raise AlbertError(f"{source}: label {next(n for n in labels if labels.count(n) > 1)!r} is "
                      "listed twice")
  return labels


def _describe(problem_type, labels):
  return "regression" if problem_type == REGRESSION else f"labels {', '.join(labels)}"


# ------------------------------------------------------------------ the spec from options
def _resolve_labels(spec, data_dir, labels, asked_type):
  """(problem_type, labels, labels_from): given > recorded > inferred (see the module doc).

  asked_type: REGRESSION / MULTI_LABEL when asked for, else None (classification unless a
  recorded list says otherwise).
  """
  path = spec.label_list_file
  recorded = read_label_list(path) if path and fileio.exists(path) else None
  if labels:
    problem_type = asked_type or SINGLE_LABEL
    wanted = (problem_type, _checked_label_list(labels, "--labels", problem_type == MULTI_LABEL))
    source = "--labels"
  elif asked_type == REGRESSION:
    wanted, source = (REGRESSION, ()), "--regression"
  elif recorded is None:
    candidates = spec.split_candidates(data_dir, "train")
    if not any(fileio.exists(candidate) for candidate in candidates):
      raise AlbertError(f"no label list: no --labels, no {path or LABEL_LIST_FILE} of a training "
                        f"run, and no {table_files.names(candidates)} to infer them from")
    table = spec.read_table(data_dir, "train")
    problem_type = asked_type or SINGLE_LABEL
    return (problem_type, infer_labels(table, spec.columns.label, problem_type == MULTI_LABEL),
            f"inferred from {table.path}")
  elif asked_type in (None, recorded[0]):
    return recorded + (f"recorded in {path}",)
  else:
    raise AlbertError(f"a {asked_type} task, but {path} records {_describe(*recorded)} for the "
                      "model trained there; use a new --output_dir")
  if recorded is not None and recorded != wanted:
    raise AlbertError(f"{source} asks for {_describe(*wanted)}, but {path} records "
                      f"{_describe(*recorded)} for the model trained there; drop {source} or "
                      "use a new --output_dir")
  return wanted + (source,)


def _check_columns(columns):
  if not columns.text_a:
    raise AlbertError("--text_a_column is required for your own data (the column of the text "
                      "to classify)")
  used = [(Columns.FLAGS[field], ref) for field, ref in dataclasses.asdict(columns).items()
          if ref is not None]
  for i, (flag, ref) in enumerate(used):
    for other_flag, other_ref in used[i + 1:]:
      if ref == other_ref:
        raise AlbertError(f"{flag} and {other_flag} both name column {ref!r}")


def build_spec(name, data_dir, columns, labels=None, regression=False, multi_label=False,
               data_format="auto", header=True, label_list_file=None):
  """The CustomTaskSpec of a task on the user's files in data_dir.

  Args:
    name: the task's name (lower-cased; letters, digits, "_", ".", "-").
    columns: Columns.
    labels: the label names in head order, or None (recorded, else inferred: module doc).
    regression / multi_label: the task type (default single-label classification).
    data_format: "auto" (from each file's extension), "tsv", "csv" or "jsonl".
    header: TSV/CSV files start with a header line.
    label_list_file: where training records the label list, and where an earlier run's is read.
  Raises:
    AlbertError: contradicting options, a bad label list, or (when the labels are inferred) a
      missing or malformed training file.
  """
  name = (name or "").strip().lower()
  if not _NAME.fullmatch(name):
    raise AlbertError(f"--task_name={name!r}: a name of your own data names its files "
                      "(<name>_train.tf_record): use letters, digits, '_', '.' and '-'")
  if data_format not in ("auto",) + table_files.FORMATS:
    raise AlbertError(f"--data_format={data_format!r}: expected auto, "
                      f"{table_files.names(table_files.FORMATS)}")
  if regression and (labels or multi_label):
    raise AlbertError("--regression predicts a number: it takes no --labels (nor multi-label)")
  if data_format == "jsonl" and not header:
    raise AlbertError("--noheader is for TSV/CSV files; JSON Lines records name their fields")
  _check_columns(columns)
  spec = CustomTaskSpec(name=name, columns=columns, data_format=data_format, header=header,
                        label_list_file=label_list_file)
  asked_type = REGRESSION if regression else MULTI_LABEL if multi_label else None
  problem_type, labels, labels_from = _resolve_labels(spec, data_dir, labels, asked_type)
  return dataclasses.replace(spec, problem_type=problem_type, labels=tuple(labels),
                             labels_from=labels_from)
