"""Every fine-tuning task through its real script, as a user runs it (issue #12).

For one GLUE task of each kind (SCRIPTED_TASKS: CoLA, MNLI, MISMNLI, AX, MRPC, SST-2, STS-B),
RACE and SQuAD v1.1/v2.0: train -> evaluate every checkpoint -> predict (submission files) ->
export -> a served answer (the GLUE exports: EXPORTED_TASKS), with the official command lines
(run_glue.sh, the official README) on tiny data sets written in the official download layouts
(tests/helpers/glue_fixtures.py). The exports are called in a fresh interpreter that imports
only TensorFlow (+ tensorflow_text), and the served answers must equal the scripts' own test
predictions. QNLI, QQP, RTE and WNLI, which take the same path through the script, have their
readers and submission files checked in process.

Also: an --output_dir holding an official TF1 fine-tuned checkpoint (its predictions must be
those of a NumPy forward pass of its weights, its export serves --threshold_to_export; without
the task head the scripts must stop with exit 2 and one line naming the missing variable).

Multi-aspect tests collect every failed expectation and report them together.
"""

import concurrent.futures
import glob
import math
import os
import re
import shutil
import types

import numpy as np
import pytest

from albert_tf.data import glue
from tests.helpers import albert_numpy
from tests.helpers import glue_fixtures
from tests.helpers import scripts
from tests.helpers import squad as squad_helpers
from tests.helpers.glue_fixtures import GLUE_TASKS
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_config_dict, write_tiny_config

SEQ = 32  # GLUE --max_seq_length
RACE_SEQ, RACE_QA = 48, 16
SQUAD_SEQ = 96
HIDDEN = tiny_config_dict()["hidden_size"]
# The GLUE tasks run through the script: one of each kind (single sentence, pair, three labels
# with MNLI's mismatched twin and AX predicted by its model, regression, run_glue.sh's two-step
# SST-2). QNLI, QQP, RTE and WNLI take MRPC's and MNLI's path through the script (a pair, two
# labels, eval_accuracy); what is their own (the reader's columns, the labels, the submission
# file) is checked in process: test_glue_reader_and_submission_of_the_other_pair_tasks.
SCRIPTED_TASKS = ["CoLA", "MNLI", "MISMNLI", "AX", "MRPC", "SST-2", "STS-B"]
READER_ONLY_TASKS = [t for t in GLUE_TASKS if t not in SCRIPTED_TASKS]
TRAINED_TASKS = [t for t in SCRIPTED_TASKS if GLUE_TASKS[t].has_train]
# The tasks whose runs also export and are served: single sentence (CoLA), pair (MRPC), three
# labels (MNLI), regression (STS-B) and run_glue.sh's export from an eval-only run (SST-2). The
# export does not depend on the task beyond that; each other task's export cost ~13 CPU s.
EXPORTED_TASKS = ["CoLA", "MNLI", "MRPC", "SST-2", "STS-B"]


class Problems:
  """Collects failed expectations so that one test reports all of them."""

  def __init__(self):
    self.items = []

  def check(self, condition, message):
    if not condition:
      self.items.append(message)
    return bool(condition)

  def add(self, message):
    self.items.append(message)

  def done(self):
    assert not self.items, "\n".join(f"- {m}" for m in self.items)


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
  root = tmp_path_factory.mktemp("tasks_e2e")
  spm = make_tiny_spm_model(str(root))
  # A "pretrained" model in the official TF1 layout for --init_checkpoint (as albert_base's
  # model.ckpt-best), with weights large enough that test predictions differ clearly between
  # examples, so comparing served and scripted predictions means something.
  pretrained = albert_numpy.write_official_checkpoint(
      albert_numpy.make_official_weights(tiny_config_dict(), seed=0, heads=True),
      str(root / "albert_pretrained" / "model.ckpt-best"), optimizer_slots=False)
  return types.SimpleNamespace(
      root=root, spm=spm, vocab=spm[:-len(".model")] + ".vocab", init_checkpoint=pretrained,
      config=write_tiny_config(str(root / "albert_config.json")),
      glue_dir=str(root / "glue"), glue_tests=glue_fixtures.write_glue(str(root / "glue")),
      race_dir=str(root / "race_data"),
      race=glue_fixtures.write_race(str(root / "race_data")))


# ----------------------------------------------------------------------------------- jobs
# The script runs are independent subprocesses: the module starts those of the selected tests
# up front, two at a time, in test order (most time is single-threaded: imports, tracing), and
# each test waits for its own.
JOB_WORKERS = 2


class Jobs:
  """Script runs keyed by name, each started once on a small thread pool."""

  def __init__(self, runners):
    self.runners = runners
    self.pool = concurrent.futures.ThreadPoolExecutor(JOB_WORKERS)
    self.futures = {}

  def submit(self, key):
    if key not in self.futures:
      for dependency in self.runners[key].dependencies:
        self.submit(dependency)
      self.futures[key] = self.pool.submit(self.runners[key].fn, self)
    return self.futures[key]

  def result(self, key):
    return self.submit(key).result()


def _job_keys(item):
  """The jobs a collected test needs."""
  params = item.callspec.params if hasattr(item, "callspec") else {}
  name = item.originalname
  if name.startswith("test_glue_"):
    key = ("glue", params["task"])
  elif name == "test_race_train_eval_predict_export_serve":
    key = ("race",)
  elif name == "test_squad_train_eval_predict_export_serve":
    key = ("squad", params["squad_run"])
  elif name == "test_threshold_to_export_is_served":
    key = ("test_classifier_uses_an_official_tf1_finetuned_output_dir",)
  else:
    key = (name,)
  return [key] if key in _RUNNERS else []


