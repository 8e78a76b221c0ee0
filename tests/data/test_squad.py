"""SQuAD reading, alignment, windows and feature files."""

import json
import logging

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import tokenization
from albert_tf.data import squad
from albert_tf.errors import AlbertError
from tests.helpers import squad as squad_helpers
from tests.helpers import text as text_helpers


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
  return squad_helpers.make_squad_spm_model(tmp_path_factory.mktemp("squad_spm"))


@pytest.fixture(scope="module")
def tokenizer(spm_model):
  return tokenization.FullTokenizer(spm_model_file=spm_model, do_lower_case=True)


def _recovered_answer(example, feature):
  start = feature.start_position - feature.doc_offset
  end = feature.end_position - feature.doc_offset
  return example.paragraph_text[feature.tok_start_to_orig_index[start]:
                                feature.tok_end_to_orig_index[end] + 1]


@pytest.mark.parametrize("do_lower_case", [True, False])
@pytest.mark.parametrize("path", [squad_helpers.TINY_V1, squad_helpers.TINY_V2])
def test_every_answer_recovered_from_its_token_span(spm_model, path, do_lower_case):
  tok = tokenization.FullTokenizer(spm_model_file=spm_model, do_lower_case=do_lower_case)
  examples = squad.read_squad_examples(str(path), is_training=True)
  features = list(squad.convert_examples_to_features(
      examples, tok, max_seq_length=256, doc_stride=64, max_query_length=32, is_training=True))
  assert len(features) == len(examples)  # everything fits one window here
  for feature in features:
    example = examples[feature.example_index]
    if example.is_impossible:
      assert feature.is_impossible and feature.start_position == feature.end_position == 0
      continue
    assert not feature.is_impossible
    assert _recovered_answer(example, feature) == example.orig_answer_text
    assert feature.segment_ids[feature.start_position] == 1
    assert feature.p_mask[feature.start_position] == 0 == feature.p_mask[feature.end_position]


@pytest.mark.parametrize("context, answer", [
    ("  Leading spaces,\tTABS and\n\nnewlines   around Zürich  .", "Zürich"),
    ("The ﬁnal score was 3,000, said the référée.", "ﬁnal score"),
    ("The ﬁnal score was 3,000, said the référée.", "3,000"),
    ("The ﬁnal score was 3,000, said the référée.", "référée"),
    ("He said ``hello'' twice at NOON.", "``hello''"),
    ("Decomposed accents: Cafe\u0301 Me\u0301lange opened.", "Cafe\u0301 Me\u0301lange"),
    ("Prices: 1,234,567 dollars, 4,25 euros.", "4,25"),
])
def test_answers_with_awkward_characters_round_trip(tokenizer, context, answer):
  example = squad.SquadExample("q", "Which?", context, answer, context.index(answer))
  (feature,) = squad.convert_examples_to_features([example], tokenizer, 128, 32, 16, True)
  assert not feature.is_impossible
  assert _recovered_answer(example, feature) == answer


def test_fixtures_exercise_accents_case_and_digit_comma(tokenizer):
  """The round-trip test above is only meaningful if these cases really occur."""
  examples = squad.read_squad_examples(str(squad_helpers.TINY_V1), is_training=True)
  answers = [e.orig_answer_text for e in examples]
  assert any(a != tokenization.preprocess_text(a, lower=True) for a in answers)  # case/accents
  assert "Zürich" in answers  # accent dropped by NFKD
  raw_digit_comma = []
  for example in examples:
    text = tokenization.preprocess_text(example.paragraph_text, lower=True)
    raw_digit_comma += [p for p in tokenizer.sp_model.EncodeAsPieces(text)
                        if len(p) > 1 and p[-1] == "," and p[-2].isdigit()]
  assert raw_digit_comma, "fixture text never triggers the digit-comma re-split"


