"""Tiny GLUE and RACE data sets in exactly the layouts of the official downloads.

Every file follows what the official `classifier_utils.py` processors read (file names, header
lines, column indices, label sets) and what the GLUE download holds (column names, MNLI's
12/16/10 columns, CoLA's header-less train/dev, QQP's 3-column test file, AX's
`diagnostic/diagnostic.tsv`). RACE follows the download (`RACE/<split>/<middle|high>/<n>.txt`,
one JSON passage per file) plus the `all.txt` concatenation the official `race_utils.py` reads.

Nothing here imports albert_tf.
"""

import dataclasses
import json
import os
from typing import Optional, Sequence

# Sentences made of the tiny SentencePiece corpus's words (tests/helpers/text.py), so tokens
# are real pieces. Some carry a bare double quote: GLUE files are not CSV-quoted.
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A sentence piece model splits words into frequent pieces.",
    "Albert shares parameters across all transformer layers.",
    "The factorized embedding keeps the vocabulary matrix small.",
    "Sentence order prediction asks whether two segments were swapped.",
    "Masked language modelling hides some tokens and predicts them.",
    "Tokyo is the capital of Japan, and Paris is the capital of France.",
    "Rivers flow to the sea, and mountains rise above the clouds.",
    "She said \"hello\" and he said goodbye before the train.",
    "Every document is separated from the next one by a blank line.",
]

N_TRAIN, N_DEV, N_TEST = 8, 5, 3


@dataclasses.dataclass(frozen=True)
class GlueTask:
  """One GLUE task as the official scripts and the leaderboard see it."""
  flag: str  # --task_name, spelled as in the official run_glue.sh
  directory: str  # below the GLUE root
  labels: Sequence[str]  # empty for STS-B (regression)
  metric: str  # the key the official run_classifier picks the best checkpoint by
  submission: str  # the GLUE leaderboard's file name
  pair: bool  # sentence-pair task (raw-text signature takes text_b)
  has_train: bool = True


GLUE_TASKS = {
    t.flag: t for t in [
        GlueTask("CoLA", "CoLA", ("0", "1"), "matthew_corr", "CoLA.tsv", False),
        GlueTask("MNLI", "MNLI", ("contradiction", "entailment", "neutral"), "eval_accuracy",
                 "MNLI-m.tsv", True),
        GlueTask("MISMNLI", "MNLI", ("contradiction", "entailment", "neutral"),
                 "eval_accuracy", "MNLI-mm.tsv", True),
        GlueTask("AX", "diagnostic", ("contradiction", "entailment", "neutral"),
                 "eval_accuracy", "AX.tsv", True, has_train=False),
        GlueTask("MRPC", "MRPC", ("0", "1"), "eval_accuracy", "MRPC.tsv", True),
        GlueTask("QNLI", "QNLI", ("entailment", "not_entailment"), "eval_accuracy",
                 "QNLI.tsv", True),
        GlueTask("QQP", "QQP", ("0", "1"), "eval_accuracy", "QQP.tsv", True),
        GlueTask("RTE", "RTE", ("entailment", "not_entailment"), "eval_accuracy", "RTE.tsv",
                 True),
        GlueTask("SST-2", "SST-2", ("0", "1"), "eval_accuracy", "SST-2.tsv", False),
        GlueTask("STS-B", "STS-B", (), "pearson", "STS-B.tsv", True),
        GlueTask("WNLI", "WNLI", ("0", "1"), "eval_accuracy", "WNLI.tsv", True),
    ]
}


@dataclasses.dataclass(frozen=True)
class TestExample:
  """One test-set row: the id the submission file echoes, and the raw texts."""
  index: str
  text_a: str
  text_b: Optional[str]


