"""The flag matrix (issue 30): every mode a user types, through the real scripts, on tiny data.

For run_pretraining.py, run_classifier.py (GLUE MRPC and CoLA, --task_name=custom with a pair
and with a single sentence), run_race.py, run_squad.py / run_squad_v1.py / run_squad_v2.py,
export_savedmodel.py, export_checkpoints.py and the converter: --do_train, --do_eval,
--do_predict and --export_dir each alone (on an output dir a previous run trained: a copy of one
shared trained dir per script), eval+predict, and all of them (on a new output dir), with
relative paths (run from the job's folder) and absolute ones. Each mode
must exit 0 and leave the files the README names (eval_results.txt, best_trial.txt,
model.ckpt-best, test_results.tsv and the submission file, predictions.json, the export's
version directory and albert_model.tflite, ...) and nothing it was not asked for. A flag
required only for some modes (run_squad's --predict_file) is asked for only in those.

Also here, on the exports of the matrix: query_savedmodel on single-sentence and pair exports,
and a real SIGTERM during a script's --export_dir step (one line, exit 42, no version written).

One run per code path: a combination of actions whose every part another run already takes
(train+eval, train+predict: parts of "all") has no run of its own, and a path style is a property
of a run, not a reason for another one.

Cost: every run is a subprocess (~10 s of TensorFlow start-up on a quiet CPU); the runs start up
front, two at a time, trained dirs first, and each test waits for its own.
"""

import concurrent.futures
import os
import shutil
import signal
import subprocess
import sys
import time
import types

import pytest

from tests.helpers import finetune
from tests.helpers import glue_fixtures
from tests.helpers import scripts
from tests.helpers import squad as squad_helpers
from tests.helpers import training as training_helpers
from tests.helpers.paths import REPO
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import write_tiny_config

WORKERS = 2
SENTENCES = finetune.SENTENCES

# ----------------------------------------------------------------------------- the matrix
# (job, mode, path style): the trained dir of each job is its "train" mode (relative paths).
# One run per code path: each action alone and eval+predict on a trained dir (MRPC), and every
# action from a new dir once per kind of data (MRPC pair, CoLA single sentence, own TSV pair and
# single). "all" trains, evaluates, predicts and exports in one run, so train+eval and
# train+predict are its subsets; the modes alone check that nothing else is written.
CLASSIFIER_CASES = (
    [("mrpc", mode, "absolute" if i % 2 else "relative")
     for i, mode in enumerate(["eval", "predict", "export", "eval_predict", "all"])]
    + [("cola", "all", "absolute"), ("custom_pair", "all", "relative"),
       ("custom_single", "all", "absolute")])
# Jobs whose modes run on a copy of a trained dir (the others only train from a new dir).
TRAINED_JOBS = ("mrpc", "race", "squad_v1", "squad_v2", "pretraining")
RACE_CASES = [("race", "eval", "relative"), ("race", "predict", "absolute"),
              ("race", "all", "relative")]
# SQuAD has no --do_eval: --do_predict evaluates when the file has answers.
SQUAD_CASES = [("squad_v1", "predict", "relative", "run_squad_v1.py"),
               ("squad_v1", "train_predict_export", "absolute", "run_squad_v1.py"),
               ("squad_v2", "predict_export", "relative", "run_squad_v2.py")]
PRETRAINING_CASES = [("eval", "absolute"), ("train_eval", "relative")]


def _path(style, cwd, path):
  """`path` (absolute) as the user would type it in `cwd`: relative or absolute."""
  return os.path.relpath(path, cwd) if style == "relative" else os.path.abspath(path)


def _words(mode):
  """The actions of a mode name: "train_eval" -> {"train", "eval"}; "all" -> all four."""
  return {"train", "eval", "predict", "export"} if mode == "all" else set(mode.split("_"))