def test_sliding_windows_max_context_and_labels(tokenizer):
  examples = squad.read_squad_examples(str(squad_helpers.TINY_V1), is_training=True)
  long_examples = [e for e in examples if e.paragraph_text.startswith("Tokyo")]
  max_seq_length, doc_stride, max_query_length = 40, 8, 12
  features = list(squad.convert_examples_to_features(
      long_examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training=True))
  for example_index, example in enumerate(long_examples):
    pieces, _ = tokenizer.tokenize_with_offsets(example.paragraph_text)
    windows = [f for f in features if f.example_index == example_index]
    assert len(windows) > 2
    # Every passage piece is the max-context piece of exactly one window.
    owners = np.zeros(len(pieces), int)
    start = 0
    for w_index, window in enumerate(windows):
      assert len(window.input_ids) == max_seq_length
      assert window.doc_span_index == w_index
      n_doc = len(window.tok_start_to_orig_index)
      assert n_doc <= max_seq_length - window.doc_offset - 1
      assert window.paragraph_len == window.doc_offset + n_doc + 1
      doc_tokens = window.tokens[window.doc_offset:window.doc_offset + n_doc]
      assert doc_tokens == pieces[start:start + n_doc]
      for pos, is_max in window.token_is_max_context.items():
        owners[start + pos - window.doc_offset] += is_max
      # Layout: [CLS] q [SEP] doc [SEP] pad; p_mask 0 only on [CLS] and the passage.
      expected_p_mask = ([0] + [1] * (window.doc_offset - 1) + [0] * n_doc +
                         [1] * (max_seq_length - window.doc_offset - n_doc))
      assert window.p_mask == expected_p_mask
      assert window.segment_ids[:window.paragraph_len] == (
          [0] * window.doc_offset + [1] * (n_doc + 1))
      assert sum(window.input_mask) == window.paragraph_len
      if not window.is_impossible:
        assert _recovered_answer(example, window) == example.orig_answer_text
      else:
        assert window.start_position == window.end_position == 0
      if w_index + 1 < len(windows):
        start += doc_stride
    assert np.all(owners == 1)
    assert any(not w.is_impossible for w in windows)
    assert any(w.is_impossible for w in windows)


def test_long_question_is_truncated(tokenizer):
  example = squad.SquadExample("q", "why " * 50 + "?", "Paris is in France.", "Paris", 0)
  (feature,) = squad.convert_examples_to_features([example], tokenizer, 64, 16, 5, True)
  assert feature.doc_offset == 5 + 2
  assert feature.tokens[feature.doc_offset - 1] == "[SEP]"
  assert _recovered_answer(example, feature) == "Paris"


def test_feature_tfrecord_round_trip(tokenizer, tmp_path):
  examples = squad.read_squad_examples(str(squad_helpers.TINY_V2), is_training=True)
  features = list(squad.convert_examples_to_features(examples, tokenizer, 48, 16, 12, True))
  path = str(tmp_path / "train.tf_record")
  assert squad.write_features(features, path, is_training=True) == len(features)
  assert not [p for p in tf.io.gfile.listdir(str(tmp_path)) if ".tmp-" in p]
  record = next(iter(tf.data.TFRecordDataset(path)))
  names = set(tf.train.Example.FromString(record.numpy()).features.feature)
  assert names == {"unique_ids", "input_ids", "input_mask", "segment_ids", "p_mask",
                   "start_positions", "end_positions", "is_impossible"}
  dataset = squad.feature_dataset(path, 48, is_training=False, batch_size=100,
                                  drop_remainder=False)
  # Read as prediction (no labels), then check labels through a training spec read.
  batch = next(iter(dataset))
  np.testing.assert_array_equal(batch["input_ids"].numpy(), [f.input_ids for f in features])
  np.testing.assert_array_equal(batch["p_mask"].numpy(), [f.p_mask for f in features])
  np.testing.assert_array_equal(batch["unique_ids"].numpy(), [f.unique_id for f in features])
  assert batch["input_ids"].dtype == tf.int32
  spec = squad.feature_spec(48, is_training=True)
  parsed = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(path)]
  assert [int(p["start_positions"]) for p in parsed] == [f.start_position for f in features]
  assert [int(p["is_impossible"]) for p in parsed] == [int(f.is_impossible) for f in features]
  squad.check_feature_file(path, 48, True, "train_feature_file")
  with pytest.raises(AlbertError, match="max_seq_length 48, but --max_seq_length is 64"):
    squad.check_feature_file(path, 64, True, "train_feature_file")


