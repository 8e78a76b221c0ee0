"""GLUE readers: the standard GLUE directory layout -> `InputExample`s, and submission files.

Every task the official `run_classifier.py` knows (cola, mnli, mismnli, mrpc, qnli, qqp, rte,
sst-2, sts-b, wnli) plus the AX diagnostic set. Files are read as the GLUE download lays them
out (`<data_dir>/<TaskDir>/{train,dev,test}.tsv`, MNLI's `dev_matched.tsv` ...), with the same
columns, guids and placeholder test labels as the official processors, so cached features and
submission files line up with the official ones.

Unlike the official code, a malformed file is an `AlbertError` naming the file and line (the
official reader would raise IndexError or silently mis-read). Lines are split on tabs only:
GLUE files are not CSV-quoted (SST-2 and MNLI contain bare quote characters).
"""

import dataclasses
import os
from typing import Callable, ClassVar, Optional, Sequence, Union

from albert_tf.common import fileio, output_layout, task_labels
from albert_tf.data.table_files import read_text
from albert_tf.errors import AlbertError
from albert_tf.metrics import glue_metrics


@dataclasses.dataclass
class InputExample:
  """One sentence (pair) to classify.

  guid: unique id; for test sets the GLUE `index` column, which the submission file echoes.
  text_a / text_b: raw text (text_b None for single-sentence tasks).
  label: a label string from the task's `labels`, a float for regression (STS-B), or the
    official placeholder label for test sets (which carry no gold label).
  """
  guid: str
  text_a: str
  text_b: Optional[str] = None
  label: Union[str, float, None] = None


@dataclasses.dataclass(frozen=True)
class _SplitFormat:
  """Where the columns of one split live.

  file: name inside the task directory. header: whether line 1 is a header.
  num_columns: expected tab-separated columns per line (None: take it from the header).
  guid: column of the id, or None to use "<split>-<line index>" as the official code does.
  text_a / text_b / label: columns (-1 = last); label None for unlabeled test files.
  """
  file: str
  header: bool
  num_columns: Optional[int]
  guid: Optional[int]
  text_a: int
  text_b: Optional[int]
  label: Optional[int]


@dataclasses.dataclass(frozen=True)
class GlueTaskSpec:
  """Everything task-specific: files, labels, metric, and GLUE submission format.

  The methods below are what ClassificationTask asks of a task spec; a task on the user's own
  files answers them too (`albert_tf.data.custom_task.CustomTaskSpec`).
  """
  kind: ClassVar[str] = "glue"
  name: str
  directory: str
  labels: Sequence[str]  # empty for regression
  splits: dict
  submission_file: str  # the leaderboard's file name for --do_predict
  # Label written for test examples (the official processors use a fixed placeholder).
  test_placeholder: Union[str, float]
  # The metric the official run_classifier picks the best checkpoint by.
  best_metric: str

  @property
  def is_regression(self):
    return not self.labels

  @property
  def text_pair(self):
    """True for sentence-pair tasks (text_b present)."""
    return any(fmt.text_b is not None for fmt in self.splits.values())

  @property
  def num_labels(self):
    return 1 if self.is_regression else len(self.labels)

  @property
  def problem_type(self):
    """The task type, by the name of the HF config's `problem_type`."""
    return "regression" if self.is_regression else "single_label_classification"

  def split_path(self, data_dir, split):
    return split_path(data_dir, self, split)

  def read_examples(self, data_dir, split, process_text=None):
    return read_examples(data_dir, self, split, process_text=process_text)

  def cache_settings(self, data_dir, split):
    """What the cached features of `split` depend on (besides the tokenizer)."""
    return {"task": self.name, "data_file": fileio.file_fingerprint(
        split_path(data_dir, self, split))}

  def metrics(self, labels, predictions):
    return glue_metrics.task_metrics(self.name, labels, predictions)

  def write_predictions(self, output_dir, examples, probabilities, predictions,
                        exit_layers=None):
    """The GLUE submission file, also as the official `submit_results.tsv`; with early exit's
    exit_layers [N] also exit_layers.tsv (`index<TAB>exit_layer`): the submission file keeps
    the leaderboard's layout."""
    del probabilities  # (test_results.tsv, written by the task)
    for name in ("submit_results.tsv", self.submission_file):
      write_submission(os.path.join(output_dir, name), self, examples, predictions)
    if exit_layers is None:
      return {}
    path = output_layout.path(output_dir, output_layout.EXIT_LAYERS)
    fileio.write_text(path, "index\texit_layer\n" + "".join(
        f"{example.guid}\t{int(layer)}\n" for example, layer in zip(examples, exit_layers)))
    return {"exit_layers_file": path}

  def record_labels(self):
    """GLUE's label lists are fixed: nothing to record."""


def _fmt(file, header, guid, text_a, text_b, label, num_columns=None):
  return _SplitFormat(file, header, num_columns, guid, text_a, text_b, label)


_BINARY = task_labels.BINARY
_NLI3 = task_labels.NLI3
_NLI2 = task_labels.NLI2