def _flags(mode, export_dir):
  """The mode's action flags; --export_dir=<export_dir> when it exports."""
  words = _words(mode)
  flags = [f"--do_{w}" for w in ("train", "eval", "predict") if w in words]
  return flags + ([f"--export_dir={export_dir}"] if "export" in words else [])


# ----------------------------------------------------------------------------- assets
def _write(path, text):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return path


def _custom_data(directory, pair):
  """Own data, TSV with a header: id, sentence(s), label (two labels)."""
  def rows(n, offset, labeled=True):
    header = "id\tsentence\t" + ("other\t" if pair else "") + ("label" if labeled else "")
    lines = [header.rstrip("\t")]
    for i in range(n):
      cells = [f"s{i}", SENTENCES[(i + offset) % 8]]
      if pair:
        cells.append(SENTENCES[(3 * i + 1 + offset) % 8])
      if labeled:
        cells.append("yes" if i % 2 else "no")
      lines.append("\t".join(cells))
    return "\n".join(lines) + "\n"
  _write(os.path.join(directory, "train.tsv"), rows(8, 0))
  _write(os.path.join(directory, "dev.tsv"), rows(4, 2))
  _write(os.path.join(directory, "test.tsv"), rows(3, 5, labeled=False))
  return directory


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
  root = tmp_path_factory.mktemp("flag_matrix")
  spm = make_tiny_spm_model(str(root))
  squad_spm = squad_helpers.make_squad_spm_model(str(root))
  glue_dir = str(root / "glue")
  finetune.write_mrpc(glue_dir, n_train=8, n_dev=4, n_test=3)
  finetune.write_cola(glue_dir)
  glue_fixtures.write_race(str(root / "race_data"))
  return types.SimpleNamespace(
      root=root, spm=spm, squad_spm=squad_spm, glue=glue_dir,
      race=str(root / "race_data"),
      custom_pair=_custom_data(str(root / "custom_pair"), pair=True),
      custom_single=_custom_data(str(root / "custom_single"), pair=False),
      config=write_tiny_config(root / "albert_config.json"),
      squad_config=write_tiny_config(root / "squad_config.json", vocab_size=200,
                                     **squad_helpers.TINY_CONFIG_OVERRIDES),
      pretraining_data=training_helpers.make_pretraining_data(
          root / "pretraining_data", num_files=1, corpus_bytes=20_000, repeats=2))


# ----------------------------------------------------------------------------- command lines
def _classifier_args(a, job, style, cwd, out):
  """run_classifier.py's flags of `job` (tiny), paths in `style` as seen from `cwd`."""
  p = lambda path: _path(style, cwd, path)
  args = [f"--output_dir={p(out)}", f"--albert_config_file={p(a.config)}",
          f"--spm_model_file={p(a.spm)}", "--max_seq_length=32", "--train_step=2",
          "--save_checkpoints_steps=2", "--warmup_step=1", "--learning_rate=1e-3",
          "--train_batch_size=4", "--eval_batch_size=8", "--predict_batch_size=8"]
  if job in ("mrpc", "cola"):
    args += [f"--task_name={job.upper() if job == 'mrpc' else 'CoLA'}",
             f"--data_dir={p(a.glue)}"]
  else:
    args += ["--task_name=custom", f"--data_dir={p(getattr(a, job))}",
             "--text_a_column=sentence", "--id_column=id"]
    if job == "custom_pair":
      args.append("--text_b_column=other")
  return args


def _race_args(a, style, cwd, out):
  p = lambda path: _path(style, cwd, path)
  return [f"--output_dir={p(out)}", f"--albert_config_file={p(a.config)}",
          f"--spm_model_file={p(a.spm)}", f"--data_dir={p(a.race)}", "--max_seq_length=48",
          "--max_qa_length=16", "--train_step=2", "--save_checkpoints_steps=2",
          "--warmup_step=1", "--learning_rate=1e-3", "--train_batch_size=2",
          "--eval_batch_size=4", "--predict_batch_size=4"]


