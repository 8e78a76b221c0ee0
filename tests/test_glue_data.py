"""GLUE readers, GLUE metrics (against hand-computed values / NumPy) and feature conversion."""

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import classifier_features, glue
from albert_tf.errors import AlbertError
from albert_tf.metrics import glue_metrics as gm
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


# ---------------------------------------------------------------------------- metrics
def test_metrics_against_hand_computed_values():
  labels = [1, 1, 1, 0, 0, 0, 0, 1]
  preds = [1, 1, 0, 0, 0, 1, 0, 1]
  # tp=3 tn=3 fp=1 fn=1
  assert gm.accuracy(labels, preds) == 6 / 8
  assert gm.f1_score(labels, preds) == pytest.approx(2 * 3 / (2 * 3 + 1 + 1))
  assert gm.matthews_corrcoef(labels, preds) == pytest.approx((9 - 1) / np.sqrt(4 * 4 * 4 * 4))
  assert gm.matthews_corrcoef([1, 1, 0], [1, 1, 1]) == 0.0  # empty marginal -> 0 (div_no_nan)
  assert gm.f1_score([0, 0], [0, 0]) == 0.0


def test_correlations_against_numpy_and_ties():
  rng = np.random.default_rng(0)
  x, y = rng.normal(size=50), rng.normal(size=50)
  assert gm.pearson_corrcoef(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1])
  # Spearman with ties: average ranks [1, 2.5, 2.5, 4] vs [1, 2, 3, 4].
  ranks = np.array([1, 2.5, 2.5, 4])
  assert gm.spearman_corrcoef([1, 2, 2, 3], [10, 20, 30, 40]) == pytest.approx(
      np.corrcoef(ranks, [1, 2, 3, 4])[0, 1])
  assert gm.spearman_corrcoef([3, 1, 2], [30, 10, 20]) == pytest.approx(1.0)


def test_task_metrics_keys():
  assert set(gm.task_metrics("cola", [0, 1], [0, 1])) == {"eval_accuracy", "matthew_corr"}
  assert set(gm.task_metrics("qqp", [0, 1], [0, 1])) == {"eval_accuracy", "f1",
                                                         "accuracy_and_f1"}
  stsb = gm.task_metrics("sts-b", [0.0, 1.0, 3.0], [0.5, 1.0, 2.0])
  assert stsb["MSE"] == pytest.approx((0.25 + 0 + 1) / 3)
  assert set(stsb) == {"pearson", "spearman", "MSE"}


# ---------------------------------------------------------------------------- features
class _WordTokenizer:
  """Whitespace tokenizer with a growing vocabulary: isolates packing from SentencePiece."""

  def __init__(self):
    self.vocab = {"<pad>": 0, "<unk>": 1, "[CLS]": 2, "[SEP]": 3}

  def tokenize(self, text):
    return text.split()

  def convert_tokens_to_ids(self, tokens):
    return [self.vocab.setdefault(t, len(self.vocab)) for t in tokens]


def _official_truncate(a, b, max_length):
  a, b = list(a), list(b)
  while len(a) + len(b) > max_length:
    (a if len(a) > len(b) else b).pop()
  return a, b


def test_truncate_seq_pair_matches_official_loop():
  rng = np.random.default_rng(1)
  for _ in range(200):
    la, lb, budget = rng.integers(0, 12), rng.integers(0, 12), rng.integers(1, 15)
    a, b = list(range(la)), list(range(100, 100 + lb))
    expected = _official_truncate(a, b, budget)
    classifier_features.truncate_seq_pair(a, b, budget)
    assert (a, b) == expected


def test_convert_pair_and_single():
  tok = _WordTokenizer()
  pair = glue.InputExample("g", "a b c d e", "x y", "1")
  feature = classifier_features.convert_classifier_example(pair, ["0", "1"], 8, tok)
  ids = tok.vocab
  assert feature["input_ids"] == [2, ids["a"], ids["b"], ids["c"], 3, ids["x"], ids["y"], 3]
  assert feature["segment_ids"] == [0, 0, 0, 0, 0, 1, 1, 1]
  assert feature["input_mask"] == [1] * 8 and feature["label_ids"] == 1
  single = glue.InputExample("g", "a b", None, "0")
  feature = classifier_features.convert_classifier_example(single, ["0", "1"], 6, tok)
  assert feature["input_ids"] == [2, ids["a"], ids["b"], 3, 0, 0]
  assert feature["input_mask"] == [1, 1, 1, 1, 0, 0] and feature["segment_ids"] == [0] * 6
  score = glue.InputExample("g", "a", "b", 3.5)
  assert classifier_features.convert_classifier_example(score, [], 6, tok)["label_ids"] == 3.5


def test_tfrecord_roundtrip_and_cache(tmp_path):
  tok = _WordTokenizer()
  examples = [glue.InputExample(str(i), "a b c", "d e", 2.0 * i) for i in range(3)]
  path = str(tmp_path / "stsb_train.tf_record")
  calls = []

  def make():
    calls.append(1)
    return (classifier_features.convert_classifier_example(e, [], 8, tok) for e in examples)

  classifier_features.cached_features(path, {"max_seq_length": 8}, make)
  classifier_features.cached_features(path, {"max_seq_length": 8}, make)
  assert len(calls) == 1  # second call reused the cache
  classifier_features.cached_features(path, {"max_seq_length": 9}, make)
  assert len(calls) == 2  # other settings: rebuilt
  dataset = classifier_features.make_dataset(path, 8, "eval", batch_size=2, is_regression=True)
  batches = list(dataset)
  assert [b[0]["input_ids"].shape[0] for b in batches] == [2, 1]  # partial batch kept
  features, labels = batches[0]
  assert features["input_ids"].dtype == tf.int32
  np.testing.assert_allclose(labels["label_ids"].numpy(), [0.0, 2.0])
  with pytest.raises(AlbertError, match=r"records hold 8 input_ids, expected 16"):
    classifier_features.check_record_length(path, 16)
  assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]