def _pair_task(name, directory, labels, submission, placeholder, metric="eval_accuracy",
               test_file="test.tsv", dev_file="dev.tsv"):
  """Tasks whose files all are `index  sentence1  sentence2  [label]` with a header."""
  return GlueTaskSpec(
      name=name, directory=directory, labels=labels, submission_file=submission,
      test_placeholder=placeholder, best_metric=metric,
      splits={
          "train": _fmt("train.tsv", True, 0, 1, 2, -1),
          "dev": _fmt(dev_file, True, 0, 1, 2, -1),
          "test": _fmt(test_file, True, 0, 1, 2, None),
      })


def _mnli(name, dev_file, test_file, submission):
  return GlueTaskSpec(
      name=name, directory="MNLI", labels=_NLI3, submission_file=submission,
      test_placeholder="contradiction", best_metric="eval_accuracy",
      splits={
          "train": _fmt("train.tsv", True, 0, 8, 9, -1),
          "dev": _fmt(dev_file, True, 0, 8, 9, -1),
          "test": _fmt(test_file, True, 0, 8, 9, None),
      })


TASKS = {
    "cola": GlueTaskSpec(
        name="cola", directory="CoLA", labels=_BINARY, submission_file="CoLA.tsv",
        test_placeholder="0", best_metric="matthew_corr",
        splits={
            # train/dev: source, label, original label, sentence; no header.
            "train": _fmt("train.tsv", False, None, 3, None, 1, num_columns=4),
            "dev": _fmt("dev.tsv", False, None, 3, None, 1, num_columns=4),
            "test": _fmt("test.tsv", True, 0, 1, None, None),
        }),
    "mnli": _mnli("mnli", "dev_matched.tsv", "test_matched.tsv", "MNLI-m.tsv"),
    "mismnli": _mnli("mismnli", "dev_mismatched.tsv", "test_mismatched.tsv", "MNLI-mm.tsv"),
    "mrpc": GlueTaskSpec(
        name="mrpc", directory="MRPC", labels=_BINARY, submission_file="MRPC.tsv",
        test_placeholder="0", best_metric="eval_accuracy",
        splits={
            # Quality, #1 ID, #2 ID, #1 String, #2 String (test: index instead of Quality).
            "train": _fmt("train.tsv", True, None, 3, 4, 0),
            "dev": _fmt("dev.tsv", True, None, 3, 4, 0),
            "test": _fmt("test.tsv", True, 0, 3, 4, None),
        }),
    "qnli": _pair_task("qnli", "QNLI", _NLI2, "QNLI.tsv", "entailment"),
    "qqp": GlueTaskSpec(
        name="qqp", directory="QQP", labels=_BINARY, submission_file="QQP.tsv",
        test_placeholder="0", best_metric="eval_accuracy",
        splits={
            # id, qid1, qid2, question1, question2, is_duplicate; test: id, question1, question2.
            "train": _fmt("train.tsv", True, 0, 3, 4, 5),
            "dev": _fmt("dev.tsv", True, 0, 3, 4, 5),
            "test": _fmt("test.tsv", True, 0, 1, 2, None),
        }),
    "rte": _pair_task("rte", "RTE", _NLI2, "RTE.tsv", "entailment"),
    "sst-2": GlueTaskSpec(
        name="sst-2", directory="SST-2", labels=_BINARY, submission_file="SST-2.tsv",
        test_placeholder="0", best_metric="eval_accuracy",
        splits={
            "train": _fmt("train.tsv", True, None, 0, None, 1),
            "dev": _fmt("dev.tsv", True, None, 0, None, 1),
            "test": _fmt("test.tsv", True, 0, 1, None, None),
        }),
    "sts-b": GlueTaskSpec(
        name="sts-b", directory="STS-B", labels=(), submission_file="STS-B.tsv",
        test_placeholder=0.0, best_metric="pearson",
        splits={
            # index, genre, filename, year, old_index, source1, source2, sentence1, sentence2, score
            "train": _fmt("train.tsv", True, 0, 7, 8, -1),
            "dev": _fmt("dev.tsv", True, 0, 7, 8, -1),
            "test": _fmt("test.tsv", True, 0, 7, 8, None),
        }),
    "wnli": _pair_task("wnli", "WNLI", _BINARY, "WNLI.tsv", "0"),
    # The diagnostic set: test only, predicted with an MNLI model (official AXProcessor).
    "ax": GlueTaskSpec(
        name="ax", directory="diagnostic", labels=_NLI3, submission_file="AX.tsv",
        test_placeholder="contradiction", best_metric="eval_accuracy",
        splits={"test": _fmt("diagnostic.tsv", True, 0, 1, 2, None)}),
}

# The task names, their labels and aliases are albert_tf/common/task_labels.py's (the top-level loader
# reads them there); tests/data/test_glue.py checks that TASKS agrees.


def get_task(task_name):
  """Returns the GlueTaskSpec for `task_name` (case-insensitive); AlbertError lists known ones."""
  return TASKS[task_labels.glue_task_name(task_name)]


