"""Every script with every path flag on a bucket: `ram://` (TensorFlow's in-memory filesystem)
stands in for `gs://`, and the outputs must equal a local run's.

A ram:// filesystem lives only as long as its process, so each test hands one plan to
tests/helpers/on_ram.py: the inputs are copied to ram://, the scripts run one after another in
that process (the same run once with local paths and once with ram:// paths where the outputs
are compared), and the ram:// outputs are copied out for the comparisons here. The driver runs in
an empty working directory with its own TMPDIR and HOME; afterwards both must still be empty:
nothing went to the local disk but temporaries.

Where ram:// and Cloud Storage differ (fileio's docstring lists it), the code takes the path that
is right on both; nothing here depends on a ram:// quirk.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import text as text_helpers
from tests.helpers.paths import REPO
from tests.helpers.tiny_config import write_tiny_config

SEQ, PREDS = 32, 5


def run_plan(tmp_path, name, inputs=(), runs=(), collect=(), listing=(), timeout=900,
             logical_devices=None):
  """Runs a plan through tests/helpers/on_ram.py; returns {run name: record} and the listing."""
  plan_dir = tmp_path / f"{name}_plan"
  work = tmp_path / f"{name}_cwd"
  temp = tmp_path / f"{name}_tmp"
  home = tmp_path / f"{name}_home"
  for directory in (plan_dir, work, temp, home):
    directory.mkdir()
  plan = plan_dir / "plan.json"
  plan.write_text(json.dumps({"inputs": [[str(a), b] for a, b in inputs], "runs": list(runs),
                              "collect": [[a, str(b)] for a, b in collect],
                              "list": list(listing), "logical_devices": logical_devices}))
  env = dict(os.environ, PYTHONPATH=REPO, TMPDIR=str(temp), HOME=str(home),
             CUDA_VISIBLE_DEVICES="")
  env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  proc = subprocess.run([sys.executable, "-m", "tests.helpers.on_ram", str(plan)], cwd=str(work),
                        env=dict(env, PYTHONPATH=f"{REPO}"), capture_output=True, text=True,
                        timeout=timeout, check=False)
  assert proc.returncode == 0, proc.stderr[-4000:]
  # Nothing was written to the local disk outside the temporaries and the collect targets:
  # not in the working directory, not in the home directory.
  assert os.listdir(work) == [], os.listdir(work)
  # (tf_keras writes its own settings file, ~/.keras/keras.json, at import: not a user path.)
  assert [name for name in os.listdir(home) if name != ".keras"] == [], os.listdir(home)
  result = json.loads((plan_dir / "plan.json.result.json").read_text())
  return {run["name"]: run for run in result["runs"]}, result["listing"]


def ok(record):
  assert record["exit"] == 0, (record["name"], record["stderr"][-4000:])
  assert "Traceback" not in record["stderr"], record["stderr"][-4000:]
  return record


def one_line_error(record):
  assert record["exit"] == 2, (record["name"], record["exit"], record["stderr"][-3000:])
  assert "Traceback" not in record["stderr"], record["stderr"][-3000:]
  return [line for line in record["stderr"].splitlines() if line.startswith("error:")][-1]


def checkpoint_values(prefix):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  reader = tf.compat.v1.train.NewCheckpointReader(str(prefix))
  return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
          if not k.startswith("_CHECKPOINTABLE_OBJECT_GRAPH")}


def assert_same_checkpoint(a, b, atol=0.0):
  """Every tensor equal (save_counter aside: a stopped and resumed run saved once more)."""
  va, vb = checkpoint_values(a), checkpoint_values(b)
  for values in (va, vb):
    values.pop("save_counter/.ATTRIBUTES/VARIABLE_VALUE", None)
  assert sorted(va) == sorted(vb)
  for key in va:
    np.testing.assert_allclose(va[key], vb[key], atol=atol, err_msg=key)


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
  """A tiny corpus, its SentencePiece model and the tiny config, on the local disk."""
  root = tmp_path_factory.mktemp("stand_ins")
  spm = text_helpers.make_tiny_spm_model(str(root), vocab_size=400)
  corpus = text_helpers.write_tiny_corpus(str(root / "corpus" / "docs.txt"), repeats=2,
                                          docstring_bytes=20_000)
  config = write_tiny_config(root / "albert_config.json", vocab_size=400)
  return {"root": root, "spm": spm, "vocab": spm[:-len(".model")] + ".vocab",
          "corpus": corpus, "config": str(config)}


# ---------------------------------------------------------------------------------- pretraining
def _pretraining_flags(config, data, output_dir, steps, *extra):
  return [f"--albert_config_file={config}", f"--input_file={data}",
          f"--output_dir={output_dir}", f"--max_seq_length={SEQ}",
          f"--max_predictions_per_seq={PREDS}", "--train_batch_size=4", "--eval_batch_size=4",
          f"--num_train_steps={steps}", "--num_warmup_steps=1", "--learning_rate=0.01",
          "--save_checkpoints_steps=2", "--log_every_n_steps=1", "--shuffle_seed=3",
          "--max_eval_steps=2", "--seed=5"] + list(extra)


def test_pretraining_pipeline_on_a_bucket(stand_ins, tmp_path):
  """train_spm -> create_pretraining_data.py -> run_pretraining.py (train, a SIGTERM stop and
  its resume, --do_eval alone), every path on ram://, equal to the same commands on local paths."""
  bucket = "ram://pretraining-bucket"
  local = tmp_path / "local"
  local.mkdir()
  corpus, spm, config = stand_ins["corpus"], stand_ins["spm"], stand_ins["config"]

  def data_flags(spm_model, corpus_file, out):
    return [f"--input_file={corpus_file}", f"--output_file={out}",
            f"--spm_model_file={spm_model}", "--do_lower_case", f"--max_seq_length={SEQ}",
            f"--max_predictions_per_seq={PREDS}", "--random_seed=3", "--dupe_factor=1",
            "--num_workers=1"]

  spm_flags = ["--vocab_size=400"]
  runs = [
      {"name": "spm local", "script": "-m albert_tf.cli.train_spm",
       "argv": [f"--input_file={corpus}", f"--model_prefix={local}/vocab/spm"] + spm_flags},
      {"name": "spm ram", "script": "-m albert_tf.cli.train_spm",
       "argv": [f"--input_file={bucket}/corpus/docs.txt",
                f"--model_prefix={bucket}/vocab/spm"] + spm_flags},
      {"name": "data local", "script": "create_pretraining_data.py",
       "argv": data_flags(spm, corpus, local / "records" / "train.tfrecord")},
      {"name": "data ram", "script": "create_pretraining_data.py",
       "argv": data_flags(f"{bucket}/30k-clean.model", f"{bucket}/corpus/*.txt",
                          f"{bucket}/records/train.tfrecord")},
      {"name": "train local", "script": "run_pretraining.py",
       "argv": _pretraining_flags(config, local / "records" / "train.tfrecord", local / "out",
                                  4, "--do_train")},
      {"name": "train ram, stopped", "script": "run_pretraining.py", "signal_at": "step 2/",
       "argv": _pretraining_flags(f"{bucket}/albert_config.json",
                                  f"{bucket}/records/*.tfrecord", f"{bucket}/out", 4,
                                  "--do_train")},
      {"name": "train ram, resumed", "script": "run_pretraining.py",
       "argv": _pretraining_flags(f"{bucket}/albert_config.json",
                                  f"{bucket}/records/*.tfrecord", f"{bucket}/out", 4,
                                  "--do_train")},
      {"name": "eval local", "script": "run_pretraining.py",
       "argv": _pretraining_flags(config, local / "records" / "train.tfrecord", local / "out",
                                  4, "--do_eval")},
      {"name": "eval ram", "script": "run_pretraining.py",
       "argv": _pretraining_flags(f"{bucket}/albert_config.json",
                                  f"{bucket}/records/*.tfrecord", f"{bucket}/out", 4,
                                  "--do_eval")},
      {"name": "wrong config on ram", "script": "run_pretraining.py",
       "argv": _pretraining_flags(f"{bucket}/missing_config.json",
                                  f"{bucket}/records/*.tfrecord", f"{bucket}/out2", 4,
                                  "--do_train")},
  ]
  mirror = tmp_path / "mirror"
  records, _ = run_plan(
      tmp_path, "pretraining",
      inputs=[(stand_ins["corpus"], f"{bucket}/corpus/docs.txt"),
              (spm, f"{bucket}/30k-clean.model"), (config, f"{bucket}/albert_config.json")],
      runs=runs, collect=[(bucket, mirror)])
  for name in ("spm local", "spm ram", "data local", "data ram", "train local",
               "train ram, resumed", "eval local", "eval ram"):
    ok(records[name])
  # The vocabulary trained from and into the bucket is the local one, byte for byte.
  assert (mirror / "vocab" / "spm.vocab").read_bytes() == (
      local / "vocab" / "spm.vocab").read_bytes()
  # The records, byte for byte.
  assert (mirror / "records" / "train.tfrecord").read_bytes() == (
      local / "records" / "train.tfrecord").read_bytes()
  # The stop saved a checkpoint on the bucket and said so; the resume went on from it and ended
  # where the uninterrupted local run ended, value for value.
  stopped = records["train ram, stopped"]
  assert stopped["exit"] == 42 and stopped["signalled"], stopped["stderr"][-3000:]
  assert "stopped by SIGTERM" in stopped["stderr"]
  assert "resum" in records["train ram, resumed"]["stderr"].lower()
  assert_same_checkpoint(mirror / "out" / "ckpt-4", local / "out" / "ckpt-4", atol=1e-6)
  # --do_eval alone on the bucket's output dir: the local run's eval results.
  assert (mirror / "out" / "eval_results.txt").read_text() == (
      local / "out" / "eval_results.txt").read_text()
  # A config that is not there: one line naming it.
  assert "missing_config.json" in one_line_error(records["wrong config on ram"])