@pytest.fixture(scope="module")
def jobs(request, assets):
  runners = {key: types.SimpleNamespace(fn=lambda jobs, f=f: f(assets, jobs),
                                        dependencies=deps)
             for key, (f, deps) in _RUNNERS.items()}
  pool = Jobs(runners)
  for item in request.session.items:
    if item.module is request.module:
      for key in _job_keys(item):
        pool.submit(key)
  yield pool
  pool.pool.shutdown(wait=True, cancel_futures=True)


class Serving:
  """Every export of the module served at once: at the first request, the runs of all selected
  tests that export are awaited and their calls made in two fresh interpreters, one with
  tensorflow_text (raw-text signatures) and one without (SQuAD's token-id export must not need
  it), instead of one interpreter (a TensorFlow start-up) per export. Calls are recorded one by
  one (scripts.serve), so a broken export still fails only its own test."""

  def __init__(self, root, jobs, builders):
    self.root, self.jobs, self.builders = root, jobs, builders
    self.served = None

  def get(self, key):
    """[(call, outputs or {"__error__": ...})] of the job `key`'s export."""
    if self.served is None:
      self._serve_all()
    if isinstance(self.served.get(key), Exception):
      raise self.served[key]
    return self.served.get(key, [])

  def _serve_all(self):
    self.served, groups = {}, {True: [], False: []}
    for key, builder in self.builders.items():
      if key not in self.jobs.futures:  # no selected test needs this run
        continue
      try:
        calls = builder(self.jobs.result(key))
      except Exception as e:  # pylint: disable=broad-except
        self.served[key] = e  # the test that asks for it reports it
        continue
      groups[key[0] != "squad"] += [(key, call) for call in calls]
    for tensorflow_text, keyed in groups.items():
      if not keyed:
        continue
      try:
        results = scripts.serve(str(self.root / f"serving_{int(tensorflow_text)}"),
                                [call for _, call in keyed], tensorflow_text)
      except AssertionError as e:  # the interpreter itself failed: every test of it reports it
        for key, _ in keyed:
          self.served[key] = e
        continue
      for (key, call), result in zip(keyed, results):
        self.served.setdefault(key, []).append((call, result))


@pytest.fixture(scope="module")
def serving(jobs, assets):
  return Serving(assets.root, jobs, {key: (lambda run, f=f: f(assets, run))
                                     for key, f in _SERVING_CALLS.items()})


# ----------------------------------------------------------------------------------- GLUE
def _glue_common(assets, task, output_dir, train_step=4):
  """run_glue.sh's COMMON_ARGS (tiny values), plus the per-task run_task arguments."""
  return [f"--output_dir={output_dir}", f"--data_dir={assets.glue_dir}",
          f"--vocab_file={assets.vocab}", f"--spm_model_file={assets.spm}", "--do_lower_case",
          f"--max_seq_length={SEQ}", "--optimizer=adamw", f"--task_name={task}",
          "--warmup_step=1", "--learning_rate=1e-3", f"--train_step={train_step}",
          "--save_checkpoints_steps=2", "--train_batch_size=4",
          f"--albert_config_file={assets.config}", "--eval_batch_size=3",
          "--predict_batch_size=2"]


def _run_glue(assets, jobs, task):
  """One task's official command line(s); returns what the tests need."""
  root = assets.root / "glue_runs" / task
  out, export = str(root / "out"), str(root / "export")
  os.makedirs(root, exist_ok=True)
  procs = []
  if task == "AX":
    # The diagnostic set is predicted with the MNLI model (GLUE's instructions).
    mnli = jobs.result(("glue", "MNLI"))
    shutil.copytree(mnli.out, out)
    procs.append(scripts.run_script("run_classifier.py", _glue_common(assets, task, out) + [
        "--nodo_train", "--nodo_eval", "--do_predict"] + _export_flag(task, export), str(root)))
  elif task == "SST-2":
    # Exactly as run_glue.sh: a training run, then an eval + predict run (+ export).
    common = _glue_common(assets, task, out)
    procs.append(scripts.run_script("run_classifier.py", common + [
        f"--init_checkpoint={assets.init_checkpoint}", "--do_train", "--nodo_eval",
        "--nodo_predict"], str(root)))
    if procs[-1].returncode == 0:
      procs.append(scripts.run_script("run_classifier.py", common + [
          "--nodo_train", "--do_eval", "--do_predict", f"--export_dir={export}"], str(root)))
  else:
    procs.append(scripts.run_script("run_classifier.py", _glue_common(assets, task, out) + [
        f"--init_checkpoint={assets.init_checkpoint}", "--do_train", "--do_eval",
        "--do_predict"] + _export_flag(task, export), str(root)))
  return types.SimpleNamespace(task=task, spec=GLUE_TASKS[task], root=str(root), out=out,
                               export=export, procs=procs, proc=procs[-1],
                               tests=assets.glue_tests[task])


def _export_flag(task, export):
  return [f"--export_dir={export}"] if task in EXPORTED_TASKS else []


class GlueRuns:
  """task -> its run (started by the `jobs` pool)."""

  def __init__(self, jobs):
    self.jobs = jobs

  def get(self, task):
    return self.jobs.result(("glue", task))


@pytest.fixture(scope="module")
def glue_runs(jobs):
  return GlueRuns(jobs)