def _squad_args(a, version, style, cwd, out, train=False, predict=False):
  p = lambda path: _path(style, cwd, path)
  data = str(squad_helpers.TINY_V1 if version == "v1" else squad_helpers.TINY_V2)
  args = [f"--output_dir={p(out)}", f"--albert_config_file={p(a.squad_config)}",
          f"--spm_model_file={p(a.squad_spm)}", "--max_seq_length=96", "--doc_stride=32",
          "--max_query_length=16", "--train_batch_size=5", "--predict_batch_size=8",
          "--num_train_epochs=1", "--save_checkpoints_steps=2", "--learning_rate=1e-3",
          "--n_best_size=3", "--max_answer_length=10"]
  if train:
    args.append(f"--train_file={p(data)}")
  if predict:
    args.append(f"--predict_file={p(data)}")
  return args


def _pretraining_args(a, style, cwd, out):
  p = lambda path: _path(style, cwd, path)
  return [f"--output_dir={p(out)}", f"--albert_config_file={p(a.config)}",
          f"--input_file={p(a.pretraining_data)}", "--max_seq_length=32",
          "--max_predictions_per_seq=5", "--train_batch_size=4", "--eval_batch_size=4",
          "--num_train_steps=2", "--num_warmup_steps=1", "--save_checkpoints_steps=2",
          "--max_eval_steps=2", "--learning_rate=1e-3"]