# ---------------------------------------------------------------------------------- fine-tuning
@pytest.fixture(scope="module")
def finetuning_inputs(stand_ins, tmp_path_factory):
  """The official tarball layout (albert_config.json, 30k-clean.model, model.ckpt-best) and a
  tiny MRPC task in the GLUE layout, on the local disk."""
  from tests.helpers import finetune, model_dirs  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp("finetuning_inputs")
  dirs = model_dirs.write_model_directories(root, stand_ins["spm"], vocab_size=400)
  finetune.write_mrpc(str(root / "glue"), n_train=8, n_dev=5, n_test=3)
  return {"model": dirs[model_dirs.TARBALL], "glue": str(root / "glue")}


def _classifier_flags(model, glue, output_dir, *modes):
  return ["--task_name=MRPC", f"--data_dir={glue}", f"--output_dir={output_dir}",
          f"--albert_config_file={model}/albert_config.json",
          f"--spm_model_file={model}/30k-clean.model",
          f"--init_checkpoint={model}/model.ckpt-best", "--max_seq_length=24",
          "--train_batch_size=4", "--eval_batch_size=4", "--predict_batch_size=4",
          "--train_step=4", "--warmup_step=1", "--save_checkpoints_steps=2", "--seed=5",
          "--learning_rate=1e-3"] + list(modes)