def _predict_record(output_dir, task_name):
  """The script's test-set feature TFRecord (official name predict.tf_record, or a cached
  `<task>_predict.tf_record`)."""
  found = sorted(set(glob.glob(os.path.join(output_dir, "*predict*.tf_record"))))
  for preferred in (f"{task_name.lower()}_predict.tf_record", "predict.tf_record"):
    for path in found:
      if os.path.basename(path) == preferred:
        return path
  return found[0] if len(found) == 1 else None


def _export_for_serving(export_dir):
  """The versioned SavedModel if there is one, else the export dir itself (so the served
  answers are still checked when only the TF Serving layout is wrong)."""
  try:
    return scripts.versioned_export(export_dir)
  except AssertionError:
    if os.path.exists(os.path.join(export_dir, "saved_model.pb")):
      return export_dir
    return None


def _glue_calls(run):
  """Serving calls for one task's test set: raw text and tf.Example."""
  export = _export_for_serving(run.export)
  if export is None:
    return []
  text = {"text_a": [e.text_a for e in run.tests]}
  if run.spec.pair:
    text["text_b"] = [e.text_b for e in run.tests]
  calls = [dict(export_dir=export, signature="serving_default", inputs=text)]
  record = _predict_record(run.out, run.task)
  if record:
    calls.append(dict(export_dir=export, signature="tf_example",
                      inputs={"examples": scripts.tf_examples_b64(
                          scripts.read_feature_records(record))}))
  return calls


@pytest.fixture(scope="module")
def glue_served(serving):
  """task -> {signature: outputs}: the task's export served in a fresh interpreter."""
  return lambda run: {c["signature"]: r for c, r in serving.get(("glue", run.task))}


def _check_checkpoint_best(p, output_dir, head_shape):
  """model.ckpt-best in the official TF1 layout, with the task head and global_step."""
  prefix = os.path.join(output_dir, "model.ckpt-best")
  if not p.check(os.path.exists(prefix + ".index"),
                 f"no model.ckpt-best.index in --output_dir (holds "
                 f"{sorted(os.listdir(output_dir))})"):
    return
  names = scripts.checkpoint_variables(prefix)
  p.check("bert/embeddings/word_embeddings" in names,
          f"model.ckpt-best lacks bert/embeddings/word_embeddings (TF1 names); has e.g. "
          f"{sorted(names)[:6]}")
  for name, shape in head_shape.items():
    p.check(list(names.get(name, [])) == list(shape),
            f"model.ckpt-best: {name} should be {list(shape)}, is {names.get(name)}")
  p.check("global_step" in names, "model.ckpt-best lacks global_step")


def _check_eval_blocks(p, output_dir, metric, steps=(2, 4)):
  """One eval_results.txt block per checkpoint, each with the official metric; returns
  {step: metric value}."""
  path = os.path.join(output_dir, "eval_results.txt")
  if not p.check(os.path.exists(path), "no eval_results.txt"):
    return {}
  blocks = scripts.eval_blocks(path)
  p.check(sorted(int(b["global_step"]) for b in blocks) == sorted(steps),
          f"eval_results.txt: one block per checkpoint {list(steps)} expected, found global "
          f"steps {[b['global_step'] for b in blocks]}")
  values = {}
  for block in blocks:
    if p.check(metric in block, f"eval_results.txt block of step {block['global_step']} has "
                                f"no {metric!r} (keys {sorted(block)})"):
      values[int(block["global_step"])] = float(block[metric])
      p.check(math.isfinite(values[int(block["global_step"])]),
              f"{metric} = {block[metric]} at step {block['global_step']}")
  return values


@pytest.mark.parametrize("task", TRAINED_TASKS)
def test_glue_train_and_eval_every_checkpoint(glue_runs, task):
  run = glue_runs.get(task)
  for proc in run.procs:
    assert proc.returncode == 0, scripts.describe(proc)
  p = Problems()
  values = _check_eval_blocks(p, run.out, run.spec.metric)
  _check_checkpoint_best(p, run.out, {
      "output_weights": [max(1, len(run.spec.labels)), HIDDEN],
      "output_bias": [max(1, len(run.spec.labels))]})
  best_trial = os.path.join(run.out, "best_trial.txt")
  if p.check(os.path.exists(best_trial), "no best_trial.txt") and values:
    text = open(best_trial, encoding="utf-8").read().strip()
    match = re.fullmatch(r"(\d+):(\d+):(\S+)", text)
    if p.check(match, f"best_trial.txt is {text!r}, expected <step>:<best step>:<best value>"):
      best_step = max(sorted(values), key=lambda s: (values[s], -s))  # first of the maxima
      p.check(int(match.group(1)) == 4, f"best_trial.txt global step {match.group(1)} != 4")
      p.check(int(match.group(2)) == best_step and
              abs(float(match.group(3)) - values[best_step]) < 1e-6,
              f"best_trial.txt {text!r} but eval_results.txt says best {run.spec.metric} "
              f"{values[best_step]} at step {best_step}")
  p.done()


