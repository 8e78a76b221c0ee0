"""MultipleChoicePreprocessor / encode_choices (the in-graph RACE rule of the notebook model and
the export) against the feature writer run_race.py uses (data/race.py +
classifier_features.convert_race_example), id for id."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import classifier_features, race
from albert_tf.errors import AlbertError
from albert_tf.text.multiple_choice_preprocessor import MultipleChoicePreprocessor
from albert_tf.text.tokenization import make_tokenizer
from tests.helpers.glue_fixtures import SENTENCES
from tests.helpers.text import make_tiny_spm_model

LENGTH, QA = 24, 8
LONG_ARTICLE = " ".join(SENTENCES)  # far more than LENGTH pieces: cut to fit
QUESTIONS = [
    # (article, question, options)
    ("A fox.", "What does it jump over?", ["the dog", "the sea", "Paris", "x"]),  # short
    (LONG_ARTICLE, "Albert shares _ across layers.", ["parameters", "rivers", "pieces", ""]),
    # two blanks, and a newline before one (a regular expression's "." stops there)
    (SENTENCES[2], "From _ to\n_ .", ["Paris", "the sea", "Tokyo", "the clouds"]),
    # question + option far longer than max_qa_length: its last QA pieces kept
    (SENTENCES[3], " ".join(SENTENCES[4:7]) + " Why?", ["because " + SENTENCES[7], "no", "yes",
                                                          "Both _ and -"]),
]


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
  return make_tiny_spm_model(tmp_path_factory.mktemp("mc_spm"))


def _script_features(spm_model, questions):
  """run_race.py's features: int [N, 4, LENGTH] per name."""
  tokenizer = make_tokenizer(spm_model)
  rows = []
  for article, question, options in questions:
    example = race.RaceExample("x", article, [race.question_with_option(question, o)
                                              for o in options], 0, "high")
    rows.append(classifier_features.convert_race_example(example, LENGTH, QA, tokenizer))
  return {name: np.array([r[name] for r in rows]).reshape(len(rows), 4, LENGTH)
          for name in ("input_ids", "input_mask", "segment_ids")}


def test_same_ids_as_the_feature_writer(spm):
  layer = MultipleChoicePreprocessor(spm, sequence_length=LENGTH, max_qa_length=QA)
  articles, questions, options = (list(column) for column in zip(*QUESTIONS))
  got = layer((tf.constant(articles), tf.constant(questions), tf.constant(options)))
  want = _script_features(spm, QUESTIONS)
  for name in want:
    np.testing.assert_array_equal(got[name].numpy(), want[name], err_msg=name)
  ids = want["input_ids"]
  assert (ids[1] != 0).all() and (want["input_mask"][0].sum(-1) < LENGTH).all()  # cut / short
  # The long question's choice: [CLS] article [SEP] then exactly QA pieces of question+option.
  assert want["segment_ids"][3, 0].sum() == QA + 1
  # One example alone (a tf.data map before batch) and the export's dict names.
  single = layer({"article": tf.constant(articles[2]), "question": tf.constant(questions[2]),
                  "options": tf.constant(options[2])})
  np.testing.assert_array_equal(single["input_ids"].numpy(), ids[2])


def test_bad_inputs_are_named(spm):
  layer = MultipleChoicePreprocessor(spm, sequence_length=LENGTH, max_qa_length=QA)
  with pytest.raises(AlbertError, match="options: expected 4 per question"):
    layer((tf.constant(["a"]), tf.constant(["q"]), tf.constant([["1", "2", "3"]])))
  with pytest.raises(AlbertError, match="question: expected strings, got int32"):
    layer((tf.constant(["a"]), tf.constant([3]), tf.constant([["1", "2", "3", "4"]])))
  with pytest.raises(AlbertError, match="takes \\(articles, questions, options\\), got 2 col"):
    layer((tf.constant(["a"]), tf.constant(["q"])))
  with pytest.raises(AlbertError, match="max_qa_length=30 must be in \\[1, max_seq_length - 3"):
    MultipleChoicePreprocessor(spm, sequence_length=LENGTH, max_qa_length=30)
  clone = MultipleChoicePreprocessor.from_config(layer.get_config())
  assert clone.get_config() == layer.get_config()
