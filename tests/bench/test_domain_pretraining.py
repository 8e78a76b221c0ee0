"""bench/experiments/domain_pretraining/run.py end to end on tiny stand-ins of aclImdb and SST-2
(fake reviews and sentences made here, tiny model and steps): the result file's structure, and
that each goal verdict follows from the numbers beside it."""

import json
import os
import random
import subprocess
import sys

import pytest

from bench.experiments.domain_pretraining import run as domain_pretraining
from tests.helpers.paths import REPO

MODULE = "bench.experiments.domain_pretraining.run"

_GOOD = "great wonderful moving superb brilliant touching fine lovely".split()
_BAD = "awful boring dull terrible weak clumsy poor tedious".split()
_FILL = "the film movie story actor plot scene music camera ending script cast".split()


def _sentence(rng, words):
  return " ".join(rng.choice(words + _FILL) for _ in range(rng.randint(5, 9))).capitalize() + "."


def _review(rng, words):
  return "<br /><br />".join(" ".join(_sentence(rng, words) for _ in range(3)) for _ in range(2))


def _stand_ins(root):
  rng = random.Random(0)
  imdb = root / "aclImdb"
  for split, labels in (("train", ("unsup", "pos", "neg")), ("test", ("pos", "neg"))):
    for label in labels:
      (imdb / split / label).mkdir(parents=True)
      for i in range(12):
        words = _GOOD if label == "pos" else _BAD if label == "neg" else _GOOD + _BAD
        (imdb / split / label / f"{i}_7.txt").write_text(_review(rng, words))
  (imdb / "train" / "unsup" / "notes.py").write_text("not a review\n")  # ignored: not .txt
  sst = root / "SST-2"
  sst.mkdir()
  for split, n in (("train", 40), ("dev", 20)):  # this copy's layout: label<TAB>sentence
    rows = [f"{i % 2}\t{_sentence(rng, _GOOD if i % 2 else _BAD).lower()}" for i in range(n)]
    (sst / f"{split}.tsv").write_text("label\tsentence\n" + "\n".join(rows) + "\n")
  return imdb, sst


@pytest.fixture(scope="module")
def study(tmp_path_factory):
  root = tmp_path_factory.mktemp("domain")
  imdb, sst = _stand_ins(root)
  results = root / "results" / "domain.json"
  env = dict(os.environ, DP_CONFIG=os.path.join(REPO, "configs/albert_tiny.json"),
             DP_VOCAB="120", DP_LAYERS="1", DP_PRETRAIN_SEQ="32", DP_PREDS="4",
             DP_PRETRAIN_STEPS="2", DP_SST_SEQ="32", DP_IMDB_SEQ="32", DP_LOW_N="10",
             DP_LOW_STEPS="2", DP_SST_FULL_STEPS="2", DP_IMDB_FULL_STEPS="2", DP_SEEDS="1",
             DP_SIZES="low", DP_BENCHMARKS="sst2", DP_RESULTS=str(results), PYTHON=sys.executable)
  proc = subprocess.run([sys.executable, "-m", MODULE, str(imdb), str(sst), str(root / "work"),
                         "--part=main"], cwd=REPO, env=env, capture_output=True, text=True,
                        timeout=1800)
  assert proc.returncode == 0, proc.stdout + proc.stderr
  return root, json.loads(results.read_text()), results


def test_result_file_structure(study):
  root, result, path = study
  for key in ("machine", "date", "load_at_start", "settings", "commands", "main", "data_sizes"):
    assert key in result
  # (one benchmark and size here: each fine-tuning is a TensorFlow process)
  assert [(r["benchmark"], r["size"]) for r in result["main"]] == [("sst2", "low")]
  for row in result["main"]:
    assert len(row["pretrained"]) == len(row["random"]) == 1
    assert all(0.0 <= x <= 1.0 for x in row["pretrained"] + row["random"])
    assert 0.5 <= row["majority"] <= 1.0
  # every step is a real top-level command, recorded
  text = "\n".join(result["commands"])
  for command in ("albert_tf.cli.train_spm", "create_pretraining_data.py", "run_pretraining.py",
                  "run_classifier.py --task_name=SST-2"):
    assert command in text
  assert "--init_checkpoint=" in text
  assert path.with_suffix(".md").read_text().count("| sst2 |") == 1
  # the corpus: train reviews only, markup removed, blank lines between reviews
  corpus = (root / "work" / "imdb_corpus.txt").read_text()
  assert "<br" not in corpus and corpus.count("\n\n") == 36
  # SST-2 converted to the GLUE layout
  glue = (root / "work" / "tasks" / "sst2_low" / "SST-2" / "train.tsv").read_text().splitlines()
  assert glue[0] == "sentence\tlabel" and len(glue) == 11 and glue[1].endswith(("\t0", "\t1"))
  # IMDB as own data: train/pos,neg to train (10 drawn for the low-data size), test/ as dev
  tasks = root / "work" / "tasks"
  for size, n in (("low", 10), ("full", 24)):
    rows = (tasks / f"imdb_{size}" / "train.tsv").read_text().splitlines()
    assert rows[0] == "text\tlabel" and len(rows) == n + 1
    assert all(r.count("\t") == 1 and "<br" not in r for r in rows)
  dev = (tasks / "imdb_low" / "dev.tsv").read_text().splitlines()[1:]
  assert len(dev) == 24 and {r[-1] for r in dev} == {"0", "1"}


def test_verdicts_follow_from_the_numbers(study):
  _, result, _ = study
  for row in result["main"]:
    gap = 100 * (sum(row["pretrained"]) / len(row["pretrained"])
                 - sum(row["random"]) / len(row["random"]))
    assert row["gap_points"] == pytest.approx(gap, abs=0.01)
    needed = 5.0 if row["size"] == "low" else 0.0
    met = gap >= needed if row["size"] == "low" else gap > needed
    assert row["verdict"] == ("MET" if met else "NOT MET")


def test_verdict_rule():
  module = domain_pretraining
  assert module.verdict("low", [0.70, 0.72], [0.64, 0.66])[1] == "MET"  # +6 points
  assert module.verdict("low", [0.70, 0.70], [0.66, 0.66])[1] == "NOT MET"  # +4 points
  assert module.verdict("full", [0.801], [0.800])[1] == "MET"
  assert module.verdict("full", [0.80], [0.80])[1] == "NOT MET"
  assert module.verdict("full", [0.79], [0.80])[0] == pytest.approx(-1.0)