@pytest.mark.parametrize("task", SCRIPTED_TASKS)
def test_glue_predict_writes_the_submission_file(glue_runs, task):
  run = glue_runs.get(task)
  for proc in run.procs:
    assert proc.returncode == 0, scripts.describe(proc)
  p = Problems()
  path = os.path.join(run.out, run.spec.submission)
  assert os.path.exists(path), (f"no {run.spec.submission} (GLUE leaderboard name) in "
                                f"--output_dir: {sorted(os.listdir(run.out))}")
  header, rows = scripts.read_submission(path)
  p.check(header == "index\tprediction", f"{run.spec.submission} header {header!r}")
  p.check([r[0] for r in rows] == [e.index for e in run.tests],
          f"{run.spec.submission} indices {[r[0] for r in rows]} != test file's "
          f"{[e.index for e in run.tests]}")
  p.check(all(len(r) == 2 for r in rows), f"{run.spec.submission} rows {rows}")
  probabilities = scripts.read_test_results(os.path.join(run.out, "test_results.tsv"))
  p.check(len(probabilities) == len(run.tests),
          f"test_results.tsv has {len(probabilities)} rows for {len(run.tests)} test examples")
  if run.spec.labels:
    p.check(all(r[-1] in run.spec.labels for r in rows),
            f"{run.spec.submission} labels {[r[-1] for r in rows]} not in {run.spec.labels}")
    p.check(probabilities.shape[1:] == (len(run.spec.labels),),
            f"test_results.tsv shape {probabilities.shape}")
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, rtol=1e-5)
    p.check([run.spec.labels[i] for i in probabilities.argmax(-1)] == [r[-1] for r in rows],
            "submission labels are not the argmax of test_results.tsv")
  else:  # STS-B: float scores
    scores = [float(r[-1]) for r in rows]
    p.check(all(0.0 <= s <= 5.0 for s in scores), f"STS-B scores {scores} outside [0, 5]")
    np.testing.assert_allclose(scores, np.clip(probabilities[:, 0], 0, 5), atol=1e-3)
  p.done()


@pytest.mark.parametrize("task", READER_ONLY_TASKS)
def test_glue_reader_and_submission_of_the_other_pair_tasks(assets, tmp_path, task):
  """What QNLI, QQP, RTE and WNLI do not share with MRPC and MNLI's script runs: their files'
  columns in the official download layout, their labels and their submission file."""
  spec, reader = GLUE_TASKS[task], glue.get_task(task)
  assert (tuple(reader.labels), reader.submission_file, reader.best_metric) == (
      tuple(spec.labels), spec.submission, spec.metric)
  for split, count in (("train", glue_fixtures.N_TRAIN), ("dev", glue_fixtures.N_DEV)):
    examples = glue.read_examples(assets.glue_dir, task, split)
    assert len(examples) == count and all(e.text_a and e.text_b for e in examples), examples
    assert {e.label for e in examples} == set(spec.labels), examples
  test = glue.read_examples(assets.glue_dir, task, "test")
  assert [(e.guid, e.text_a, e.text_b) for e in test] == [
      (e.index, e.text_a, e.text_b) for e in assets.glue_tests[task]]
  path = str(tmp_path / spec.submission)
  glue.write_submission(path, reader, test, [i % 2 for i in range(len(test))])
  header, rows = scripts.read_submission(path)
  assert header == "index\tprediction"
  assert rows == [(e.index, spec.labels[i % 2]) for i, e in enumerate(assets.glue_tests[task])]


@pytest.mark.parametrize("task", EXPORTED_TASKS)
def test_glue_export_serves_the_test_predictions(glue_runs, glue_served, task):
  run = glue_runs.get(task)
  assert run.proc.returncode == 0, scripts.describe(run.proc)
  p = Problems()
  try:
    scripts.versioned_export(run.export)
  except AssertionError as e:
    p.add(str(e))
  served = glue_served(run)
  p.check(_predict_record(run.out, task), f"no predict tf_record in {run.out}")
  _, rows = scripts.read_submission(os.path.join(run.out, run.spec.submission))
  expected = scripts.read_test_results(os.path.join(run.out, "test_results.tsv"))
  listing = sorted(os.listdir(run.export)) if os.path.isdir(run.export) else "missing"
  for signature in ("serving_default", "tf_example"):
    if p.check(signature in served, f"{signature}: not served (export dir: {listing})"):
      _check_served_classification(p, signature, served[signature], expected,
                                   [r[-1] for r in rows], run.spec.labels)
  p.done()


def _check_served_classification(p, name, out, expected_probabilities, expected_labels,
                                 labels, atol=1e-6):
  """Served outputs == the script's test predictions. atol: served and scripted runs use the
  same float32 weights (measured differences <= 6e-8); 1e-4 against the float64 NumPy model."""
  if "__error__" in out:
    p.add(f"{name}: {out['__error__']}")
    return
  missing = [k for k in ("probabilities", "predictions") if k not in out]
  p.check(not missing, f"{name}: outputs {sorted(out)} lack the official {missing}")
  probabilities = out.get("probabilities")
  if probabilities is not None:
    probabilities = np.asarray(probabilities, np.float64).reshape(len(expected_labels), -1)
    if p.check(probabilities.shape == expected_probabilities.shape,
               f"{name}: probabilities shape {probabilities.shape} vs test_results.tsv "
               f"{expected_probabilities.shape}"):
      p.check(np.allclose(probabilities, expected_probabilities, atol=atol),
              f"{name}: served probabilities {probabilities.tolist()} != test_results.tsv "
              f"{expected_probabilities.tolist()}")
  # The comparison only means something if the examples' predictions differ clearly.
  p.check(len(expected_probabilities) < 2 or
          np.ptp(expected_probabilities, axis=0).max() > 20 * atol,
          f"{name}: the test predictions are nearly identical across examples "
          f"({expected_probabilities.tolist()}): the served comparison cannot tell them apart")
  predictions = out.get("predictions", out.get("label_id", out.get("score")))
  if predictions is None:
    return
  predictions = np.ravel(predictions)
  if labels:
    served = [labels[int(i)] for i in predictions]
    p.check(served == list(expected_labels),
            f"{name}: served labels {served} != submission {list(expected_labels)}")
  else:
    p.check(np.allclose(np.clip(predictions.astype(np.float64), 0, 5),
                        [float(v) for v in expected_labels], atol=1e-3),
            f"{name}: served scores {predictions.tolist()} != submission {expected_labels}")


