"""Tagging files: CoNLL and JSON Lines read, schemes checked (BIO repaired, BIOES refused),
labels, predictions written back in the input's format, one-line errors naming file and line."""

import json

import pytest

from albert_tf.data import tagged_files
from albert_tf.errors import AlbertError

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
"""


def _write(tmp_path, name, text):
  path = tmp_path / name
  path.write_text(text, encoding="utf-8")
  return str(path)


def test_conll_sentences_words_tags_and_lines(tmp_path):
  path = _write(tmp_path, "train.txt", CONLL)
  sentences = tagged_files.read_tagged_file(path, "BIO")
  assert [s.words for s in sentences] == [["EU", "rejects", "German", "call"],
                                          ["Peter", "Blackburn"]]
  assert sentences[0].tags == ["B-ORG", "O", "B-MISC", "O"]
  assert sentences[1].tags == ["B-PER", "I-PER"]
  assert sentences[0].lines == [3, 4, 5, 6] and sentences[1].lines == [8, 9]
  assert sentences[1].raw_lines[0] == "Peter NNP B-NP B-PER"
  assert tagged_files.label_list_of(sentences) == ["O", "B-MISC", "B-ORG", "B-PER", "I-PER"]


def test_jsonl_sentences(tmp_path):
  rows = [{"tokens": ["Paris", "is", "big"], "tags": ["B-LOC", "O", "O"]},
          {"tokens": ["Ann", "Lee"], "tags": ["B-PER", "I-PER"]}]
  path = _write(tmp_path, "dev.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
  sentences = tagged_files.read_tagged_file(path, "BIO")
  assert [s.words for s in sentences] == [r["tokens"] for r in rows]
  assert [s.tags for s in sentences] == [r["tags"] for r in rows]
  assert sentences[1].lines == [2, 2]


def test_bio_repairs_i_after_o_and_after_another_type(tmp_path):
  # IOB1 (the original CoNLL-2003 files): I- starts an entity unless it continues one.
  path = _write(tmp_path, "iob1.txt", "a I-PER\nb I-PER\nc O\nd I-LOC\ne I-ORG\n")
  (sentence,) = tagged_files.read_tagged_file(path, "BIO")
  assert sentence.tags == ["B-PER", "I-PER", "O", "B-LOC", "B-ORG"]


def test_bioes_broken_sequence_refused_with_line(tmp_path):
  path = _write(tmp_path, "bad.txt", "a S-PER\nb O\nc E-LOC\n")
  with pytest.raises(AlbertError, match=r"bad.txt: line 3: tag 'E-LOC' does not continue"):
    tagged_files.read_tagged_file(path, "BIOES")
  path = _write(tmp_path, "bad2.txt", "a B-PER\nb O\n")
  with pytest.raises(AlbertError, match=r"bad2.txt: line 1: tag 'B-PER' is not followed"):
    tagged_files.read_tagged_file(path, "BIOES")
  path = _write(tmp_path, "good.txt", "a B-PER\nb I-PER\nc E-PER\nd S-LOC\n")
  assert tagged_files.read_tagged_file(path, "BIOES")[0].tags == ["B-PER", "I-PER", "E-PER",
                                                                  "S-LOC"]


@pytest.mark.parametrize("scheme,tag", [("BIO", "S-PER"), ("IO", "B-PER"), ("BIO", "PER"),
                                        ("BIOES", "X-LOC")])
def test_tag_outside_the_scheme(tmp_path, scheme, tag):
  path = _write(tmp_path, "t.txt", f"a O\n\nb {tag}\n")
  with pytest.raises(AlbertError, match=rf"t.txt: line 3: tag '{tag}' is outside the scheme"):
    tagged_files.read_tagged_file(path, scheme)


def test_wrong_column_count(tmp_path):
  path = _write(tmp_path, "cols.txt", "EU NNP B-ORG\nrejects O\n")
  with pytest.raises(AlbertError, match=r"cols.txt: line 2: 2 columns, expected 3 as on line 1"):
    tagged_files.read_tagged_file(path, "BIO")


@pytest.mark.parametrize("text", ["", "\n\n", "-DOCSTART- -X- O\n\n"])
def test_empty_file(tmp_path, text):
  path = _write(tmp_path, "empty.txt", text)
  with pytest.raises(AlbertError, match=r"empty.txt: no sentences"):
    tagged_files.read_tagged_file(path, "BIO")


def test_words_only_file_for_prediction_and_refused_for_training(tmp_path):
  path = _write(tmp_path, "words.txt", "Paris\nis\n\nbig\n")
  sentences = tagged_files.read_tagged_file(path, "BIO", needs_tags=False)
  assert [s.words for s in sentences] == [["Paris", "is"], ["big"]]
  assert sentences[0].tags is None
  with pytest.raises(AlbertError, match=r"words.txt: line 1: no tag"):
    tagged_files.read_tagged_file(path, "BIO")


def test_bad_jsonl_lines(tmp_path):
  path = _write(tmp_path, "a.jsonl", '{"tokens": ["x"], "tags": ["O"]}\n{"tokens": ["x", "y"], '
                '"tags": ["O"]}\n')
  with pytest.raises(AlbertError, match=r"a.jsonl: line 2: \"tags\" must be a list of 2"):
    tagged_files.read_tagged_file(path, "BIO")
  path = _write(tmp_path, "b.jsonl", "{not json\n")
  with pytest.raises(AlbertError, match=r"b.jsonl: line 1: not JSON"):
    tagged_files.read_tagged_file(path, "BIO")


def test_labels_flag_and_unknown_tag(tmp_path):
  assert tagged_files.parse_labels("O,B-PER,I-PER", "BIO") == ["O", "B-PER", "I-PER"]
  label_file = _write(tmp_path, "labels.txt", "O\nB-LOC\nI-LOC\n")
  assert tagged_files.parse_labels(label_file, "BIO") == ["O", "B-LOC", "I-LOC"]
  with pytest.raises(AlbertError, match=r"--labels: label 'S-PER' is outside"):
    tagged_files.parse_labels("O,S-PER", "BIO")
  with pytest.raises(AlbertError, match=r"must include 'O'"):
    tagged_files.parse_labels("B-PER", "BIO")
  path = _write(tmp_path, "dev.txt", "a O\nb B-LOC\n")
  sentences = tagged_files.read_tagged_file(path, "BIO")
  with pytest.raises(AlbertError, match=r"dev.txt: line 2: tag 'B-LOC' is not one of the labels"):
    tagged_files.check_known_labels(sentences, ["O", "B-PER"])


def test_not_utf8_named_by_line(tmp_path):
  path = tmp_path / "latin1.txt"
  path.write_bytes("a O\nCaf\u00e9 O\n".encode("latin-1"))
  with pytest.raises(AlbertError, match=r"latin1.txt: line 2, column 4: not UTF-8"):
    tagged_files.read_tagged_file(str(path), "BIO")


def test_predictions_written_back_in_the_input_format(tmp_path):
  path = _write(tmp_path, "test.txt", CONLL)
  sentences = tagged_files.read_tagged_file(path, "BIO")
  text = tagged_files.format_predictions(sentences, [["B-ORG", "O", "O", "O"], ["B-PER", "O"]],
                                         path)
  assert text.split("\n\n")[1] == "Peter NNP B-NP B-PER B-PER\nBlackburn NNP I-NP I-PER O\n"
  tabs = _write(tmp_path, "tabs.txt", "Kanye\tB-person\nWest\tI-person\n")
  assert tagged_files.format_predictions(tagged_files.read_tagged_file(tabs, "BIO"),
                                         [["B-person", "O"]], tabs) == (
      "Kanye\tB-person\tB-person\nWest\tI-person\tO\n")
  jsonl = _write(tmp_path, "test.jsonl", '{"tokens": ["a"], "tags": ["O"]}\n')
  sentences = tagged_files.read_tagged_file(jsonl, "BIO")
  assert json.loads(tagged_files.format_predictions(sentences, [["B-PER"]], jsonl)) == {
      "tokens": ["a"], "tags": ["O"], "predicted_tags": ["B-PER"]}


def test_scheme_flag():
  assert tagged_files.check_scheme("bioes") == "BIOES"
  with pytest.raises(AlbertError, match=r"--tag_scheme='IOB9' is invalid"):
    tagged_files.check_scheme("IOB9")