def _serve(export_version, texts_a, texts_b):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  serving = tf.saved_model.load(str(export_version)).signatures["serving_default"]
  return serving(text_a=tf.constant(texts_a), text_b=tf.constant(texts_b))["probabilities"].numpy()


def test_finetuning_scripts_on_a_bucket(finetuning_inputs, tmp_path):
  """run_classifier.py with every path flag on ram:// (data, config, SentencePiece model, the
  official tarball's init checkpoint, output, feature cache, export), in each mode alone and all
  together, equal to the local run; then the export and conversion tools on the bucket."""
  bucket = "ram://finetuning-bucket"
  model, glue = f"{bucket}/albert_base_v2", f"{bucket}/glue"
  local = tmp_path / "local"
  everything = ["--do_train", "--do_eval", "--do_predict"]
  runs = [
      {"name": "local", "script": "run_classifier.py",
       "argv": _classifier_flags(finetuning_inputs["model"], finetuning_inputs["glue"],
                                 local / "out", *everything, f"--export_dir={local}/export")},
      {"name": "ram", "script": "run_classifier.py",
       "argv": _classifier_flags(model, glue, f"{bucket}/out", *everything,
                                 f"--export_dir={bucket}/export", f"--cached_dir={bucket}/cache")},
      {"name": "eval alone", "script": "run_classifier.py",
       "argv": _classifier_flags(model, glue, f"{bucket}/out", "--do_eval",
                                 f"--cached_dir={bucket}/cache")},
      {"name": "predict alone", "script": "run_classifier.py",
       "argv": _classifier_flags(model, glue, f"{bucket}/out", "--do_predict",
                                 f"--cached_dir={bucket}/cache")},
      {"name": "export alone", "script": "run_classifier.py",
       "argv": _classifier_flags(model, glue, f"{bucket}/out", f"--export_dir={bucket}/export")},
      {"name": "query", "script": "-m albert_tf.cli.query_savedmodel",
       "argv": [f"--export_dir={bucket}/export", "--text_a=the first sentence",
                "--text_b=the second sentence"]},
      {"name": "hub export", "script": "export_savedmodel.py",
       "argv": [f"--albert_directory={model}", f"--export_path={bucket}/hub"]},
      {"name": "clean checkpoint", "script": "export_checkpoints.py",
       "argv": [f"--albert_directory={bucket}/out", f"--export_path={bucket}/clean/model.ckpt"]},
      {"name": "convert to hf", "script": "-m albert_tf.cli.convert",
       "argv": [f"--input_checkpoint={bucket}/out/model.ckpt-best",
                f"--albert_config_file={model}/albert_config.json",
                f"--output_checkpoint={bucket}/hf", "--output_format=hf"]},
      {"name": "missing vocabulary", "script": "run_classifier.py",
       "argv": _classifier_flags(model, glue, f"{bucket}/out3", "--do_train",
                                 f"--spm_model_file={bucket}/nowhere/30k-clean.model")},
      {"name": "missing data", "script": "run_classifier.py",
       "argv": _classifier_flags(model, f"{bucket}/no_glue", f"{bucket}/out4", "--do_train")},
  ]
  mirror = tmp_path / "mirror"
  records, _ = run_plan(tmp_path, "finetuning",
                        inputs=[(finetuning_inputs["model"], model),
                                (finetuning_inputs["glue"], glue)],
                        runs=runs, collect=[(bucket, mirror)])
  for name in ("local", "ram", "eval alone", "predict alone", "export alone", "query",
               "hub export", "clean checkpoint", "convert to hf"):
    ok(records[name])
  out, local_out = mirror / "out", local / "out"
  # Training, evaluation and prediction on the bucket equal the local run's (the results name
  # their checkpoints by path).
  assert (out / "eval_results.txt").read_text() == (local_out / "eval_results.txt").read_text(
      ).replace(str(local_out), f"{bucket}/out")
  assert (out / "best_trial.txt").read_text() == (local_out / "best_trial.txt").read_text()
  assert (out / "test_results.tsv").read_text() == (local_out / "test_results.tsv").read_text()
  assert_same_checkpoint(out / "model.ckpt-best", local_out / "model.ckpt-best")
  assert {"mrpc_train.tf_record", "mrpc_eval.tf_record", "mrpc_predict.tf_record"} <= set(
      os.listdir(mirror / "cache"))
  # The export on the bucket: version 1 from the full run, version 2 from --export_dir alone,
  # both whole (saved_model.pb, variables, assets) and answering as the local export.
  versions = sorted((v for v in os.listdir(mirror / "export") if v.isdigit()), key=int)
  assert len(versions) == 2, versions
  for version in versions:
    assert {"saved_model.pb", "variables", "assets"} <= set(os.listdir(mirror / "export" /
                                                                       version))
  texts_a, texts_b = ["the first sentence", "another one"], ["the second sentence", "and more"]
  local_version = local / "export" / [v for v in os.listdir(local / "export") if v.isdigit()][0]
  np.testing.assert_allclose(_serve(mirror / "export" / versions[-1], texts_a, texts_b),
                             _serve(local_version, texts_a, texts_b), atol=1e-6)
  assert "A: the first sentence\nB: the second sentence\n-> label " in records["query"]["stdout"]
  # The tools wrote whole outputs on the bucket.
  assert (mirror / "hub" / "saved_model.pb").exists()
  clean, best = checkpoint_values(mirror / "clean" / "model.ckpt"), checkpoint_values(
      out / "model.ckpt-best")
  for name, value in clean.items():  # the model's variables, unchanged
    np.testing.assert_array_equal(value, best[name], err_msg=name)
  assert {"config.json", "model.safetensors"} <= set(os.listdir(mirror / "hf"))
  # Wrong inputs on the bucket: one line naming them.
  assert "nowhere/30k-clean.model" in one_line_error(records["missing vocabulary"])
  assert "no_glue" in one_line_error(records["missing data"])