# ----------------------------------------------------------------------------------- RACE
def _race_common(assets, output_dir, train_step=4):
  """The official README's run_race command line (tiny values)."""
  return [f"--albert_config_file={assets.config}", f"--output_dir={output_dir}",
          f"--train_file={os.path.join(output_dir, 'train.tf_record')}",
          f"--eval_file={os.path.join(output_dir, 'eval.tf_record')}",
          f"--data_dir={assets.race_dir}", f"--spm_model_file={assets.spm}",
          f"--max_seq_length={RACE_SEQ}", f"--max_qa_length={RACE_QA}",
          "--train_batch_size=2", "--eval_batch_size=3", "--learning_rate=1e-3",
          f"--train_step={train_step}", "--warmup_step=1", "--save_checkpoints_steps=2"]


def _run_race(assets, jobs):
  del jobs
  root = assets.root / "race_run"
  out, export = str(root / "out"), str(root / "export")
  os.makedirs(root, exist_ok=True)
  proc = scripts.run_script("run_race.py", _race_common(assets, out) + [
      f"--init_checkpoint={assets.init_checkpoint}", "--do_train", "--do_eval", "--do_predict",
      f"--export_dir={export}"], str(root))
  return types.SimpleNamespace(root=str(root), out=out, export=export, proc=proc)


@pytest.fixture(scope="module")
def race_run(jobs):
  return jobs.result(("race",))


def _race_calls(assets, out, export):
  export = _export_for_serving(export)
  if export is None:
    return []
  test = assets.race["test"]
  calls = [dict(export_dir=export, signature="serving_default",
                inputs={"article": [q[1] for q in test], "question": [q[2] for q in test],
                        "options": [q[3] for q in test]})]
  record = _predict_record(out, "race")
  if record:
    calls.append(dict(export_dir=export, signature="tf_example", inputs={
        "examples": scripts.tf_examples_b64(scripts.read_feature_records(record))}))
  return calls


def test_race_train_eval_predict_export_serve(race_run, assets, serving):
  assert race_run.proc.returncode == 0, scripts.describe(race_run.proc)
  p = Problems()
  out = race_run.out
  _check_eval_blocks(p, out, "eval_accuracy")
  n_dev = len(assets.race["dev"])
  if os.path.exists(os.path.join(out, "eval_results.txt")):
    for block in scripts.eval_blocks(os.path.join(out, "eval_results.txt")):
      p.check(block.get("num_examples") == str(n_dev),
              f"eval of step {block['global_step']} counted num_examples = "
              f"{block.get('num_examples')}, the dev set has {n_dev} questions (each must be "
              f"read once: all.txt, not also the per-passage files)")
  _check_checkpoint_best(p, out, {"output_weights": [1, HIDDEN], "output_bias": [1]})
  test = assets.race["test"]
  probabilities = scripts.read_test_results(os.path.join(out, "test_results.tsv"))
  p.check(probabilities.shape == (len(test), 4),
          f"test_results.tsv shape {probabilities.shape}, the test set has {len(test)} "
          f"questions x 4 options")
  predicted = ["ABCD"[i] for i in probabilities.argmax(-1)] if probabilities.ndim == 2 else []
  # The official run_race evaluates the (answered) test set into predict_results.txt.
  results_file = os.path.join(out, "predict_results.txt")
  if p.check(os.path.exists(results_file), "no predict_results.txt"):
    lines = open(results_file, encoding="utf-8").read().splitlines()
    values = dict(l.split(" = ") for l in lines[1:])
    accuracy = float(np.mean([a == answer for a, (*_, answer) in zip(predicted, test)]))
    p.check(lines[0] == "***** Predict results *****" and "best" in values,
            f"predict_results.txt is not in the official form: {lines}")
    p.check(abs(float(values.get("eval_accuracy", -1)) - accuracy) < 1e-9,
            f"predict_results.txt eval_accuracy {values.get('eval_accuracy')} != {accuracy}")
  try:
    scripts.versioned_export(race_run.export)
  except AssertionError as e:
    p.add(str(e))
  served = serving.get(("race",))
  calls = [call for call, _ in served]
  p.check(len(calls) == 2, f"serving calls {[c['signature'] for c in calls]} (no export or "
                           f"no predict tf_record)")
  if probabilities.shape == (len(test), 4):
    for call, result in served:
      _check_served_classification(p, call["signature"], result, probabilities, predicted,
                                   list("ABCD"))
  p.done()