def split_path(data_dir, task, split):
  """Path of `split` ("train", "dev", "test") of `task` under a GLUE data dir."""
  spec = task if isinstance(task, GlueTaskSpec) else get_task(task)
  if split not in spec.splits:
    raise AlbertError(f"GLUE task {spec.name} has no {split} split (it has "
                      f"{', '.join(spec.splits)})")
  path = os.path.join(data_dir, spec.directory, spec.splits[split].file)
  # The official ALBERT --data_dir is the GLUE root; BERT's was the task directory itself
  # (glue_data/MRPC). Accept the latter when the file is directly there.
  direct = os.path.join(data_dir, spec.splits[split].file)
  if not fileio.exists(path) and fileio.exists(direct):
    return direct
  return path


def _read_lines(path):
  return read_text(path, "the standard GLUE layout <data_dir>/<Task>/<split>.tsv").split("\n")


def read_examples(data_dir, task, split, process_text: Optional[Callable[[str], str]] = None):
  """Reads one split of a GLUE task.

  Args:
    data_dir: the GLUE root (holding CoLA/, MNLI/, ...).
    task: task name or GlueTaskSpec.
    split: "train", "dev" or "test".
    process_text: applied to every text field (the official processors apply
      `tokenization.preprocess_text` here when a SentencePiece model is used). Identity if None.

  Returns:
    list of InputExample, in file order.

  Raises:
    AlbertError: missing file, wrong column count (file:line, expected vs found), a label not
      among the task's labels, or a split without examples.
  """
  spec = task if isinstance(task, GlueTaskSpec) else get_task(task)
  path = split_path(data_dir, spec, split)
  fmt = spec.splits[split]
  process_text = process_text or (lambda s: s)
  lines = _read_lines(path)
  if lines and lines[-1] == "":
    lines.pop()  # the newline ending the last line
  num_columns = fmt.num_columns
  if fmt.header:
    if not lines:
      raise AlbertError(f"{path}: empty file (expected a header line and examples)")
    num_columns = len(lines[0].rstrip("\r").split("\t"))
    needed = max(c for c in (fmt.guid, fmt.text_a, fmt.text_b, fmt.label) if c is not None) + 1
    if num_columns < needed:
      raise AlbertError(f"{path}:1: header has {num_columns} tab-separated columns, expected at "
                        f"least {needed} for GLUE {spec.name} {split}")
  examples = []
  for line_number, line in enumerate(lines, start=1):
    if fmt.header and line_number == 1:
      continue
    line = line.rstrip("\r")
    if not line.strip():
      raise AlbertError(f"{path}:{line_number}: empty line (expected {num_columns} "
                        f"tab-separated columns)")
    columns = line.split("\t")
    if len(columns) != num_columns:
      raise AlbertError(f"{path}:{line_number}: expected {num_columns} tab-separated columns "
                        f"for GLUE {spec.name} {split}, found {len(columns)}")
    # Official guids: the file's id column where there is one, else "<split>-<line index>"
    # with the 0-based line index (header included), as in the official processors.
    guid = columns[fmt.guid] if fmt.guid is not None else f"{split}-{line_number - 1}"
    text_a = process_text(columns[fmt.text_a])
    text_b = process_text(columns[fmt.text_b]) if fmt.text_b is not None else None
    if fmt.label is None:
      label = spec.test_placeholder
    else:
      raw = columns[fmt.label].strip()
      label = _parse_label(spec, raw, f"{path}:{line_number}")
    examples.append(InputExample(guid=guid.strip(), text_a=text_a, text_b=text_b, label=label))
  if not examples:
    raise AlbertError(f"{path}: no examples in the {split} split of GLUE {spec.name}")
  return examples


def _parse_label(spec, raw, where):
  if spec.is_regression:
    try:
      return float(raw)
    except ValueError:
      raise AlbertError(f"{where}: label {raw!r} is not a number (GLUE {spec.name} is a "
                        f"regression task)") from None
  if raw not in spec.labels:
    raise AlbertError(f"{where}: label {raw!r} is not one of the {spec.name} labels "
                      f"{', '.join(spec.labels)}")
  return raw


def format_prediction(spec, prediction):
  """The GLUE submission value for one prediction: a label name, or a score for STS-B.

  prediction: the class index (int) for classification, the predicted score for regression.
  """
  if spec.is_regression:
    # The leaderboard expects scores in [0, 5]; clipping never hurts Pearson/Spearman much and
    # the server rejects out-of-range values.
    return f"{min(max(float(prediction), 0.0), 5.0):.3f}"
  return spec.labels[int(prediction)]


def write_submission(path, spec, examples, predictions):
  """Writes a GLUE leaderboard file: header `index<TAB>prediction`, one line per test example.

  Written to a temporary name and renamed, so a partial file never exists.
  """
  if len(examples) != len(predictions):
    raise AlbertError(f"{path}: {len(predictions)} predictions for {len(examples)} test examples")
  fileio.write_text(path, "index\tprediction\n" + "".join(
      f"{example.guid}\t{format_prediction(spec, prediction)}\n"
      for example, prediction in zip(examples, predictions)))