# ---------------------------------------------------------------------------------- the docs' TPU recipe
TPU_PAGE = "docs/tpu_and_multi_gpu.md"
DOCS_BUCKET = "gs://my-bucket"


def _recipe_argv(command):
  """A docs command as the simulation runs it: the bucket on ram://, the TPU as 2 logical CPU
  devices, the docs harness's tiny sizes. Returns (script, argv).

  Two devices, not a TPU's 8: this test is about storage (every path on the bucket); the
  8-device runs of the same scripts are tests/integration/test_tpu_simulation.py's, and each
  extra replica multiplies the tracing time of four processes here."""
  import shlex  # pylint: disable=g-import-not-at-top
  from tests.integration.test_readme import TINY_FLAGS  # pylint: disable=g-import-not-at-top
  words = shlex.split(command.replace("$(nproc)", "2").replace(DOCS_BUCKET, "ram://my-bucket"))
  assert words[0] == "python", command
  argv = []
  for word in words[2:]:
    name = word[2:].split("=", 1)[0] if word.startswith("--") else None
    if name in ("tpu", "tpu_name", "use_tpu"):
      argv.append("--strategy=mirrored")  # a TPU's cores: logical CPU devices
    elif name in ("tpu_zone", "gcp_project") or word == "--precision=bf16":
      continue  # where the TPU is; its native precision (not this CPU's)
    elif name == "train_batch_size":
      argv.append("--train_batch_size=4")  # the docs harness's 4: two per device
    elif name in TINY_FLAGS:
      argv.append(f"--{name}={TINY_FLAGS[name]}")
    else:
      argv.append(word)
  if words[1] != "create_pretraining_data.py":
    argv.append("--pad_eval_batches")  # as on a TPU (the rule keys on --tpu, rewritten above)
  return words[1], argv