# ----------------------------------------------------------------------------------- SQuAD
def _run_squad(assets, jobs, version):
  del jobs
  data = str(squad_helpers.TINY_V1 if version == "v1.1" else squad_helpers.TINY_V2)
  root = assets.root / f"squad_{version}"
  out, export = str(root / "out"), str(root / "export")
  os.makedirs(out, exist_ok=True)
  # 10 (v1.1) / 6 (v2.0) questions, 2 epochs: 4 steps, checkpoints 2 and 4.
  batch = 5 if version == "v1.1" else 3
  # The official entry points, run_squad_v1.py / run_squad_v2.py, with their command lines.
  script = "run_squad_v1.py" if version == "v1.1" else "run_squad_v2.py"
  proc = scripts.run_script(script, [
      f"--albert_config_file={assets.config}", f"--output_dir={out}", f"--train_file={data}",
      f"--predict_file={data}", f"--train_feature_file={out}/train.tfrecord",
      f"--predict_feature_file={out}/dev.tfrecord",
      f"--predict_feature_left_file={out}/dev_left_file",
      f"--init_checkpoint={assets.init_checkpoint}", f"--spm_model_file={assets.spm}",
      "--do_lower_case", f"--max_seq_length={SQUAD_SEQ}", "--doc_stride=32",
      "--max_query_length=16", "--do_train=true", "--do_predict=true",
      f"--train_batch_size={batch}", "--predict_batch_size=4", "--learning_rate=1e-3",
      "--num_train_epochs=2.0", "--warmup_proportion=.1", "--save_checkpoints_steps=2",
      "--n_best_size=5", "--max_answer_length=10", f"--export_dir={export}",
      # Ours: length buckets; the served full-length model must give the same n-best.
      "--bucket_boundaries=32,64"], str(root))
  return types.SimpleNamespace(version=version, data=data, root=str(root), out=out,
                               export=export, proc=proc)


@pytest.fixture(scope="module", params=["v1.1", "v2.0"])
def squad_run(jobs, request):
  return jobs.result(("squad", request.param))


def _squad_export(run):
  """(versioned export, None) or (None, why not). TF Serving layout: E/<version>/, or the
  official run_squad_v1's E/saved_model/<version>/."""
  error = None
  for base in (run.export, os.path.join(run.export, "saved_model")):
    try:
      return scripts.versioned_export(base), None
    except AssertionError as e:
      error = str(e)
  return None, error


def _squad_features(run):
  names = ["input_ids", "input_mask", "segment_ids"] + (
      ["p_mask"] if run.version == "v2.0" else [])
  features = scripts.read_feature_records(os.path.join(run.out, "dev.tfrecord"),
                                          names + ["unique_ids"])
  return features, features.pop("unique_ids")[:, 0]


def _squad_calls(assets, run):
  """serving_default on the script's own feature file (--predict_feature_file)."""
  del assets
  export, _ = _squad_export(run)
  if not (export and os.path.exists(os.path.join(run.out, "dev.tfrecord"))):
    return []
  features, _ = _squad_features(run)
  return [dict(export_dir=export, signature="serving_default",
               inputs={k: v.tolist() for k, v in features.items()})]


def test_squad_train_eval_predict_export_serve(squad_run, assets, serving):
  import json  # pylint: disable=g-import-not-at-top
  assert squad_run.proc.returncode == 0, scripts.describe(squad_run.proc)
  v2 = squad_run.version == "v2.0"
  out = squad_run.out
  p = Problems()
  values = _check_eval_blocks(p, out, "f1")
  if os.path.exists(os.path.join(out, "eval_results.txt")):
    for block in scripts.eval_blocks(os.path.join(out, "eval_results.txt")):
      key = "exact" if v2 else "exact_match"
      p.check(key in block, f"eval block of step {block['global_step']} lacks {key!r}")
  del values
  head = ({"cls/squad/output_weights": [2, HIDDEN], "cls/squad/output_bias": [2]}
          if not v2 else {})
  _check_checkpoint_best(p, out, head)
  if v2 and os.path.exists(os.path.join(out, "model.ckpt-best.index")):
    names = scripts.checkpoint_variables(os.path.join(out, "model.ckpt-best"))
    for scope in ("start_logits/", "end_logits/", "answer_class/"):
      p.check(any(n.startswith(scope) for n in names),
              f"model.ckpt-best has no official SQuAD v2 head variables under {scope}")
  with open(squad_run.data, encoding="utf-8") as f:
    qids = [qa["id"] for a in json.load(f)["data"] for para in a["paragraphs"]
            for qa in para["qas"]]
  predictions = json.load(open(os.path.join(out, "predictions.json"), encoding="utf-8"))
  nbest = json.load(open(os.path.join(out, "nbest_predictions.json"), encoding="utf-8"))
  p.check(sorted(predictions) == sorted(qids), f"predictions.json keys {sorted(predictions)}")
  if v2:
    p.check(os.path.exists(os.path.join(out, "null_odds.json")), "no null_odds.json")
  # Served answer: the SavedModel's outputs for the script's own feature file, post-processed
  # as the script does, give the script's n-best lists.
  export, error = _squad_export(squad_run)
  p.check(export, error)
  record = os.path.join(out, "dev.tfrecord")
  if p.check(export and os.path.exists(record), "no export or no --predict_feature_file"):
    _, unique_ids = _squad_features(squad_run)
    (_, result), = serving.get(("squad", squad_run.version))
    if p.check("__error__" not in result, f"serving_default: {result.get('__error__')}"):
      served_nbest = _squad_nbest_from_served(squad_run, assets, result, unique_ids, v2)
      for qid in qids:
        p.check([e["text"] for e in served_nbest[0][qid]] == [e["text"] for e in nbest[qid]],
                f"{qid}: served n-best {[e['text'] for e in served_nbest[0][qid]]} != "
                f"nbest_predictions.json {[e['text'] for e in nbest[qid]]}")
      if v2:
        null_odds = json.load(open(os.path.join(out, "null_odds.json"), encoding="utf-8"))
        p.check(all(abs(served_nbest[1][q] - null_odds[q]) < 1e-3 for q in qids),
                f"served null odds {dict(served_nbest[1])} != null_odds.json {null_odds}")
  p.done()


