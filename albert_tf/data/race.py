"""RACE reader: `<data_dir>/RACE/{train,dev,test}/{middle,high}/all.txt` -> `RaceExample`s.

The official reader reads `all.txt` in each level directory: one passage JSON per line
{"id", "article", "questions": [...], "options": [[4 str]...], "answers": ["A".."D" ...]}, which
users make by concatenating the per-passage files of the RACE download (`1.txt`, `2.txt`, ...,
one JSON each) that stay in the same folder. So where `all.txt` exists it is the only file read
(reading the per-passage files too would count every question twice). Without it (the download
as it comes), the per-passage `*.txt` files are read in sorted order instead, with a note.
As in the official `race_utils`, every question becomes one example with four
"question + option" strings (`question_with_option`: a "_" blank is filled with the option).
"""

import dataclasses
import hashlib
import os
from typing import Callable, List, Optional

from absl import logging

from albert_tf.common import fileio
from albert_tf.common import utf8
from albert_tf.errors import AlbertError, parse_json_object

ALL_FILE = "all.txt"
LEVELS = ("middle", "high")
NUM_CHOICES = 4
LABELS = ("A", "B", "C", "D")


@dataclasses.dataclass
class RaceExample:
  """One question: the passage, the four question+option strings, the answer index."""
  example_id: str
  context: str
  endings: List[str]
  label: int
  level: str  # "middle" or "high"


def read_examples(data_dir, split, high_only=False, middle_only=False,
                  process_text: Optional[Callable[[str], str]] = None):
  """Reads one RACE split ("train", "dev" or "test").

  Args:
    data_dir: directory holding `RACE/` (as the official --data_dir).
    high_only / middle_only: restrict to one level (official flags).
    process_text: applied to article, questions and options (official: preprocess_text).

  Raises:
    AlbertError: missing directory, invalid JSON, a passage without answers, a question
      without four options, an answer outside A-D, or no examples at all.
  """
  if high_only and middle_only:
    raise AlbertError("--high_only and --middle_only cannot both be set")
  process_text = process_text or (lambda s: s)
  split_dir = os.path.join(data_dir, "RACE", split)
  examples = []
  for level in LEVELS:
    if (level == "middle" and high_only) or (level == "high" and middle_only):
      continue
    level_dir = os.path.join(split_dir, level)
    if not fileio.isdir(level_dir):
      raise AlbertError(f"{level_dir}: directory not found (expected the RACE layout "
                        f"<data_dir>/RACE/<split>/<middle|high>/all.txt)")
    for path in level_files(level_dir):
      examples.extend(_read_file(path, level, process_text))
  if not examples:
    raise AlbertError(f"{split_dir}: no RACE questions found in the {split} split")
  return examples


def level_files(level_dir):
  """The files one level directory contributes: `all.txt` (official), else every `*.txt`."""
  all_file = os.path.join(level_dir, ALL_FILE)
  if fileio.isfile(all_file):
    return [all_file]
  files = [os.path.join(level_dir, name) for name in fileio.listdir(level_dir)
           if name.endswith(".txt")]
  if files:
    logging.warning("%s has no %s (what the official reader reads): reading its %d per-passage "
                    "files instead", level_dir, ALL_FILE, len(files))
  return files


def tree_fingerprint(data_dir, split):
  """sha1 over (relative path, size, mtime) of the files a split reads: cheap cache identity."""
  digest = hashlib.sha1()
  split_dir = os.path.join(data_dir, "RACE", split)
  for level in LEVELS:
    level_dir = os.path.join(split_dir, level)
    if not fileio.isdir(level_dir):
      continue
    for path in level_files(level_dir):
      identity = fileio.file_fingerprint(path)
      name = os.path.basename(path)
      digest.update(f"{level}/{name}:{identity['size']}:{identity['mtime']}\n".encode())
  return digest.hexdigest()


def question_with_option(question, option):
  """One choice's second segment (official race_utils): a cloze question's "_" blanks filled
  with the option, any other question followed by a space and the option. Its in-graph twin,
  for the notebook model and the export: text/multiple_choice_preprocessor.py."""
  return question.replace("_", option) if "_" in question else " ".join([question, option])


def _read_file(path, level, process_text):
  lines = utf8.read_file(path, "a RACE passage file").split("\n")
  examples = []
  for line_number, line in enumerate(lines, start=1):
    if not line.strip():
      continue
    where = f"{path}:{line_number}"
    passage = parse_json_object(
        line, where, "a JSON object with article, questions, options, answers")
    for key in ("article", "questions", "options"):
      if key not in passage:
        raise AlbertError(f"{where}: missing {key!r}")
    if not passage.get("answers"):
      raise AlbertError(f"{where}: passage has no answers (RACE files must give an answer "
                        f"letter A-D per question)")
    answers, options, questions = passage["answers"], passage["options"], passage["questions"]
    if not len(answers) == len(options) == len(questions):
      raise AlbertError(f"{where}: {len(questions)} questions, {len(options)} option lists and "
                        f"{len(answers)} answers; expected equal counts")
    context = process_text(passage["article"])
    example_id = str(passage.get("id", os.path.basename(path)))
    for i, (question, choices, answer) in enumerate(zip(questions, options, answers)):
      if len(choices) != NUM_CHOICES:
        raise AlbertError(f"{where}: question {i} has {len(choices)} options, expected "
                          f"{NUM_CHOICES}")
      if answer not in LABELS:
        raise AlbertError(f"{where}: question {i} answer {answer!r} is not one of "
                          f"{', '.join(LABELS)}")
      question = process_text(question)
      endings = [question_with_option(question, process_text(option)) for option in choices]
      examples.append(RaceExample(example_id=example_id, context=context, endings=endings,
                                  label=LABELS.index(answer), level=level))
  return examples
