"""run_glue.sh and recipes/run_{squad_v1,squad_v2,race}.sh, run through bash as users run them.

* Against the official values: with a stand-in interpreter that only records its command line,
  every recipe passes the paper's Table 14 (appendix A.4) values, the official run_glue.sh's
  tasks, order and checkpoint intervals, and the official README's v2 RACE change; extra
  arguments come last (they override).
* End to end on tiny stand-ins (tiny config, a few steps): GLUE MRPC and STS-B (regression) from
  an untarred official directory, SQuAD v1.1 from an HF directory, SQuAD v2.0 from our TF2
  directory, RACE (v1 values) from the official directory: none of them gets --albert_config_file
  or --spm_model_file, the scripts take both from the directory.
* A model directory without weights stops the recipe with one line before any training (the
  "SQuAD F1 16" of the official issues: an empty --init_checkpoint trained from random weights).
"""

import os
import shutil
import subprocess
import sys

import pytest

from tests.helpers import finetune, glue_fixtures, squad
from tests.helpers.model_dirs import HF, TARBALL, TF2, write_model_directories
from tests.helpers.paths import REPO
from tests.helpers.scripts import eval_blocks
from tests.helpers.text import make_tiny_spm_model

RUN_GLUE = os.path.join(REPO, "run_glue.sh")
SQUAD_V1 = os.path.join(REPO, "recipes", "run_squad_v1.sh")
SQUAD_V2 = os.path.join(REPO, "recipes", "run_squad_v2.sh")
RACE = os.path.join(REPO, "recipes", "run_race.sh")

# The paper's Table 14 (Lan et al. 2019, A.4): LR, BSZ, ALBERT DR, classifier DR, TS, WS, MSL.
TABLE_14 = {
    "CoLA": (1e-5, 16, 0, 0.1, 5336, 320, 512), "STS-B": (2e-5, 16, 0, 0.1, 3598, 214, 512),
    "SST-2": (1e-5, 32, 0, 0.1, 20935, 1256, 512), "MNLI": (3e-5, 128, 0, 0.1, 10000, 1000, 512),
    "QNLI": (1e-5, 32, 0, 0.1, 33112, 1986, 512), "QQP": (5e-5, 128, 0.1, 0.1, 14000, 1000, 512),
    "RTE": (3e-5, 32, 0.1, 0.1, 800, 200, 512), "MRPC": (2e-5, 32, 0, 0.1, 800, 200, 512),
    "WNLI": (2e-5, 16, 0.1, 0.1, 2000, 250, 512),
    "SQuAD v1.1": (5e-5, 48, 0, 0.1, 3649, 365, 384),
    "SQuAD v2.0": (3e-5, 48, 0, 0.1, 8144, 814, 512),
    "RACE": (2e-5, 32, 0.1, 0.1, 12000, 1000, 512),
}
# The official run_glue.sh: its tasks in its order, and each one's --save_checkpoints_steps.
OFFICIAL_RUN_GLUE = [("SST-2", 100), ("MNLI", 100), ("CoLA", 100), ("QNLI", 200), ("QQP", 100),
                     ("RTE", 100), ("STS-B", 100), ("MRPC", 100)]
SQUAD_TRAIN_QUESTIONS = {"SQuAD v1.1": 87599, "SQuAD v2.0": 130319}  # the official train files

TINY = ["--train_batch_size=4", "--max_seq_length=64"]
TINY_STEPS = ["--train_step=2", "--warmup_step=1", "--save_checkpoints_steps=2"]
TINY_SQUAD = ["--doc_stride=32", "--max_query_length=16", "--num_train_epochs=1"]


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
  """The three model directories, GLUE (MRPC, STS-B), SQuAD v1.1/v2.0 and RACE data."""
  root = tmp_path_factory.mktemp("recipes")
  spm = make_tiny_spm_model(str(root / "build"), vocab_size=1000)
  dirs = write_model_directories(root, spm)
  finetune.write_mrpc(str(root / "glue"), n_train=8, n_dev=4, n_test=3)
  finetune.write_stsb(str(root / "glue"))
  (root / "squad").mkdir()
  for version, source in (("v1.1", squad.TINY_V1), ("v2.0", squad.TINY_V2)):
    for split in ("train", "dev"):
      shutil.copy(source, root / "squad" / f"{split}-{version}.json")
  glue_fixtures.write_race(str(root / "race"))
  return dict(dirs, root=root)


def _bash(script, args, cwd, **env):
  environ = dict(os.environ, PYTHON=sys.executable, TF_CPP_MIN_LOG_LEVEL="2")
  environ.pop("PYTHONPATH", None)
  environ.update(env)
  return subprocess.run(["bash", script] + list(args), cwd=str(cwd), env=environ,
                        capture_output=True, text=True, timeout=900, check=False)