def _squad_nbest_from_served(run, assets, served, unique_ids, v2):
  """The script's own post-processing applied to the served outputs."""
  from albert_tf import tokenization  # pylint: disable=g-import-not-at-top
  from albert_tf.data import squad, squad_postprocess  # pylint: disable=g-import-not-at-top
  del tokenization
  examples = squad.read_squad_examples(run.data, is_training=False)
  settings = squad.conversion_settings(SQUAD_SEQ, 32, 16, True, assets.spm)
  features = squad.load_features_left(os.path.join(run.out, "dev_left_file"), settings,
                                      examples)
  results = {int(uid): {k: v[i] for k, v in served.items()} for i, uid in enumerate(unique_ids)}
  if v2:
    return squad_postprocess.v2_nbest(examples, features, results, 5, 10)
  _, nbest = squad_postprocess.v1_nbest(examples, features, results, 5, 10)
  return nbest, None


# --------------------------------------------------------------- official TF1 output dirs
def _write_finetuned_tf1(output_dir, num_outputs, with_head=True, seed=7):
  """An --output_dir as the official fine-tuning leaves it: TF1 model.ckpt-10 and
  model.ckpt-best (same weights: bert/... + output_weights/output_bias + Adam slots +
  global_step) and a `checkpoint` state file. Returns the weights."""
  cfg = tiny_config_dict()
  weights = albert_numpy.make_official_weights(cfg, seed=seed, heads=False)
  rng = np.random.RandomState(seed + 1)
  if with_head:
    weights["output_weights"] = rng.standard_normal([num_outputs, HIDDEN]).astype(np.float32)
    weights["output_bias"] = (rng.standard_normal([num_outputs]) * 0.5).astype(np.float32)
  os.makedirs(output_dir, exist_ok=True)
  for name in ("model.ckpt-10", "model.ckpt-best"):
    albert_numpy.write_official_checkpoint(weights, os.path.join(output_dir, name),
                                           global_step=10)
  with open(os.path.join(output_dir, "checkpoint"), "w", encoding="utf-8") as f:
    f.write('model_checkpoint_path: "model.ckpt-10"\n'
            'all_model_checkpoint_paths: "model.ckpt-10"\n')
  return weights


def _numpy_probabilities(weights, record, num_choices=None):
  """softmax(pooled @ output_weights.T + output_bias) of the NumPy reference model."""
  cfg = tiny_config_dict()
  f = scripts.read_feature_records(record)
  ids, mask, seg = f["input_ids"], f["input_mask"], f["segment_ids"]
  if num_choices:
    n = len(ids)
    ids, mask, seg = (a.reshape(n * num_choices, -1) for a in (ids, mask, seg))
  pooled = albert_numpy.forward(weights, cfg, ids, mask, seg)["pooled_output"]
  logits = pooled @ weights["output_weights"].T.astype(np.float64) + weights["output_bias"]
  if num_choices:
    logits = logits.reshape(-1, num_choices)
  return albert_numpy.softmax(logits)


def _run_tf1(assets, name, script, num_outputs, with_head, extra_flags):
  """An --output_dir holding an official TF1 fine-tuned checkpoint, then the script on it."""
  root = assets.root / name
  out, export = str(root / "out"), str(root / "export")
  weights = _write_finetuned_tf1(out, num_outputs, with_head=with_head)
  common = (_glue_common(assets, "MRPC", out, train_step=10) if script == "run_classifier.py"
            else _race_common(assets, out, train_step=10))
  proc = scripts.run_script(script, common + extra_flags + [f"--export_dir={export}"],
                            str(root))
  return types.SimpleNamespace(root=root, out=out, export=export, weights=weights, proc=proc)


# With length buckets well below --max_seq_length: the predictions are still the NumPy forward
# pass of the full-length records, row by row (batches are cut, sorted and put back in order).
_GLUE_FROM_OUTPUT_DIR = ["--nodo_train", "--do_eval", "--do_predict", "--bucket_boundaries=8,16"]
# The official --threshold_to_export rides on the one run that exports (a `threshold` output).
_THRESHOLD = ["--threshold_to_export=0.3"]
_RACE_FROM_OUTPUT_DIR = ["--do_train=false", "--do_eval", "--do_predict",
                         "--bucket_boundaries=16,32"]


def _check_tf1_finetuned_predictions(run, task_name, num_choices=None):
  """A run from an official TF1 fine-tuned --output_dir: it succeeded, evaluated the step-10
  checkpoint, and its test_results.tsv is the NumPy forward pass of that checkpoint.

  Returns (Problems, expected probabilities) for the task-specific checks that follow.
  """
  assert run.proc.returncode == 0, scripts.describe(run.proc)
  p = Problems()
  _check_eval_blocks(p, run.out, "eval_accuracy", steps=(10,))
  record = _predict_record(run.out, task_name)
  assert record, f"no predict tf_record in {sorted(os.listdir(run.out))}"
  expected = _numpy_probabilities(run.weights, record, num_choices=num_choices)
  got = scripts.read_test_results(os.path.join(run.out, "test_results.tsv"))
  p.check(got.shape == expected.shape and np.allclose(got, expected, atol=1e-4),
          f"test_results.tsv {got.tolist()} != NumPy forward pass of the checkpoint "
          f"{expected.tolist()} (the official weights were not loaded)")
  return p, expected


def _tf1_mrpc_calls(assets, run):
  return _glue_calls(types.SimpleNamespace(export=run.export, out=run.out, task="MRPC",
                                           spec=GLUE_TASKS["MRPC"],
                                           tests=assets.glue_tests["MRPC"]))


