"""The class names of a fine-tuning task, wherever they are defined: the GLUE tasks' fixed lists
and a custom task's recorded label_list.json (its reader).

A leaf module (no TensorFlow, nothing above albert_tf.common.fileio / albert_tf.errors), so that the
data readers (albert_tf/data/glue.py, albert_tf/data/custom_task.py) and the top-level loader
(`from_pretrained(task_name=...)`, the labels recorded in a run's output directory) read them from
one place.
"""

from albert_tf.common import fileio
from albert_tf.errors import AlbertError

# ------------------------------------------------------------------------------- GLUE
BINARY = ("0", "1")
NLI3 = ("contradiction", "entailment", "neutral")
NLI2 = ("entailment", "not_entailment")

# Every task the official run_classifier.py knows, plus the AX diagnostic set; () = regression.
GLUE_LABELS = {
    "cola": BINARY, "mnli": NLI3, "mismnli": NLI3, "mrpc": BINARY, "qnli": NLI2,
    "qqp": BINARY, "rte": NLI2, "sst-2": BINARY, "sts-b": (), "wnli": BINARY, "ax": NLI3,
}

# Spellings people use for the same tasks (GLUE leaderboard / HF names); the official names
# above stay the canonical ones (they name the cached TFRecords).
GLUE_ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "mnli-m": "mnli", "mnli_matched": "mnli",
                "mnli-mm": "mismnli", "mnli_mismatched": "mismnli", "diagnostic": "ax"}


def glue_task_name(task_name):
  """The canonical name of a GLUE task (case-insensitive, aliases resolved); AlbertError lists
  the known ones."""
  key = (task_name or "").strip().lower()
  key = GLUE_ALIASES.get(key, key)
  if key not in GLUE_LABELS:
    raise AlbertError(f"--task_name={task_name!r} is not a known GLUE task; known tasks: "
                      f"{', '.join(sorted(GLUE_LABELS))}")
  return key


def glue_labels(task_name):
  """A GLUE task's class names as a list (None for the regression task STS-B)."""
  labels = GLUE_LABELS[glue_task_name(task_name)]
  return list(labels) if labels else None


# ------------------------------------------------------------------- label_list.json
# The problem types a custom task's label_list.json records (the HF config's `problem_type`).
SINGLE_LABEL = "single_label_classification"
MULTI_LABEL = "multi_label_classification"
REGRESSION = "regression"
PROBLEM_TYPES = (SINGLE_LABEL, MULTI_LABEL, REGRESSION)


def read_label_list(path):
  """(problem_type, labels) recorded in a label_list.json; AlbertError if it is not one."""
  try:
    record = fileio.read_json(path)
  except (ValueError, UnicodeDecodeError) as e:
    raise AlbertError(f"{path}: not a label list (invalid JSON: {e}); remove it or use a new "
                      "--output_dir") from None
  problem_type = record.get("problem_type") if isinstance(record, dict) else None
  labels = record.get("labels") if isinstance(record, dict) else None
  if (problem_type not in PROBLEM_TYPES or not isinstance(labels, list)
      or not all(isinstance(name, str) for name in labels)
      or (problem_type == REGRESSION) != (not labels)):
    raise AlbertError(f"{path}: not a label list (expected {{\"problem_type\": one of "
                      f"{', '.join(PROBLEM_TYPES)}, \"labels\": [names]}})")
  return problem_type, tuple(labels)