def test_train_features_are_cached_with_their_settings(tokenizer, spm_model, tmp_path,
                                                      monkeypatch):
  examples = squad.read_squad_examples(str(squad_helpers.TINY_V1), is_training=True)
  settings = squad.conversion_settings(48, 16, 12, True, spm_model)
  path = str(tmp_path / "train.tf_record")
  squad.prepare_train_features(examples, tokenizer, settings, path)
  monkeypatch.setattr(squad, "convert_examples_to_features", None)  # must not be called again
  assert squad.prepare_train_features(examples, tokenizer, settings, path) == path
  other = squad.conversion_settings(48, 16, 12, False, spm_model)
  with pytest.raises(AlbertError, match="--train_feature_file .* was built with .*delete it"):
    squad.prepare_train_features(examples, tokenizer, other, path)


def test_predict_features_are_cached(tokenizer, tmp_path, monkeypatch):
  examples = squad.read_squad_examples(str(squad_helpers.TINY_V1), is_training=False)
  settings = squad.conversion_settings(48, 16, 12, True, "x.model")
  record, left = str(tmp_path / "eval.tf_record"), str(tmp_path / "eval_left")
  features = squad.prepare_predict_features(examples, tokenizer, settings, record, left)

  def fail(*args, **kwargs):
    raise AssertionError("features were converted again")

  monkeypatch.setattr(squad, "convert_examples_to_features", fail)
  cached = squad.prepare_predict_features(examples, tokenizer, settings, record, left)
  assert cached == features
  other = squad.conversion_settings(48, 8, 12, True, "x.model")
  with pytest.raises(AlbertError, match="--predict_feature_left_file .* was built with"):
    squad.prepare_predict_features(examples, tokenizer, other, record, left)
  edited = [squad.SquadExample(e.qas_id, e.question_text + "?", e.paragraph_text)
            for e in examples]
  with pytest.raises(AlbertError, match="was built from other questions than the predict file"):
    squad.prepare_predict_features(edited, tokenizer, settings, record, left)
  with open(left, "wb") as f:  # e.g. the official pickle
    f.write(b"\x80\x04\x95 not json")
  with pytest.raises(AlbertError, match="is not an albert_tf feature file"):
    squad.prepare_predict_features(examples, tokenizer, settings, record, left)


# ----------------------------------------------------------------------------- bad input


def _squad(context="Paris is in France.", qa=None):
  qa = qa if qa is not None else {"id": "a", "question": "Where?",
                                  "answers": [{"text": "France", "answer_start": 12}]}
  return {"data": [{"paragraphs": [{"context": context, "qas": [qa]}]}]}


@pytest.mark.parametrize("content, message", [
    ("{not json", r"bad\.json:1:2: not valid JSON"),
    (json.dumps({"version": "1.1"}), r"top-level object has no \"data\""),
    (json.dumps({"data": [{"title": "x"}]}), r"data\[0\] has no \"paragraphs\""),
    (json.dumps({"data": [{"paragraphs": [{"qas": []}]}]}),
     r"data\[0\]\.paragraphs\[0\] has no \"context\""),
    (json.dumps(_squad(qa={"id": "a", "answers": []})),
     r"data\[0\]\.paragraphs\[0\]\.qas\[0\] has no \"question\""),
    (json.dumps(_squad(qa={"id": "a", "question": "Where?"})), r"qas\[0\] has no \"answers\""),
    (json.dumps(_squad(qa={"id": "a", "question": "Where?", "answers": [
        {"text": "France", "answer_start": 12}, {"text": "Paris", "answer_start": 0}]})),
     r"has 2 answers; for training each answerable question needs exactly 1"),
    (json.dumps(_squad(qa={"id": "a", "question": "Where?",
                           "answers": [{"text": "France"}]})),
     r"answers\[0\] has no \"answer_start\""),
    (json.dumps(_squad(qa={"id": "a", "question": "Where?",
                           "answers": [{"text": "France", "answer_start": "12"}]})),
     r"answer_start should be int, got str"),
])
def test_bad_squad_json_names_what_is_missing(tmp_path, content, message):
  path = tmp_path / "bad.json"
  path.write_text(content)
  with pytest.raises(AlbertError, match=message) as info:
    squad.read_squad_examples(str(path), is_training=True)
  assert "\n" not in str(info.value)
  assert str(path) in str(info.value)