@pytest.fixture(scope="module")
def docs_stand_ins(tmp_path_factory):
  """The README's stand-ins (albert_base/, corpus/, glue_data/ ...): tests/helpers/readme.py."""
  from tests.helpers import readme  # pylint: disable=g-import-not-at-top
  return readme.build_stand_ins(tmp_path_factory.mktemp("docs_stand_ins"))


def test_docs_tpu_recipe_on_a_bucket(docs_stand_ins, tmp_path):
  """docs/tpu_and_multi_gpu.md's TPU recipe, every command on its page that names the bucket,
  in page order: `gcloud storage cp` copies the stand-ins to the bucket, each `python` command
  runs in a process of its own with 2 logical devices, and the bucket (ram://my-bucket) is
  carried from one process to the next as a real bucket outlives its clients. The export it
  ends with is loaded from the bucket and answers."""
  from tests.helpers import readme  # pylint: disable=g-import-not-at-top
  page = readme.REPO_ROOT / TPU_PAGE
  commands = [c.text for c in readme.readme_commands(page.read_text(encoding="utf-8"), TPU_PAGE)
              if DOCS_BUCKET in c.text]
  bucket = tmp_path / "bucket"  # the bucket's contents between two processes
  bucket.mkdir()
  ran = []
  for index, command in enumerate(commands):
    if command.startswith("gcloud storage cp -r "):
      _, _, _, _, source, target = command.split()
      target = bucket / target[len(DOCS_BUCKET) + 1:]
      import shutil  # pylint: disable=g-import-not-at-top
      shutil.copytree(docs_stand_ins / source, target)
      continue
    if not command.startswith("python "):  # creating the VM and the bucket, TF Serving
      continue
    script, argv = _recipe_argv(command)
    after = tmp_path / f"bucket_{index}"
    records, _ = run_plan(tmp_path, f"step{index}", inputs=[(bucket, "ram://my-bucket")],
                          runs=[{"name": script, "script": script, "argv": argv}],
                          collect=[("ram://my-bucket", after)], logical_devices=2)
    record = ok(records[script])
    if script != "create_pretraining_data.py":
      assert "devices: MirroredStrategy, 2 replicas on 2 x CPU" in record["stderr"]
    bucket = after
    ran.append(script)
  assert ran == ["create_pretraining_data.py", "run_pretraining.py", "run_classifier.py",
                 "run_pretraining.py"], ran
  assert (bucket / "records" / "train.tfrecord").stat().st_size > 0
  assert (bucket / "albert_base_pretrain" / "eval_results.txt").exists()
  assert (bucket / "mnli" / "eval_results.txt").exists()
  assert (bucket / "albert_pod" / "ckpt-2.index").exists()
  # The export TF Serving would read from the bucket: version 1, whole, answering MNLI pairs.
  export = bucket / "serving" / "mnli"
  versions = [name for name in os.listdir(export) if name.isdigit()]
  assert len(versions) == 1, os.listdir(export)
  probabilities = _serve(export / versions[0], ["The cat sat on the mat."],
                         ["A cat is sitting."])
  assert probabilities.shape == (1, 3)
  np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)


