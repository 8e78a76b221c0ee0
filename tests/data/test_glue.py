"""GLUE readers (official layouts, columns, bad files) and submission files."""

import os

import pytest

from albert_tf.common import task_labels
from albert_tf.data import glue
from albert_tf.errors import AlbertError
from tests.helpers import finetune


# ---------------------------------------------------------------------------- readers
def test_mrpc_reader_official_guids_and_labels(tmp_path):
  finetune.write_mrpc(str(tmp_path), n_train=4, n_dev=2, n_test=3)
  train = glue.read_examples(str(tmp_path), "MRPC", "train")
  assert [e.guid for e in train] == ["train-1", "train-2", "train-3", "train-4"]
  assert [e.label for e in train] == ["1", "0", "1", "0"]
  assert train[0].text_a == finetune.SENTENCES[0] and train[0].text_b == finetune.SENTENCES[0]
  test = glue.read_examples(str(tmp_path), "mrpc", "test")
  # Test guids are the file's index column (the submission file echoes them).
  assert [e.guid for e in test] == ["0", "1", "2"]
  assert all(e.label == "0" for e in test)


def test_cola_has_no_header_and_stsb_float_labels(tmp_path):
  finetune.write_cola(str(tmp_path), n_train=3)
  cola = glue.read_examples(str(tmp_path), "cola", "train")
  assert [e.guid for e in cola] == ["train-0", "train-1", "train-2"]
  assert [e.label for e in cola] == ["0", "1", "0"] and cola[0].text_b is None
  finetune.write_stsb(str(tmp_path), n_train=3)
  stsb = glue.read_examples(str(tmp_path), "STS-B", "train")
  assert [e.label for e in stsb] == [0.0, 0.9, 1.8]
  assert glue.get_task("sts-b").is_regression and glue.get_task("stsb").num_labels == 1


def test_task_directory_as_data_dir(tmp_path):
  # BERT-style --data_dir=glue/MRPC works as well as the official --data_dir=glue.
  finetune.write_mrpc(str(tmp_path), n_train=2)
  examples = glue.read_examples(str(tmp_path / "MRPC"), "mrpc", "train")
  assert [e.guid for e in examples] == ["train-1", "train-2"]


def test_process_text_is_applied(tmp_path):
  finetune.write_cola(str(tmp_path), n_train=2)
  examples = glue.read_examples(str(tmp_path), "cola", "train", process_text=str.upper)
  assert examples[0].text_a == finetune.SENTENCES[0].upper()


def test_every_task_has_files_and_submission_names():
  expected = {"cola": "CoLA.tsv", "mnli": "MNLI-m.tsv", "mismnli": "MNLI-mm.tsv",
              "mrpc": "MRPC.tsv", "qnli": "QNLI.tsv", "qqp": "QQP.tsv", "rte": "RTE.tsv",
              "sst-2": "SST-2.tsv", "sts-b": "STS-B.tsv", "wnli": "WNLI.tsv", "ax": "AX.tsv"}
  assert {name: spec.submission_file for name, spec in glue.TASKS.items()} == expected
  assert glue.split_path("/g", "mismnli", "dev") == os.path.join("/g", "MNLI",
                                                                 "dev_mismatched.tsv")
  assert glue.split_path("/g", "ax", "test") == os.path.join("/g", "diagnostic",
                                                             "diagnostic.tsv")


def test_mnli_and_rte_columns(tmp_path):
  header = "\t".join(["index", "promptID", "pairID", "genre", "s1b", "s2b", "s1p", "s2p",
                      "sentence1", "sentence2", "label1", "gold_label"])
  row = "\t".join(["7", "p", "q", "g", "", "", "", "", "premise", "hypothesis", "neutral",
                   "neutral"])
  (tmp_path / "MNLI").mkdir()
  (tmp_path / "MNLI" / "train.tsv").write_text(header + "\n" + row + "\n")
  [example] = glue.read_examples(str(tmp_path), "mnli", "train")
  assert (example.guid, example.text_a, example.text_b, example.label) == (
      "7", "premise", "hypothesis", "neutral")
  (tmp_path / "RTE").mkdir()
  (tmp_path / "RTE" / "dev.tsv").write_text(
      "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tnot_entailment\n")
  [rte] = glue.read_examples(str(tmp_path), "rte", "dev")
  assert rte.label == "not_entailment"


@pytest.mark.parametrize("content, message", [
    ("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tonly three\n",
     r"train.tsv:2: expected 5 tab-separated columns for GLUE mrpc train, found 4"),
    ("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n2\t1\t2\ta\tb\n",
     r"train.tsv:2: label '2' is not one of the mrpc labels 0, 1"),
    ("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n",
     r"train.tsv: no examples in the train split of GLUE mrpc"),
    ("", r"train.tsv: empty file"),
])
def test_bad_glue_files(tmp_path, content, message):
  (tmp_path / "MRPC").mkdir()
  (tmp_path / "MRPC" / "train.tsv").write_text(content)
  with pytest.raises(AlbertError, match=message):
    glue.read_examples(str(tmp_path), "mrpc", "train")


def test_unknown_task_missing_file_and_split(tmp_path):
  with pytest.raises(AlbertError, match=r"'foo' is not a known GLUE task; known tasks: ax, "
                                        r"cola, .*wnli"):
    glue.get_task("foo")
  with pytest.raises(AlbertError, match=r"RTE.train.tsv: file not found"):
    glue.read_examples(str(tmp_path), "rte", "train")
  with pytest.raises(AlbertError, match="has no train split"):
    glue.read_examples(str(tmp_path), "ax", "train")


def test_stsb_non_numeric_label(tmp_path):
  finetune.write_stsb(str(tmp_path), n_train=2)
  path = tmp_path / "STS-B" / "train.tsv"
  path.write_text(path.read_text().replace("0.900", "high"))
  with pytest.raises(AlbertError, match=r"train.tsv:3: label 'high' is not a number"):
    glue.read_examples(str(tmp_path), "sts-b", "train")


def test_submission_file_format(tmp_path):
  spec = glue.get_task("rte")
  examples = [glue.InputExample("10", "a", "b"), glue.InputExample("11", "c", "d")]
  path = str(tmp_path / "RTE.tsv")
  glue.write_submission(path, spec, examples, [1, 0])
  assert open(path).read() == "index\tprediction\n10\tnot_entailment\n11\tentailment\n"
  glue.write_submission(path, glue.get_task("sts-b"), examples, [2.25, 7.0])
  assert open(path).read() == "index\tprediction\n10\t2.250\n11\t5.000\n"
  assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_task_specs_agree_with_the_leaf_label_lists():
  # from_pretrained(task_name=...) reads albert_tf/common/task_labels.py; the readers' specs must match.
  assert {name: tuple(spec.labels) for name, spec in glue.TASKS.items()} == \
      task_labels.GLUE_LABELS
  for alias, name in task_labels.GLUE_ALIASES.items():
    assert glue.get_task(alias) is glue.TASKS[name]
    assert task_labels.glue_labels(alias) == (list(glue.TASKS[name].labels) or None)