def test_squad_version_detection(tmp_path):
  assert squad.load_squad_json(str(squad_helpers.TINY_V1), with_version=True)[1] is False
  assert squad.load_squad_json(str(squad_helpers.TINY_V2), with_version=True)[1] is True
  # A v2.0 file without the version string is still recognised by its questions.
  with open(squad_helpers.TINY_V2, encoding="utf-8") as f:
    data = json.load(f)
  del data["version"]
  path = squad_helpers.write_json(tmp_path / "v2.json", data)
  assert squad.load_squad_json(path, with_version=True)[1] is True


def test_missing_file(tmp_path):
  with pytest.raises(AlbertError, match="cannot read SQuAD file .*nope.json"):
    squad.read_squad_examples(str(tmp_path / "nope.json"), is_training=False)


def test_answer_not_at_answer_start_is_skipped_and_counted(tmp_path, caplog):
  data = _squad()
  qas = data["data"][0]["paragraphs"][0]["qas"]
  qas.append({"id": "b", "question": "Which city?",
              "answers": [{"text": "Paris", "answer_start": 3}]})
  qas.append({"id": "c", "question": "What?", "answers": [{"text": "Rome", "answer_start": 0}]})
  path = squad_helpers.write_json(tmp_path / "shifted.json", data)
  examples, skipped = squad.parse_squad_examples(json.load(open(path))["data"], True, path)
  assert skipped == 2 and [e.qas_id for e in examples] == ["a"]
  with caplog.at_level(logging.WARNING):
    examples = squad.read_squad_examples(path, is_training=True)
  assert [e.qas_id for e in examples] == ["a"]
  assert "skipped 2 question(s)" in caplog.text
  # Prediction keeps every question: answers are only gold labels there.
  assert len(squad.read_squad_examples(path, is_training=False)) == 3


def test_bad_lengths(tokenizer):
  example = squad.SquadExample("q", "Where?", "Paris is in France.", "Paris", 0)
  with pytest.raises(AlbertError, match=r"--max_seq_length \(20\) must be greater than "
                                        r"--max_query_length \(17\) \+ 3"):
    list(squad.convert_examples_to_features([example], tokenizer, 20, 8, 17, True))


@pytest.mark.parametrize("do_lower_case", [True, False])
@pytest.mark.parametrize("context, answer", [
    ("北京是中国的首都，也是文化中心。", "中国的首都"),  # CMRC 2018: no spaces between words
    ("他说：“电影很好”，price是100元！", "100元"),  # mixed scripts, full-width punctuation
    ("模型在2019年发布，PLAYING很好。", "PLAYING"),  # cased word inside Chinese text
    ("Café\u200b学习中文", "Café\u200b学"),  # accent and zero-width character inside
])
def test_wordpiece_answers_without_spaces_round_trip(tmp_path, do_lower_case, context, answer):
  vocab = text_helpers.make_wordpiece_vocab(tmp_path / "vocab.txt", cased=not do_lower_case)
  tok = tokenization.FullTokenizer(vocab_file=vocab, do_lower_case=do_lower_case)
  example = squad.SquadExample("q", "首都是哪里？", context, answer, context.index(answer))
  (feature,) = squad.convert_examples_to_features([example], tok, 64, 16, 16, True)
  assert not feature.is_impossible
  assert _recovered_answer(example, feature) == answer
  doc = feature.tokens[feature.doc_offset:feature.doc_offset + len(
      feature.tok_start_to_orig_index)]
  assert doc == tok.tokenize(context)