# ---------------------------------------------------------------------------------- SQuAD, RACE, own CSV
def _model_flags(model):
  return [f"--albert_config_file={model}/albert_config.json",
          f"--spm_model_file={model}/30k-clean.model",
          f"--init_checkpoint={model}/model.ckpt-best", "--max_seq_length=64", "--seed=5",
          "--train_batch_size=4", "--learning_rate=1e-3", "--save_checkpoints_steps=2"]


def test_squad_race_and_own_files_on_a_bucket(docs_stand_ins, tmp_path):
  """run_squad.py (v2.0: train, predict, export), run_race.py (train, eval) and run_classifier.py
  on your own CSV files (train, eval, predict), every path on ram://, equal to local runs."""
  bucket = "ram://tasks-bucket"
  root, local = docs_stand_ins, tmp_path / "local"

  def squad(where, out, *extra):
    return _model_flags(f"{where}/albert_base") + [
        f"--train_file={where}/train-v2.0.json", f"--predict_file={where}/dev-v2.0.json",
        f"--output_dir={out}", "--version_2_with_negative", "--do_train", "--do_predict",
        "--doc_stride=32", "--max_query_length=16", "--num_train_epochs=1",
        "--predict_batch_size=4"] + list(extra)

  def race(where, out, *extra):
    return _model_flags(f"{where}/albert_base") + [
        f"--data_dir={where}", f"--output_dir={out}", "--do_train", "--do_eval",
        "--max_qa_length=16", "--train_step=2", "--warmup_step=1", "--eval_batch_size=4"
        ] + list(extra)

  def own(where, out, *extra):
    return _model_flags(f"{where}/albert_base") + [
        "--task_name=custom", f"--data_dir={where}/data", f"--output_dir={out}",
        "--text_a_column=text", "--label_column=label", "--do_train", "--do_eval",
        "--do_predict", "--train_step=2", "--warmup_step=1", "--eval_batch_size=4",
        "--predict_batch_size=4"] + list(extra)

  runs = []
  for name, script, make in (("squad", "run_squad.py", squad), ("race", "run_race.py", race),
                             ("own", "run_classifier.py", own)):
    runs.append({"name": f"{name} local", "script": script,
                 "argv": make(root, local / name)})
    extra = ([f"--export_dir={bucket}/squad_export",
              f"--train_feature_file={bucket}/cache/train.tfrecord",
              f"--predict_feature_file={bucket}/cache/predict.tfrecord",
              f"--predict_feature_left_file={bucket}/cache/predict_left.json"]
             if name == "squad" else [f"--cached_dir={bucket}/cache_{name}"])
    runs.append({"name": f"{name} ram", "script": script,
                 "argv": make(bucket, f"{bucket}/{name}", *extra)})
  inputs = [(root / name, f"{bucket}/{name}") for name in (
      "albert_base", "train-v2.0.json", "dev-v2.0.json", "RACE", "data")]
  mirror = tmp_path / "mirror"
  records, _ = run_plan(tmp_path, "tasks", inputs=inputs, runs=runs,
                        collect=[(bucket, mirror)])
  for record in records.values():
    ok(record)
  for name in ("predictions.json", "nbest_predictions.json", "null_odds.json"):
    assert json.loads((mirror / "squad" / name).read_text()) == json.loads(
        (local / "squad" / name).read_text()), name
  # The official run_squad export layout: <export_dir>/saved_model/<version>/ + the TFLite file.
  versions = os.listdir(mirror / "squad_export" / "saved_model")
  assert len(versions) == 1 and versions[0].isdigit(), versions
  assert "saved_model.pb" in os.listdir(mirror / "squad_export" / "saved_model" / versions[0])
  assert {"train.tfrecord", "predict.tfrecord", "predict_left.json"} <= set(
      os.listdir(mirror / "cache"))
  for name in ("race", "own"):
    assert (mirror / name / "eval_results.txt").read_text() == (
        local / name / "eval_results.txt").read_text().replace(str(local / name),
                                                               f"{bucket}/{name}"), name
    assert_same_checkpoint(mirror / name / "model.ckpt-best", local / name / "model.ckpt-best")
  assert (mirror / "own" / "predictions.tsv").read_text() == (
      local / "own" / "predictions.tsv").read_text()