def _run_module(module, args, cwd, timeout=900):
  """`python -m <module> <args>` in `cwd`, as run_script runs a script."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO)
  return subprocess.run([sys.executable, "-m", module] + list(args), capture_output=True,
                        text=True, cwd=cwd, env=env, timeout=timeout, check=False)


# ----------------------------------------------------------------------------- jobs
class Jobs:
  """Script runs started once each on a small thread pool (trained dirs are submitted first, so
  a mode waiting for its trained dir never holds the pool while that dir waits to start)."""

  def __init__(self):
    self.pool = concurrent.futures.ThreadPoolExecutor(WORKERS)
    self.futures = {}

  def submit(self, key, fn):
    if key not in self.futures:
      self.futures[key] = self.pool.submit(fn)
    return self.futures[key]

  def result(self, key):
    return self.futures[key].result()


def _job_dir(a, *parts):
  path = os.path.join(str(a.root), "runs", *parts)
  os.makedirs(path, exist_ok=True)
  return path


def _trained(a, job):
  """The job's training run alone (relative paths, run from its folder): the trained dir every
  eval/predict/export mode copies."""
  cwd = _job_dir(a, job, "train")
  out = os.path.join(cwd, "out")
  if job == "mrpc":
    proc = scripts.run_script("run_classifier.py", _classifier_args(a, job, "relative", cwd, out)
                              + ["--do_train"], cwd)
  elif job == "race":
    proc = scripts.run_script("run_race.py", _race_args(a, "relative", cwd, out) + [
        "--do_train", "--nodo_eval"], cwd)  # --do_eval is on by default (official)
  elif job == "squad_v1":
    # run_squad.py --do_train with --predict_file but no --do_predict: trains (issue 30).
    proc = scripts.run_script("run_squad.py", _squad_args(a, "v1", "relative", cwd, out,
                                                          train=True, predict=True) + [
        "--do_train"], cwd)
  elif job == "squad_v2":
    proc = scripts.run_script("run_squad_v2.py", _squad_args(a, "v2", "relative", cwd, out,
                                                             train=True) + ["--do_train"], cwd)
  elif job == "pretraining":
    proc = scripts.run_script("run_pretraining.py", _pretraining_args(a, "relative", cwd, out)
                              + ["--do_train"], cwd)
  else:
    raise ValueError(job)
  return types.SimpleNamespace(job=job, mode="train", cwd=cwd, out=out, export=None, proc=proc)


def _start(a, job, mode, jobs, make_args, script):
  """A mode of `job` in its own folder: a copy of the trained dir (eval/predict/export alone)
  or a new output dir (modes that train)."""
  def fn():
    cwd = _job_dir(a, job, mode)
    out = os.path.join(cwd, "out")
    export = os.path.join(cwd, "export")
    if "train" not in _words(mode):
      trained = jobs.result((job, "train"))
      if trained.proc.returncode != 0:
        return types.SimpleNamespace(job=job, mode=mode, cwd=cwd, out=out, export=export,
                                     proc=trained.proc, skipped="the training run failed")
      shutil.copytree(trained.out, out)
    args, flags = make_args(cwd, out, export)
    proc = scripts.run_script(script, args + flags, cwd)
    return types.SimpleNamespace(job=job, mode=mode, cwd=cwd, out=out, export=export,
                                 proc=proc)
  return fn


@pytest.fixture(scope="module")
def jobs(request, assets):
  a = assets
  pool = Jobs()
  selected = {item.name for item in request.session.items if item.module is request.module}
  wanted = lambda prefix: any(name.startswith(prefix) for name in selected)
  for job in TRAINED_JOBS:  # first: every mode below waits for one of them
    pool.submit((job, "train"), lambda job=job: _trained(a, job))
  for job, mode, style in CLASSIFIER_CASES:
    pool.submit((job, mode), _start(
        a, job, mode, pool, lambda cwd, out, export, job=job, mode=mode, style=style: (
            _classifier_args(a, job, style, cwd, out),
            _flags(mode, _path(style, cwd, export))), "run_classifier.py"))
  for job, mode, style in RACE_CASES:
    def race_flags(cwd, out, export, mode=mode, style=style):
      flags = _flags(mode, _path(style, cwd, export))
      # run_race.py trains and evaluates by default (official do_train=do_eval=True): a mode
      # without them says --nodo_train / --nodo_eval.
      flags += [f"--nodo_{w}" for w in ("train", "eval") if w not in _words(mode)]
      return _race_args(a, style, cwd, out), flags
    pool.submit(("race", mode), _start(a, "race", mode, pool, race_flags, "run_race.py"))
  for job, mode, style, script in SQUAD_CASES:
    def squad_flags(cwd, out, export, job=job, mode=mode, style=style):
      words = _words(mode)
      version = job[-2:]
      args = _squad_args(a, version, style, cwd, out, train="train" in words,
                         predict="predict" in words)
      flags = [f"--{w}" for w in ("do_train", "do_predict") if w[3:] in words]
      if "export" in words:
        flags.append(f"--export_dir={_path(style, cwd, export)}")
      return args, flags
    pool.submit((job, mode), _start(a, job, mode, pool, squad_flags, script))
  for mode, style in PRETRAINING_CASES:
    pool.submit(("pretraining", mode), _start(
        a, "pretraining", mode, pool, lambda cwd, out, export, mode=mode, style=style: (
            _pretraining_args(a, style, cwd, out),
            _flags(mode, None) + (["--nodo_train"] if mode == "eval" else [])),
        "run_pretraining.py"))
  if wanted("test_checkpoint_tools"):
    pool.submit(("tools",), lambda: _checkpoint_tools(a, pool))
  yield pool
  pool.pool.shutdown(wait=True, cancel_futures=True)


# ----------------------------------------------------------------------------- checks
def _exists(directory, name):
  return os.path.exists(os.path.join(directory, name))


def _check_run(run):
  assert not getattr(run, "skipped", None), f"{run.job}: {run.skipped}: " + scripts.describe(
      run.proc)
  assert run.proc.returncode == 0, f"{run.job} {run.mode}: " + scripts.describe(run.proc)
  assert "Traceback" not in run.proc.stderr, run.proc.stderr[-3000:]


def _expect(run, present, absent=()):
  missing = [n for n in present if not _exists(run.out, n)]
  unexpected = [n for n in absent if _exists(run.out, n)]
  listing = sorted(os.listdir(run.out)) if os.path.isdir(run.out) else "missing"
  assert not missing and not unexpected, (
      f"{run.job} {run.mode}: missing {missing}, not asked for but written {unexpected}; "
      f"{run.out} holds {listing}")


EVAL_FILES = ["eval_results.txt", "best_trial.txt", "best_checkpoint.json",
              "model.ckpt-best.index"]
SUBMISSION = {"mrpc": "MRPC.tsv", "cola": "CoLA.tsv", "custom_pair": "predictions.tsv",
              "custom_single": "predictions.tsv"}


def _check_export(run, subdir=""):
  base = os.path.join(run.export, subdir) if subdir else run.export
  version = scripts.versioned_export(base)
  assert _exists(version, "variables/variables.index"), version
  assert _exists(run.export, "albert_model.tflite"), sorted(os.listdir(run.export))
  leftovers = [n for n in os.listdir(base) if ".tmp-" in n]
  assert not leftovers, leftovers
  return version


@pytest.mark.parametrize("job, mode, style", CLASSIFIER_CASES,
                         ids=[f"{j}-{m}-{s}" for j, m, s in CLASSIFIER_CASES])
def test_run_classifier(jobs, job, mode, style):
  del style
  run = jobs.result((job, mode))
  _check_run(run)
  words = _words(mode)
  predict_files = ["test_results.tsv", SUBMISSION[job]]
  present = ((["ckpt-2.index", "checkpoint"] if "train" in words else [])
             + (EVAL_FILES if "eval" in words else [])
             + (predict_files if "predict" in words else []))
  absent = (([] if "eval" in words else EVAL_FILES[:3])
            + ([] if "predict" in words else predict_files))
  _expect(run, present, absent)
  if "export" in words:
    _check_export(run)
  else:
    assert not os.path.exists(run.export)


def test_trained_dirs(jobs):
  """The "train" mode of every script (run_classifier.py on MRPC, run_race.py, run_squad.py,
  run_squad_v2.py, run_pretraining.py): exit 0, a checkpoint, no eval/predict outputs."""
  for job in TRAINED_JOBS:
    run = jobs.result((job, "train"))
    _check_run(run)
    _expect(run, ["checkpoint"], ["eval_results.txt", "test_results.tsv", "predictions.json"])


@pytest.mark.parametrize("job, mode, style", RACE_CASES,
                         ids=[f"{m}-{s}" for _, m, s in RACE_CASES])
def test_run_race(jobs, job, mode, style):
  del style
  run = jobs.result((job, mode))
  _check_run(run)
  words = _words(mode)
  predict_files = ["test_results.tsv", "predictions.tsv", "predict_results.txt"]
  present = ((EVAL_FILES if "eval" in words else [])
             + (predict_files if "predict" in words else []))
  absent = (([] if "eval" in words else EVAL_FILES[:3])
            + ([] if "predict" in words else predict_files))
  _expect(run, present, absent)
  if "train" not in words:  # --nodo_train: the trained dir's checkpoint only, no new one
    assert sorted(n for n in os.listdir(run.out) if n.startswith("ckpt-")) == [
        "ckpt-2.data-00000-of-00001", "ckpt-2.index"]
  if "export" in words:
    _check_export(run)


@pytest.mark.parametrize("job, mode, style, script", SQUAD_CASES,
                         ids=[f"{j}-{m}-{s}" for j, m, s, _ in SQUAD_CASES])
def test_run_squad(jobs, job, mode, style, script):
  del style, script
  run = jobs.result((job, mode))
  _check_run(run)
  words = _words(mode)
  predict_files = ["predictions.json", "nbest_predictions.json", "eval_results.txt"] + (
      ["null_odds.json"] if job == "squad_v2" else [])
  if "predict" in words:
    _expect(run, predict_files + ["model.ckpt-best.index", "best_trial.txt"])
  else:
    _expect(run, [], predict_files)
  if "export" in words:
    _check_export(run, "saved_model")
  else:
    assert not os.path.exists(run.export)


@pytest.mark.parametrize("mode, style", PRETRAINING_CASES)
def test_run_pretraining(jobs, mode, style):
  del style
  run = jobs.result(("pretraining", mode))
  _check_run(run)
  _expect(run, ["eval_results.txt", "checkpoint"])
  if mode == "eval":
    assert sorted(n for n in os.listdir(run.out) if n.startswith("ckpt-")) == [
        "ckpt-2.data-00000-of-00001", "ckpt-2.index"]
  blocks = open(os.path.join(run.out, "eval_results.txt"), encoding="utf-8").read()
  assert "global_step = 2" in blocks and "masked_lm_accuracy" in blocks, blocks


# ----------------------------------------------------------------------------- checkpoint tools
def _checkpoint_tools(a, pool):
  """export_savedmodel.py and export_checkpoints.py on a trained pretraining dir and the README's
  converter round trip (official TF1 -> ours -> official TF1), every path relative; then the
  converter from a training output dir (ours -> official TF1), every path absolute."""
  trained = pool.result(("pretraining", "train"))
  mrpc_eval = pool.result(("mrpc", "eval"))
  cwd = _job_dir(a, "tools")
  p = lambda path: _path("relative", cwd, path)
  runs = []
  pretrained = os.path.join(cwd, "pretrained")
  shutil.copytree(trained.out, pretrained)
  shutil.copy(a.config, os.path.join(pretrained, "albert_config.json"))
  runs.append(("export_savedmodel", scripts.run_script("export_savedmodel.py", [
      f"--albert_directory={p(pretrained)}", f"--init_checkpoint={p(pretrained)}",
      f"--spm_model_file={p(a.spm)}", f"--export_path={p(os.path.join(cwd, 'hub'))}"], cwd)))
  finetuned = os.path.join(cwd, "mrpc")
  shutil.copytree(mrpc_eval.out, finetuned)
  shutil.copy(a.config, os.path.join(finetuned, "albert_config.json"))
  runs.append(("export_checkpoints", scripts.run_script("export_checkpoints.py", [
      f"--albert_directory={p(finetuned)}", "--checkpoint_name=model.ckpt-best",
      f"--export_path={p(os.path.join(cwd, 'albert_mrpc', 'model.ckpt'))}"], cwd)))
  config = f"--albert_config_file={p(a.config)}"
  runs.append(("convert tf1->tf2", _run_module("albert_tf.cli.convert", [
      config, f"--input_checkpoint={p(os.path.join(cwd, 'albert_mrpc'))}",
      f"--output_checkpoint={p(os.path.join(cwd, 'mrpc_tf2', 'ckpt'))}"], cwd)))
  runs.append(("convert tf2->tf1", _run_module("albert_tf.cli.convert", [
      config, f"--input_checkpoint={p(os.path.join(cwd, 'mrpc_tf2'))}",
      f"--output_checkpoint={p(os.path.join(cwd, 'mrpc_tf1', 'model.ckpt'))}"], cwd)))
  absolute = lambda path: _path("absolute", cwd, path)
  runs.append(("convert output dir->tf1", _run_module("albert_tf.cli.convert", [
      f"--albert_config_file={absolute(a.config)}", f"--input_checkpoint={absolute(pretrained)}",
      f"--output_checkpoint={absolute(os.path.join(cwd, 'pretraining_tf1', 'model.ckpt'))}"],
      cwd)))
  return types.SimpleNamespace(cwd=cwd, runs=runs)


def test_checkpoint_tools(jobs):
  result = jobs.result(("tools",))
  for name, proc in result.runs:
    assert proc.returncode == 0, f"{name}: " + scripts.describe(proc)
  cwd = result.cwd
  assert _exists(os.path.join(cwd, "hub"), "saved_model.pb")
  for directory in ["albert_mrpc", "mrpc_tf2", "mrpc_tf1", "pretraining_tf1"]:
    with open(os.path.join(cwd, directory, "checkpoint"), encoding="utf-8") as f:
      state = f.read()
    assert os.sep not in state.split("\n")[0], state  # a basename, right from any cwd
  variables = lambda prefix: {k: v for k, v in scripts.checkpoint_variables(
      os.path.join(cwd, prefix)).items() if k != "global_step"}
  clean = variables("albert_mrpc/model.ckpt")  # export_checkpoints: encoder (+ pretraining heads)
  assert "bert/embeddings/word_embeddings" in clean
  assert variables("mrpc_tf1/model.ckpt") == clean
  assert set(clean) <= set(variables("pretraining_tf1/model.ckpt"))


# ----------------------------------------------------------------------------- served exports
def _query(export_dir, *args):
  return _run_module("albert_tf.cli.query_savedmodel", [f"--export_dir={export_dir}", *args],
                     os.path.dirname(export_dir))


@pytest.mark.parametrize("job, extra", [("cola", []), ("custom_single", ["--text_b="])])
def test_query_savedmodel_single_sentence_export(jobs, job, extra):
  """A single-sentence export (CoLA, own text-only data) with --text_a alone, or --text_b=""."""
  run = jobs.result((job, "all"))
  _check_run(run)
  proc = _query(run.export, f"--text_a={SENTENCES[0]}", f"--text_a={SENTENCES[1]}", *extra)
  assert proc.returncode == 0, scripts.describe(proc)
  assert proc.stdout.count("-> label ") == 2 and "B: " not in proc.stdout, proc.stdout
  if job == "cola":  # a second sentence for a single-sentence model: one line
    proc = _query(run.export, f"--text_a={SENTENCES[0]}", f"--text_b={SENTENCES[1]}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, scripts.describe(proc)
    assert scripts.last_line(proc.stderr).startswith("error: ") and "--text_b" in proc.stderr


def test_query_savedmodel_pair_export(jobs):
  """A pair model queried with a pair and with one sentence (text_b "", as the official
  conversion reads a missing second sentence)."""
  run = jobs.result(("mrpc", "export"))
  _check_run(run)
  proc = _query(run.export, f"--text_a={SENTENCES[0]}", f"--text_b={SENTENCES[1]}",
                f"--text_a={SENTENCES[2]}", "--text_b=")
  assert proc.returncode == 0 and proc.stdout.count("-> label ") == 2, scripts.describe(proc)


# ----------------------------------------------------------------------------- signals
def test_sigterm_during_the_export_step_stops_cleanly(jobs, assets):
  """run_classifier.py --export_dir on a trained dir, SIGTERM while the version is written:
  one line, exit 42, no version at the export path, no temporary folder left."""
  trained = jobs.result(("mrpc", "train"))
  _check_run(trained)
  cwd = _job_dir(assets, "mrpc", "export_sigterm")
  out, export = os.path.join(cwd, "out"), os.path.join(cwd, "export")
  shutil.copytree(trained.out, out)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO)
  proc = subprocess.Popen(  # pylint: disable=consider-using-with
      [sys.executable, os.path.join(REPO, "run_classifier.py")]
      + _classifier_args(assets, "mrpc", "relative", cwd, out) + ["--export_dir=export"],
      cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  sent, deadline = False, time.monotonic() + 600
  while proc.poll() is None and time.monotonic() < deadline:
    if os.path.isdir(export) and any(".tmp-" in n for n in os.listdir(export)):
      proc.send_signal(signal.SIGTERM)
      sent = True
      break
    time.sleep(0.005)
  _, stderr = proc.communicate(timeout=600)
  assert sent, f"the export finished before it could be signalled:\n{stderr[-2000:]}"
  assert proc.returncode == 42, f"exit {proc.returncode}:\n{stderr[-3000:]}"
  assert "Traceback" not in stderr
  assert scripts.last_line(stderr).startswith("stopped by SIGTERM:"), stderr[-2000:]
  assert os.listdir(export) == [], sorted(os.listdir(export))