def write_file(path, text):
  """Writes `text` (UTF-8) to `path`, creating its directory; returns `path`."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return path


def _tsv(rows):
  return "".join("\t".join(str(c) for c in row) + "\n" for row in rows)


def _pair(i, offset):
  a = SENTENCES[(i + offset) % len(SENTENCES)]
  b = SENTENCES[(3 * i + 1 + offset) % len(SENTENCES)]
  return a, b


def _label(labels, i):
  return labels[i % len(labels)]


def _binary_parse(text):
  """The GLUE MNLI *_binary_parse columns (only their presence matters)."""
  return "( " + " ".join(text.rstrip(".").split()) + " )"


def _write_mnli(task_dir):
  labels = ("contradiction", "entailment", "neutral")
  parse_cols = lambda a, b: [_binary_parse(a), _binary_parse(b), "(ROOT " + a + ")",
                             "(ROOT " + b + ")"]
  train_header = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                  "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
                  "sentence2", "label1", "gold_label"]
  dev_header = train_header[:10] + ["label1", "label2", "label3", "label4", "label5",
                                    "gold_label"]
  test_header = train_header[:10]
  rows = [train_header]
  for i in range(N_TRAIN):
    a, b = _pair(i, 0)
    rows.append([i, 1000 + i, f"{1000 + i}e", "fiction", *parse_cols(a, b), a, b,
                 _label(labels, i), _label(labels, i)])
  write_file(os.path.join(task_dir, "train.tsv"), _tsv(rows))
  tests = {}
  for kind, genre, offset in (("matched", "slate", 1), ("mismatched", "verbatim", 2)):
    rows = [dev_header]
    for i in range(N_DEV):
      a, b = _pair(i, offset)
      lab = _label(labels, i + offset)
      rows.append([i, 2000 + i, f"{2000 + i}n", genre, *parse_cols(a, b), a, b,
                   lab, lab, lab, lab, lab, lab])
    write_file(os.path.join(task_dir, f"dev_{kind}.tsv"), _tsv(rows))
    rows, examples = [test_header], []
    for i in range(N_TEST):
      a, b = _pair(i, offset + 4)
      rows.append([i, 3000 + i, f"{3000 + i}c", genre, *parse_cols(a, b), a, b])
      examples.append(TestExample(str(i), a, b))
    write_file(os.path.join(task_dir, f"test_{kind}.tsv"), _tsv(rows))
    tests[kind] = examples
  return tests


def write_glue(glue_dir):
  """Writes every GLUE task under `glue_dir` (the GLUE root, as the official --data_dir).

  Returns {task flag: [TestExample]} for each task's test file, in file order.
  """
  tests = {}

  def split_rows(n, offset, make):
    return [make(i, *_pair(i, offset)) for i in range(n)]

  # CoLA: train/dev have no header: source, label, original judgement ("*" if 0), sentence.
  d = os.path.join(glue_dir, "CoLA")
  for split, n, off in (("train", N_TRAIN, 0), ("dev", N_DEV, 2)):
    write_file(os.path.join(d, f"{split}.tsv"), _tsv(split_rows(
        n, off, lambda i, a, b: ["gj04", i % 2, "" if i % 2 else "*", a])))
  rows = [["index", "sentence"]] + [[i, _pair(i, 5)[0]] for i in range(N_TEST)]
  write_file(os.path.join(d, "test.tsv"), _tsv(rows))
  tests["CoLA"] = [TestExample(str(i), _pair(i, 5)[0], None) for i in range(N_TEST)]

  # MNLI: matched and mismatched dev/test files.
  mnli = _write_mnli(os.path.join(glue_dir, "MNLI"))
  tests["MNLI"], tests["MISMNLI"] = mnli["matched"], mnli["mismatched"]

  # AX (diagnostic): index, sentence1, sentence2; predicted with an MNLI model.
  rows, examples = [["index", "sentence1", "sentence2"]], []
  for i in range(N_TEST):
    a, b = _pair(i, 7)
    rows.append([i, a, b])
    examples.append(TestExample(str(i), a, b))
  write_file(os.path.join(glue_dir, "diagnostic", "diagnostic.tsv"), _tsv(rows))
  tests["AX"] = examples

  # MRPC: Quality, #1 ID, #2 ID, #1 String, #2 String; test: index instead of Quality.
  d = os.path.join(glue_dir, "MRPC")
  header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
  for split, n, off in (("train", N_TRAIN, 0), ("dev", N_DEV, 3)):
    write_file(os.path.join(d, f"{split}.tsv"), _tsv([header] + split_rows(
        n, off, lambda i, a, b: [i % 2, 100 + i, 200 + i, a, a if i % 2 else b])))
  rows, examples = [["index"] + header[1:]], []
  for i in range(N_TEST):
    a, b = _pair(i, 5)
    rows.append([i, 300 + i, 400 + i, a, b])
    examples.append(TestExample(str(i), a, b))
  write_file(os.path.join(d, "test.tsv"), _tsv(rows))
  tests["MRPC"] = examples

  # Tasks whose files are index, sentence1, sentence2, label (test: no label).
  for flag, header, labels, off in (
      ("QNLI", ["index", "question", "sentence", "label"], ("entailment", "not_entailment"), 1),
      ("RTE", ["index", "sentence1", "sentence2", "label"], ("entailment", "not_entailment"), 2),
      ("WNLI", ["index", "sentence1", "sentence2", "label"], ("0", "1"), 3)):
    d = os.path.join(glue_dir, flag)
    for split, n, o in (("train", N_TRAIN, off), ("dev", N_DEV, off + 1)):
      write_file(os.path.join(d, f"{split}.tsv"), _tsv([header] + split_rows(
          n, o, lambda i, a, b, labels=labels: [i, a, b, _label(labels, i)])))
    rows, examples = [header[:3]], []
    for i in range(N_TEST):
      a, b = _pair(i, off + 4)
      rows.append([i, a, b])
      examples.append(TestExample(str(i), a, b))
    write_file(os.path.join(d, "test.tsv"), _tsv(rows))
    tests[flag] = examples

  # QQP: id, qid1, qid2, question1, question2, is_duplicate; test: id, question1, question2.
  d = os.path.join(glue_dir, "QQP")
  header = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
  for split, n, off in (("train", N_TRAIN, 4), ("dev", N_DEV, 5)):
    write_file(os.path.join(d, f"{split}.tsv"), _tsv([header] + split_rows(
        n, off, lambda i, a, b: [500 + i, 2 * i + 1, 2 * i + 2, a, b, i % 2])))
  rows, examples = [["id", "question1", "question2"]], []
  for i in range(N_TEST):
    a, b = _pair(i, 6)
    rows.append([i, a, b])
    examples.append(TestExample(str(i), a, b))
  write_file(os.path.join(d, "test.tsv"), _tsv(rows))
  tests["QQP"] = examples

  # SST-2: sentence, label; test: index, sentence.
  d = os.path.join(glue_dir, "SST-2")
  for split, n, off in (("train", N_TRAIN, 6), ("dev", N_DEV, 7)):
    write_file(os.path.join(d, f"{split}.tsv"), _tsv([["sentence", "label"]] + split_rows(
        n, off, lambda i, a, b: [a.lower().rstrip("."), i % 2])))
  rows, examples = [["index", "sentence"]], []
  for i in range(N_TEST):
    a = _pair(i, 8)[0].lower().rstrip(".")
    rows.append([i, a])
    examples.append(TestExample(str(i), a, None))
  write_file(os.path.join(d, "test.tsv"), _tsv(rows))
  tests["SST-2"] = examples

  # STS-B: index genre filename year old_index source1 source2 sentence1 sentence2 score.
  d = os.path.join(glue_dir, "STS-B")
  header = ["index", "genre", "filename", "year", "old_index", "source1", "source2",
            "sentence1", "sentence2", "score"]
  for split, n, off in (("train", N_TRAIN, 0), ("dev", N_DEV, 1)):
    write_file(os.path.join(d, f"{split}.tsv"), _tsv([header] + split_rows(
        n, off, lambda i, a, b: [i, "main-captions", "MSRvid", "2012test", f"{i:04d}",
                                 "none", "none", a, b, f"{(i * 1.7) % 5:.3f}"])))
  rows, examples = [header[:-1]], []
  for i in range(N_TEST):
    a, b = _pair(i, 2)
    rows.append([i, "main-news", "headlines", "2015", f"{i:04d}", "none", "none", a, b])
    examples.append(TestExample(str(i), a, b))
  write_file(os.path.join(d, "test.tsv"), _tsv(rows))
  tests["STS-B"] = examples
  return tests


# ----------------------------------------------------------------------------------- RACE
RACE_QUESTIONS = [
    ("What does the fox jump over?", ["the lazy dog", "the sea", "Paris", "the clouds"]),
    ("Albert shares _ across layers.", ["parameters", "rivers", "pieces", "tokens"]),
    ("What is the capital of Japan?", ["Paris", "Tokyo", "France", "the sea"]),
    ("Rivers flow to _ .", ["the clouds", "the dog", "the sea", "Japan"]),
]

# Questions per passage file, per split and level: train 8, dev 5, test 3 questions.
RACE_LAYOUT = {
    "train": {"middle": [2, 2], "high": [2, 2]},
    "dev": {"middle": [1, 2], "high": [2]},
    "test": {"middle": [1], "high": [2]},
}


def race_passage(passage_id, n_questions, seed):
  questions, options, answers = [], [], []
  for q in range(n_questions):
    question, opts = RACE_QUESTIONS[(seed + q) % len(RACE_QUESTIONS)]
    questions.append(question)
    options.append(list(opts))
    answers.append("ABCD"[(seed + 2 * q) % 4])
  article = " ".join(SENTENCES[(seed + k) % len(SENTENCES)] for k in range(4))
  # The download's key order.
  return {"answers": answers, "options": options, "questions": questions, "article": article,
          "id": passage_id}


def write_race(data_dir):
  """RACE as downloaded (per-passage files) plus each folder's all.txt (one JSON per line).

  Returns {split: [(passage_id, article, question, options, answer)]} in the official
  reading order (middle then high, all.txt line order, question order).
  """
  questions = {}
  seed = 0
  for split, levels in RACE_LAYOUT.items():
    questions[split] = []
    for level in ("middle", "high"):
      lines = []
      for n, n_questions in enumerate(levels[level], start=1):
        passage = race_passage(f"{level}{n}.txt", n_questions, seed)
        seed += 1
        text = json.dumps(passage)
        write_file(os.path.join(data_dir, "RACE", split, level, f"{n}.txt"), text)
        lines.append(text)
        for q in range(n_questions):
          questions[split].append((passage["id"], passage["article"], passage["questions"][q],
                                   passage["options"][q], passage["answers"][q]))
      write_file(os.path.join(data_dir, "RACE", split, level, "all.txt"), "\n".join(lines) + "\n")
  return questions