def _ok(proc):
  assert proc.returncode == 0 and "Traceback" not in proc.stderr, (
      f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
  assert "random initialisation" not in proc.stdout  # every recipe starts from MODEL_DIR
  return proc


def _one_line_error(proc):
  lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert proc.returncode == 2 and len(lines) == 1, (
      f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
  assert lines[0].startswith("error: ")
  return lines[0]


# ------------------------------------------------------------------ the values passed
def _recorded_runs(tmp_path, script, args, **env):
  """Runs the recipe with an interpreter that records its arguments: [{flag: value}] per run."""
  log = tmp_path / "argv.log"
  fake = tmp_path / "fake_python"
  fake.write_text('#!/bin/bash\n(IFS=$\'\\t\'; echo "$*") >> "$ARGV_LOG"\n')
  fake.chmod(0o755)
  if log.exists():
    log.unlink()
  for directory in args[:2]:
    (tmp_path / directory).mkdir(exist_ok=True)
  proc = _bash(script, args, tmp_path, PYTHON=str(fake), ARGV_LOG=str(log), **env)
  assert proc.returncode == 0, proc.stderr
  runs = []
  for line in log.read_text().splitlines():
    script_path, *argv = line.split("\t")
    flags = {"script": os.path.basename(script_path), "argv": argv}
    for arg in argv:
      name, _, value = arg[2:].partition("=")
      flags[name] = value
    runs.append(flags)
  return runs, proc.stdout


def _assert_values(run, task, lr=None, dropout=None):
  want_lr, batch, albert_dr, classifier_dr, steps, warmup, max_len = TABLE_14[task]
  assert float(run["learning_rate"]) == (lr or want_lr), (task, run)
  assert int(run["train_batch_size"]) == batch, (task, run)
  assert float(run["albert_dropout_prob"]) == (albert_dr if dropout is None else dropout)
  assert float(run["dropout_prob"]) == classifier_dr
  assert int(run["max_seq_length"]) == max_len, (task, run)
  if task.startswith("SQuAD"):  # official: epochs; 10 % warmup
    epochs = float(run["num_train_epochs"])
    assert int(SQUAD_TRAIN_QUESTIONS[task] / batch * epochs) == steps
    assert abs(int(steps * float(run["warmup_proportion"])) - warmup) <= 1
  else:
    assert (int(run["train_step"]), int(run["warmup_step"])) == (steps, warmup), (task, run)


def test_run_glue_passes_the_official_values(tmp_path):
  runs, stdout = _recorded_runs(tmp_path, RUN_GLUE, ["model", ".", "out"])
  assert [(r["task_name"], int(r["save_checkpoints_steps"])) for r in runs] == OFFICIAL_RUN_GLUE
  for run in runs:
    _assert_values(run, run["task_name"])
    assert run["script"] == "run_classifier.py"
    assert (run["init_checkpoint"], run["data_dir"]) == ("model", ".")
    assert run["output_dir"] == f"out/{run['task_name']}"
    assert {"do_train", "do_eval", "do_predict", "do_lower_case"} <= set(run)
  # One line per task says the values it uses.
  assert "run_glue.sh: MRPC, ALBERT v2 values: learning rate 2e-5, batch 32, ALBERT dropout " \
         "0, classifier dropout 0.1, 800 steps (200 warmup), max length 512" in stdout
  # GLUE_TASKS picks tasks (WNLI too); the same values for v1 models; extra arguments last.
  runs, _ = _recorded_runs(tmp_path, RUN_GLUE, ["model", ".", "out", "--train_step=2"],
                           GLUE_TASKS="wnli QQP", ALBERT_VERSION="v1")
  assert [r["task_name"] for r in runs] == ["wnli", "QQP"]
  assert (runs[0]["learning_rate"], runs[0]["albert_dropout_prob"]) == ("2e-5", "0.1")
  assert (runs[1]["learning_rate"], runs[1]["albert_dropout_prob"]) == ("5e-5", "0.1")
  assert "--train_step=14000" in runs[1]["argv"]
  assert runs[0]["argv"][-1] == "--train_step=2" and runs[0]["train_step"] == "2"


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_squad_and_race_recipes_pass_the_official_values(tmp_path, version):
  for script, task in ((SQUAD_V1, "SQuAD v1.1"), (SQUAD_V2, "SQuAD v2.0"), (RACE, "RACE")):
    (run,), _ = _recorded_runs(tmp_path, script, ["model", "data", "out"],
                               ALBERT_VERSION=version)
    if task == "RACE" and version == "v2":
      # The official README: v2 models take the v1 values except RACE's (they diverge).
      _assert_values(run, task, lr=1e-5, dropout=0)
    else:
      _assert_values(run, task)
    assert run["init_checkpoint"] == "model" and run["output_dir"] == "out"
  (squad_v1,), _ = _recorded_runs(tmp_path, SQUAD_V1, ["model", "data", "out"])
  assert squad_v1["script"] == "run_squad_v1.py"
  assert (squad_v1["train_file"], squad_v1["predict_file"]) == ("data/train-v1.1.json",
                                                                 "data/dev-v1.1.json")


def test_bad_recipe_arguments_are_one_line(tmp_path):
  assert "usage: bash run_glue.sh MODEL_DIR DATA_DIR OUTPUT_DIR" in _one_line_error(
      _bash(RUN_GLUE, ["model", "data"], tmp_path))
  (tmp_path / "data").mkdir()
  assert "MODEL_DIR nowhere: no such directory" in _one_line_error(
      _bash(RACE, ["nowhere", "data", "out"], tmp_path))
  assert "ALBERT_VERSION=v3: expected v1 or v2" in _one_line_error(
      _bash(RACE, ["data", "data", "out"], tmp_path, ALBERT_VERSION="v3"))
  assert "no hyper-parameters for task XNLI" in _one_line_error(
      _bash(RUN_GLUE, ["data", "data", "out"], tmp_path, GLUE_TASKS="XNLI"))


# ------------------------------------------------------------------ end to end
def test_run_glue_from_an_official_directory(stand_ins):
  root = stand_ins["root"]
  proc = _ok(_bash(RUN_GLUE, ["albert_base_v2", "glue", "out/glue"] + TINY + TINY_STEPS, root,
                   GLUE_TASKS="MRPC STS-B"))
  assert "Initialised" in proc.stdout + proc.stderr or "loaded" in proc.stdout + proc.stderr
  # The line README.md's "Recipes" shows (test_readme.py's recipe rules point here).
  assert ("run_glue.sh: MRPC, ALBERT v2 values: learning rate 2e-5, batch 32, ALBERT dropout 0, "
          "classifier dropout 0.1, 800 steps (200 warmup), max length 512") in \
      proc.stdout + proc.stderr
  mrpc, = eval_blocks(root / "out/glue/MRPC/eval_results.txt")
  stsb, = eval_blocks(root / "out/glue/STS-B/eval_results.txt")
  assert "eval_accuracy" in mrpc and "pearson" in stsb and mrpc["global_step"] == "2"
  for task in ("MRPC", "STS-B"):
    assert (root / "out/glue" / task / "model.ckpt-best.index").exists()
    assert (root / "out/glue" / task / "best_trial.txt").exists()
    assert (root / "out/glue" / task / f"{task}.tsv").exists()  # the submission file


def test_squad_v1_from_an_hf_directory(stand_ins):
  root = stand_ins["root"]
  _ok(_bash(SQUAD_V1, ["albert_hf", "squad", "out/squad_v1"] + TINY + TINY_SQUAD, root))
  out = root / "out/squad_v1"
  assert (out / "predictions.json").exists() and (out / "model.ckpt-best.index").exists()
  assert {"exact_match", "f1"} <= set(eval_blocks(out / "eval_results.txt")[0])


def test_squad_v2_from_our_tf2_directory(stand_ins):
  root = stand_ins["root"]
  _ok(_bash(SQUAD_V2, ["albert_tf2", "squad", "out/squad_v2"] + TINY + TINY_SQUAD, root))
  out = root / "out/squad_v2"
  assert (out / "null_odds.json").exists() and (out / "model.ckpt-best.index").exists()
  results = (out / "eval_results.txt").read_text()
  assert "HasAns_f1 = " in results and "NoAns_f1 = " in results


def test_race_with_v1_values_from_an_official_directory(stand_ins):
  root = stand_ins["root"]
  proc = _ok(_bash(RACE, ["albert_base_v2", "race", "out/race"] + TINY + TINY_STEPS +
                   ["--max_qa_length=16"], root, ALBERT_VERSION="v1"))
  assert "ALBERT v1 values: learning rate 2e-5, batch 32, ALBERT dropout 0.1" in proc.stdout
  assert (root / "out/race/model.ckpt-best.index").exists()
  block, = eval_blocks(root / "out/race/eval_results.txt")
  assert {"eval_accuracy", "middle_accuracy", "high_accuracy"} <= set(block)


@pytest.mark.parametrize("kind", [TARBALL, HF])
def test_a_model_directory_without_weights_stops_the_recipe(stand_ins, kind):
  root = stand_ins["root"]
  empty = root / f"no_weights_{kind}"
  shutil.copytree(stand_ins[kind], empty, ignore=shutil.ignore_patterns(
      "model.ckpt-best*", "model.safetensors"))
  proc = _bash(SQUAD_V1, [empty.name, "squad", f"out/no_weights_{kind}"] + TINY + TINY_SQUAD,
               root)
  line = _one_line_error(proc)
  assert empty.name in line and ("no checkpoint" in line or "model.safetensors" in line), line
  assert not (root / f"out/no_weights_{kind}").exists()  # stopped before any work
