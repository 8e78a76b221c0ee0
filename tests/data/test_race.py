"""The RACE reader (official layout, all.txt, bad files) and RACE feature conversion."""

import json
import os

import numpy as np
import pytest

from albert_tf.data import classifier_features, race
from albert_tf.errors import AlbertError
from tests.helpers import finetune


def test_reader_builds_four_endings_per_question(tmp_path):
  finetune.write_race(str(tmp_path), splits=("dev",), files_per_level=1)
  examples = race.read_examples(str(tmp_path), "dev")
  assert [e.level for e in examples] == ["middle", "middle", "high", "high"]
  first, cloze = examples[0], examples[1]
  assert first.endings[0] == "What does the fox jump over? the lazy dog"
  # A "_" blank is filled with the option instead of appending it.
  assert cloze.endings[1] == "Albert shares rivers across layers."
  assert first.label == 0 and first.example_id == "dev/middle/0.txt"
  assert len(race.read_examples(str(tmp_path), "dev", high_only=True)) == 2
  assert race.read_examples(str(tmp_path), "dev", process_text=str.upper)[0].context.isupper()


def _write_passage(tmp_path, passage, level="high"):
  path = tmp_path / "RACE" / "dev" / level / "1.txt"
  os.makedirs(path.parent, exist_ok=True)
  os.makedirs(tmp_path / "RACE" / "dev" / "middle", exist_ok=True)
  path.write_text(passage if isinstance(passage, str) else json.dumps(passage))
  return path


@pytest.mark.parametrize("mutate, message", [
    (lambda p: p.pop("answers"), r"1.txt:1: passage has no answers"),
    (lambda p: p["options"][0].pop(), r"1.txt:1: question 0 has 3 options, expected 4"),
    (lambda p: p["answers"].__setitem__(0, "E"), r"question 0 answer 'E' is not one of A, B"),
    (lambda p: p["questions"].pop(), r"1 questions, 2 option lists and 2 answers"),
])
def test_bad_race_files(tmp_path, mutate, message):
  passage = finetune.race_passage("x")
  mutate(passage)
  _write_passage(tmp_path, passage)
  with pytest.raises(AlbertError, match=message):
    race.read_examples(str(tmp_path), "dev")


def test_race_json_missing_dir_and_empty(tmp_path):
  _write_passage(tmp_path, "{not json")
  with pytest.raises(AlbertError, match=r"1.txt:1: not JSON"):
    race.read_examples(str(tmp_path), "dev")
  with pytest.raises(AlbertError, match=r"RACE.train.middle: directory not found"):
    race.read_examples(str(tmp_path), "train")
  (tmp_path / "RACE" / "dev" / "high" / "1.txt").write_text("\n")
  with pytest.raises(AlbertError, match=r"no RACE questions found in the dev split"):
    race.read_examples(str(tmp_path), "dev")


class _CharTokenizer:
  """One token per character; ids = code point (keeps the packing check readable)."""

  def tokenize(self, text):
    return list(text)

  def convert_tokens_to_ids(self, tokens):
    return [{"[CLS]": 2, "[SEP]": 3}.get(t, ord(t[0])) for t in tokens]


def test_race_conversion_keeps_end_of_question_and_cuts_context():
  example = race.RaceExample("id", "abcdefghij", ["wxyz", "12", "q", "kl"], 2, "high")
  feature = classifier_features.convert_race_example(example, max_seq_length=9,
                                                     max_qa_length=3, tokenizer=_CharTokenizer())
  ids = np.array(feature["input_ids"]).reshape(4, 9)
  segments = np.array(feature["segment_ids"]).reshape(4, 9)
  mask = np.array(feature["input_mask"]).reshape(4, 9)
  # "wxyz" keeps its last 3 tokens "xyz"; the context gets 9 - 3 - 3 = 3 tokens.
  assert [chr(i) if i > 3 else i for i in ids[0]] == [2, "a", "b", "c", 3, "x", "y", "z", 3]
  assert segments[0].tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1]
  # "q": context gets 9 - 3 - 1 = 5 tokens; no padding needed.
  assert [chr(i) if i > 3 else i for i in ids[2]] == [2, "a", "b", "c", "d", "e", 3, "q", 3]
  assert mask.sum() == 36 and feature["label_ids"] == 2