def test_classifier_uses_an_official_tf1_finetuned_output_dir(jobs, serving):
  key = ("test_classifier_uses_an_official_tf1_finetuned_output_dir",)
  run = jobs.result(key)
  p, expected = _check_tf1_finetuned_predictions(run, "mrpc")
  out, export = run.out, run.export
  _, rows = scripts.read_submission(os.path.join(out, "MRPC.tsv"))
  p.check([r[-1] for r in rows] == [str(i) for i in expected.argmax(-1)],
          f"MRPC.tsv labels {[r[-1] for r in rows]} != NumPy argmax")
  served = serving.get(key)
  calls = [call for call, _ in served]
  p.check(len(calls) == 2, f"export {export} not servable: {calls}")
  for call, result in served:
    _check_served_classification(p, call["signature"], result, expected,
                                 [str(i) for i in expected.argmax(-1)], ["0", "1"], atol=1e-4)
  p.done()


def _check_missing_head_error(run):
  proc = run.proc
  assert proc.returncode == 2, scripts.describe(proc)
  line = scripts.last_line(proc.stderr)
  # The error names the real cause: the checkpoint holds the encoder alone, not this task's head.
  assert line.startswith("error:") and re.search(
      r"holds an encoder checkpoint .*no head.* but this command needs a "
      r"(classifier|multiple_choice) model", line), line
  assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
  # Never random weights: nothing predicted, nothing exported.
  assert not os.path.exists(os.path.join(run.out, "test_results.tsv"))
  assert not os.path.exists(run.export) or not os.listdir(run.export)


def test_classifier_output_dir_checkpoint_without_head_fails(jobs):
  _check_missing_head_error(
      jobs.result(("test_classifier_output_dir_checkpoint_without_head_fails",)))


def test_threshold_to_export_is_served(jobs, serving):
  """The official TF1 output dir's run exports with --threshold_to_export=0.3 (the served
  probabilities and labels are checked by the test above): every signature returns it."""
  key = ("test_classifier_uses_an_official_tf1_finetuned_output_dir",)
  run = jobs.result(key)
  assert run.proc.returncode == 0, scripts.describe(run.proc)
  served_dir = _export_for_serving(run.export)
  assert served_dir, f"no SavedModel under {run.export}"
  served = serving.get(key)
  assert len(served) == 2, served
  p = Problems()
  for call, result in served:
    if p.check("__error__" not in result, f"{call['signature']}: {result.get('__error__')}"):
      p.check("threshold" in result and np.allclose(result["threshold"], 0.3),
              f"{call['signature']}: threshold output {result.get('threshold')} (outputs "
              f"{sorted(result)}), expected 0.3")
  p.done()


def test_race_uses_an_official_tf1_finetuned_output_dir(jobs, serving):
  key = ("test_race_uses_an_official_tf1_finetuned_output_dir",)
  run = jobs.result(key)
  p, expected = _check_tf1_finetuned_predictions(run, "race", num_choices=4)
  served = serving.get(key)
  calls = [call for call, _ in served]
  p.check(len(calls) == 2, f"export {run.export} not servable: {calls}")
  for call, result in served:
    _check_served_classification(p, call["signature"], result, expected,
                                 ["ABCD"[i] for i in expected.argmax(-1)], list("ABCD"),
                                 atol=1e-4)
  p.done()


def test_race_output_dir_checkpoint_without_head_fails(jobs):
  _check_missing_head_error(jobs.result(("test_race_output_dir_checkpoint_without_head_fails",)))


# Every script run of this module: key -> (runner(assets, jobs), keys it waits for).
_RUNNERS = {
    **{("glue", t): (lambda a, j, t=t: _run_glue(a, j, t), [("glue", "MNLI")] if t == "AX"
                     else []) for t in SCRIPTED_TASKS},
    ("race",): (_run_race, []),
    **{("squad", v): (lambda a, j, v=v: _run_squad(a, j, v), []) for v in ("v1.1", "v2.0")},
    ("test_classifier_uses_an_official_tf1_finetuned_output_dir",): (
        lambda a, j: _run_tf1(a, "tf1_mrpc", "run_classifier.py", 2, True,
                              _GLUE_FROM_OUTPUT_DIR + _THRESHOLD), []),
    ("test_classifier_output_dir_checkpoint_without_head_fails",): (
        lambda a, j: _run_tf1(a, "tf1_mrpc_headless", "run_classifier.py", 2, False,
                              _GLUE_FROM_OUTPUT_DIR), []),
    ("test_race_uses_an_official_tf1_finetuned_output_dir",): (
        lambda a, j: _run_tf1(a, "tf1_race", "run_race.py", 1, True, _RACE_FROM_OUTPUT_DIR),
        []),
    ("test_race_output_dir_checkpoint_without_head_fails",): (
        lambda a, j: _run_tf1(a, "tf1_race_headless", "run_race.py", 1, False,
                              _RACE_FROM_OUTPUT_DIR), []),
}

# The serving calls of every run that exports: key -> calls(assets, run) (made by `Serving`).
_SERVING_CALLS = {
    **{("glue", t): (lambda a, run: _glue_calls(run)) for t in SCRIPTED_TASKS},
    ("race",): lambda a, run: _race_calls(a, run.out, run.export),
    **{("squad", v): _squad_calls for v in ("v1.1", "v2.0")},
    ("test_classifier_uses_an_official_tf1_finetuned_output_dir",): _tf1_mrpc_calls,
    ("test_race_uses_an_official_tf1_finetuned_output_dir",): (
        lambda a, run: _race_calls(a, run.out, run.export)),
}
