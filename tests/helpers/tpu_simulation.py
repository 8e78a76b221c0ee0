"""The TPU simulation run of tests/training/test_tpu_simulation.py, in one subprocess.

`python -m tests.helpers.tpu_simulation OUT_DIR` sets 8 logical CPU devices (a v3-8's core
count) before TensorFlow initialises, then for pretraining (LAMB), a GLUE classifier (MRPC),
SQuAD v2 and RACE, through the one runner the run_*.py scripts call:
  * for EIGHT_DEVICE_TASKS (default MRPC; TPU_SIMULATION_EIGHT_DEVICES=all:
    every task): 2 training steps, an evaluation and (MRPC) a prediction under
    MirroredStrategy over the 8 devices, with eval/predict batches padded
    (`--pad_eval_batches`): every dev/test set here has a size the batch does not divide;
  * the same evaluation and prediction of the same checkpoints on one replica, unpadded, and
    on the 8 devices fed by 8 input pipelines (one per replica) under one client, as a TPU
    pod's hosts feed their cores;
  * the whole replica step (forward, loss, backward, clipping, optimizer update, metrics,
    accumulation) compiled with jit_compile=True on one replica (`--xla_whole_step`; XLA has
    no CPU kernel for the cross-replica sum), and for MRPC the eval step too;
  * with TPU_SIMULATION_EIGHT_DEVICES=all (or naming mrpc and mrpc_early_exit): early exit
    (patience 1, a 4-layer checkpoint whose examples leave at different layers) evaluated and
    predicted on the 8 devices, on one replica and compiled by XLA (`_early_exit`; several
    minutes of tracing on 2 cores, so not in the default run);
and writes OUT_DIR/report.json: per task the element specs of every mode, the summaries, the
eval files and prediction files of both runs, for the test to check in many ways.
"""

import contextlib
import json
import os
import shutil
import sys
import time


def _spec_text(spec):
  """[[path, shape, dtype], ...] of an element spec."""
  return [[name, s.shape.as_list(), s.dtype.name] for name, s in _flatten_with_names(spec)]


def _flatten_with_names(spec, prefix=""):
  if isinstance(spec, dict):
    for key in sorted(spec):
      yield from _flatten_with_names(spec[key], f"{prefix}{key}/")
  elif isinstance(spec, (tuple, list)):
    for i, item in enumerate(spec):
      yield from _flatten_with_names(item, f"{prefix}{i}/")
  else:
    yield prefix.rstrip("/"), spec


def _read(path):
  return open(path, encoding="utf-8").read() if os.path.exists(path) else None


def _specs(task, runtime, batch_sizes):
  """Every mode's element spec as the trainer sees it under `runtime` (8 replicas)."""
  from albert_tf.training import strategy as strategy_lib  # pylint: disable=g-import-not-at-top
  from albert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top
  strategy = strategy_lib.make_strategy(runtime)
  trainer = Trainer(task, strategy, **runtime.trainer_kwargs())
  out = {}
  train_batch, eval_batch = batch_sizes
  out["train"] = _spec_text(trainer.inputs.training(train_batch)[1])
  for mode in ("eval", "predict"):
    _, spec, _ = trainer.inputs.evaluation(mode, eval_batch)
    out[mode] = _spec_text(spec)
  return out


def _run_task(name, make_task, run_kwargs, out_dir, prediction_files, report,
              whole_step_eval=False):
  if ONLY and name not in ONLY:
    return
  started = time.time()
  from albert_tf.training import runner  # pylint: disable=g-import-not-at-top
  from albert_tf.training.runtime import RuntimeConfig  # pylint: disable=g-import-not-at-top
  entry = report.setdefault(name, {})
  eight = RuntimeConfig(strategy="mirrored", pad_eval_batches=True, log_every_n_steps=1,
                        steps_per_loop=1, seed=0)
  one = RuntimeConfig(strategy="default", log_every_n_steps=1, steps_per_loop=1, seed=0)
  whole = RuntimeConfig(strategy="default", xla_whole_step=True, log_every_n_steps=1,
                        steps_per_loop=1, seed=0, gradient_accumulation_steps=2)
  if EIGHT_DEVICE_TASKS is not None and name not in EIGHT_DEVICE_TASKS:
    _whole_step(name, make_task, run_kwargs, out_dir, entry, whole, whole_step_eval, started)
    return
  eight_dir = os.path.join(out_dir, name, "eight")
  task = make_task(eight_dir)
  entry["specs"] = _specs(task, eight, (run_kwargs["train_batch_size"],
                                        run_kwargs["eval_batch_size"]))
  base = dict(run_kwargs, do_train=True, do_eval=True)
  first = len(EVAL_COUNTS)
  summary = runner.run(task, runner.RunConfig(output_dir=eight_dir, **base), eight)
  entry["eight"] = _summary(summary)
  entry["eight"]["eval_counts"], first = EVAL_COUNTS[first:], len(EVAL_COUNTS)
  # The same checkpoints evaluated and predicted on one replica, unpadded.
  one_dir = os.path.join(out_dir, name, "one")
  shutil.copytree(eight_dir, one_dir)
  for f in ["eval_results.txt"] + prediction_files:
    if os.path.exists(os.path.join(one_dir, f)):
      os.remove(os.path.join(one_dir, f))
  predictions = len(PREDICTED_IDS)
  summary = runner.run(make_task(one_dir), runner.RunConfig(
      output_dir=one_dir, **dict(base, do_train=False)), one)
  entry["one"] = _summary(summary)
  entry["one"]["predicted_input_ids"] = PREDICTED_IDS[predictions:]
  entry["one"]["eval_counts"] = EVAL_COUNTS[first:]
  for label, directory in (("eight", eight_dir), ("one", one_dir)):
    entry[label + "_files"] = {f: _read(os.path.join(directory, f))
                               for f in ["eval_results.txt"] + prediction_files}
  _whole_step(name, make_task, run_kwargs, out_dir, entry, whole, whole_step_eval, started)
  if name not in PIPELINE_TASKS:
    return
  # Again on the 8 devices, with one input pipeline per replica: a pod's hosts each feeding
  # their own cores, under one client (`_pipeline_per_replica`).
  pipelines_dir = os.path.join(out_dir, name, "pipelines")
  shutil.copytree(one_dir, pipelines_dir)
  for f in ["eval_results.txt"] + prediction_files:
    if os.path.exists(os.path.join(pipelines_dir, f)):
      os.remove(os.path.join(pipelines_dir, f))
  first, predictions = len(EVAL_COUNTS), len(PREDICTED_IDS)
  from albert_tf.training import strategy as strategy_lib  # pylint: disable=g-import-not-at-top
  with _pipeline_per_replica(strategy_lib.make_strategy(eight)):
    summary = runner.run(make_task(pipelines_dir), runner.RunConfig(
        output_dir=pipelines_dir, **dict(base, do_train=False)), eight)
  entry["pipelines"] = _summary(summary)
  entry["pipelines"]["eval_counts"] = EVAL_COUNTS[first:]
  entry["pipelines"]["predicted_input_ids"] = PREDICTED_IDS[predictions:]
  entry["pipelines"]["num_input_pipelines"] = PIPELINES_SEEN[-1]
  entry["pipelines_files"] = {f: _read(os.path.join(pipelines_dir, f))
                              for f in ["eval_results.txt"] + prediction_files}
  entry["seconds"]["pipelines"] = round(time.time() - started - entry["seconds"]["total"], 1)


def _early_exit(out_dir, data_dir, spm, common, report):
  """MRPC with early exit at patience 1: a 4-layer checkpoint whose examples leave at different
  layers (the first of a batch early, another of it at the last layer), evaluated and predicted
  on the 8 devices (padded, uncompiled), on one replica (uncompiled) and compiled whole by XLA
  (one replica, as a TPU compiles every step): report["mrpc_early_exit"][run] holds each run's
  eval_results.txt, test_results.tsv and exit_layers.tsv."""
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks.glue import ClassificationTask, GlueConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.training import runner  # pylint: disable=g-import-not-at-top
  from albert_tf.training.runtime import RuntimeConfig  # pylint: disable=g-import-not-at-top
  from tests.helpers import finetune  # pylint: disable=g-import-not-at-top
  started = time.time()
  records = [os.path.join(out_dir, "mrpc", "eight", f"mrpc_{mode}.tf_record")
             for mode in ("eval", "predict")]  # the MRPC runs' features: the same inputs
  config, prefix, _ = finetune.disagreeing_early_exit_checkpoint(
      os.path.join(out_dir, "early_exit"), records)
  runtimes = {
      "eight": RuntimeConfig(strategy="mirrored", pad_eval_batches=True, seed=0),
      "one": RuntimeConfig(strategy="default", seed=0),
      "whole_step": RuntimeConfig(strategy="default", xla_whole_step=True, seed=0)}
  entry = report.setdefault("mrpc_early_exit", {})
  for label, runtime in runtimes.items():
    run_dir = os.path.join(out_dir, "mrpc_early_exit", label)
    task = ClassificationTask(GlueConfig(
        task_name="MRPC", albert_config=AlbertConfig.from_json_file(config), data_dir=data_dir,
        max_seq_length=32, cached_dir=run_dir, spm_model_file=spm, init_checkpoint=prefix,
        early_exit="patience", early_exit_patience=1))
    runner.run(task, runner.RunConfig(output_dir=run_dir, **dict(
        common, do_train=False, do_eval=True, do_predict=True)), runtime)
    entry[label] = {f: _read(os.path.join(run_dir, f))
                    for f in ("eval_results.txt", "test_results.tsv", "exit_layers.tsv")}
  entry["seconds"] = round(time.time() - started, 1)
  print(f"tpu_simulation: mrpc_early_exit: {entry['seconds']} s", file=sys.stderr, flush=True)


def _whole_step(name, make_task, run_kwargs, out_dir, entry, runtime, with_eval, started):
  """The whole step under XLA (one replica, 2 micro-batches): training, and the eval step
  `with_eval` (each costs an XLA compilation)."""
  from albert_tf.training import runner  # pylint: disable=g-import-not-at-top
  seconds = {"eight_and_one": round(time.time() - started, 1)}
  whole_dir = os.path.join(out_dir, name, "whole_step")
  summary = runner.run(make_task(whole_dir), runner.RunConfig(
      output_dir=whole_dir, **dict(run_kwargs, do_train=True, do_eval=with_eval,
                                   do_predict=False)), runtime)
  entry["whole_step"] = _summary(summary)
  seconds["total"] = round(time.time() - started, 1)
  entry["seconds"] = seconds
  print(f"tpu_simulation: {name}: {seconds}", file=sys.stderr, flush=True)


def _summary(summary):
  def plain(value):
    if isinstance(value, dict):
      return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
      return [plain(v) for v in value]
    if isinstance(value, (int, float, str, bool)) or value is None:
      return value
    try:
      return float(value)
    except (TypeError, ValueError):
      return str(value)
  return plain(summary)


# num_examples of every evaluation this process ran, in order (pretraining does not report it).
EVAL_COUNTS = []


# Per prediction this process ran, the input_ids rows of the examples it yielded, in order.
PREDICTED_IDS = []


def _record_predicted_ids():
  from albert_tf.training import trainer  # pylint: disable=g-import-not-at-top
  original = trainer.Trainer.predict

  def predict(self, *args, **kwargs):
    rows = []
    PREDICTED_IDS.append(rows)
    for features, outputs in original(self, *args, **kwargs):
      rows.extend(features["input_ids"].tolist())
      yield features, outputs
  trainer.Trainer.predict = predict


def _record_eval_counts():
  from albert_tf.training import trainer  # pylint: disable=g-import-not-at-top
  original = trainer.Trainer.evaluate

  def evaluate(self, *args, **kwargs):
    out = original(self, *args, **kwargs)
    EVAL_COUNTS.append((out[0] if isinstance(out, tuple) else out)["num_examples"])
    return out
  trainer.Trainer.evaluate = evaluate


PIPELINES_SEEN = []


@contextlib.contextmanager
def _pipeline_per_replica(strategy):
  """Within: `strategy`'s datasets come from one input pipeline per replica
  (InputReplicationMode.PER_REPLICA), each told so by its InputContext, all under this one
  client, as a TPU pod's hosts feed their cores. PIPELINES_SEEN gets each dataset's pipeline
  count."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  original = strategy.distribute_datasets_from_function

  def per_replica(dataset_fn, options=None):  # pylint: disable=unused-argument
    def counted(ctx):
      PIPELINES_SEEN.append(ctx.num_input_pipelines)
      return dataset_fn(ctx)
    return original(counted, tf.distribute.InputOptions(
        experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA,
        experimental_fetch_to_device=False, experimental_place_dataset_on_device=False))
  strategy.distribute_datasets_from_function = per_replica
  try:
    yield
  finally:
    del strategy.distribute_datasets_from_function


def _one_strategy_per_kind():
  """Every RuntimeConfig of this process makes one and the same strategy per --strategy, as a
  real run has one: two MirroredStrategy objects in a process share collective keys."""
  from albert_tf.training import strategy as strategy_lib  # pylint: disable=g-import-not-at-top
  made, original = {}, strategy_lib.make_strategy

  def make_strategy(runtime):
    if runtime.strategy not in made:
      made[runtime.strategy] = original(runtime)
    return made[runtime.strategy]
  strategy_lib.make_strategy = make_strategy


def main(out_dir):
  from albert_tf.common import console  # pylint: disable=g-import-not-at-top
  console.quiet_startup()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 8)
  tf.config.experimental.enable_op_determinism()
  tf.random.set_seed(0)
  _one_strategy_per_kind()
  _record_eval_counts()
  _record_predicted_ids()
  from albert_tf import tokenization  # pylint: disable=g-import-not-at-top
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks.glue import ClassificationTask, GlueConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks.pretraining import (  # pylint: disable=g-import-not-at-top
      PretrainingConfig, PretrainingTask)
  from albert_tf.tasks.race import RaceConfig, RaceTask  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks.squad import SquadConfig, SquadTask  # pylint: disable=g-import-not-at-top
  from tests.helpers import finetune, squad as squad_helpers  # pylint: disable=g-import-not-at-top
  from tests.helpers import training as helpers  # pylint: disable=g-import-not-at-top
  from tests.helpers.text import make_tiny_spm_model  # pylint: disable=g-import-not-at-top
  from tests.helpers.tiny_config import (  # pylint: disable=g-import-not-at-top
      tiny_albert_config, write_tiny_config)
  os.makedirs(out_dir, exist_ok=True)
  report = {"devices": len(tf.config.list_logical_devices("CPU"))}
  config = write_tiny_config(os.path.join(out_dir, "albert_config.json"))
  spm = make_tiny_spm_model(out_dir)
  # 8 replicas x batch 1 for training; eval/predict batch 8 over sets of 13/11 (not divisible).
  common = dict(train_batch_size=16, eval_batch_size=8, predict_batch_size=8,
                learning_rate=1e-3, train_steps=2, warmup_steps=0, save_checkpoints_steps=2)

  data = helpers.write_synthetic_pretraining_data(os.path.join(out_dir, "pretrain.tfrecord"),
                                                  53)
  _run_task("pretraining", lambda d: PretrainingTask(PretrainingConfig(
      albert_config=AlbertConfig.from_json_file(config), input_file=data,
      max_seq_length=helpers.TINY_SEQ, max_predictions_per_seq=helpers.TINY_PREDS,
      shuffle_seed=1)), dict(common, optimizer="lamb", do_predict=False), out_dir, [], report)

  glue_dir = finetune.write_mrpc(os.path.join(out_dir, "glue"), n_train=16, n_dev=13,
                                 n_test=11)
  _run_task("mrpc", lambda d: ClassificationTask(GlueConfig(
      task_name="MRPC", albert_config=AlbertConfig.from_json_file(config),
      data_dir=os.path.join(glue_dir, "MRPC"), max_seq_length=32, cached_dir=d,
      spm_model_file=spm)), dict(common, do_predict=True), out_dir, ["test_results.tsv"], report,
      whole_step_eval=True)

  if (not ONLY or "mrpc" in ONLY) and (EIGHT_DEVICE_TASKS is None or {
      "mrpc", "mrpc_early_exit"} <= EIGHT_DEVICE_TASKS):
    _early_exit(out_dir, os.path.join(glue_dir, "MRPC"), spm, common, report)

  race_dir = os.path.join(out_dir, "race")
  finetune.write_race(race_dir, files_per_level=3)  # 12 questions per split
  _run_task("race", lambda d: RaceTask(RaceConfig(
      config, race_dir, max_seq_length=32, max_qa_length=8, cached_dir=d,
      spm_model_file=spm)), dict(common, do_predict=False), out_dir, [], report)

  squad_spm = squad_helpers.make_squad_spm_model(out_dir)
  vocab_size = tokenization.FullTokenizer(spm_model_file=squad_spm).sp_model.GetPieceSize()
  squad_config = os.path.join(out_dir, "squad_config.json")
  tiny_albert_config(vocab_size=vocab_size,
                     **squad_helpers.TINY_CONFIG_OVERRIDES).to_json_file(squad_config)
  _run_task("squad_v2", lambda d: SquadTask(SquadConfig(
      AlbertConfig.from_json_file(squad_config), spm_model_file=squad_spm,
      version_2_with_negative=True, train_file=str(squad_helpers.TINY_V2),
      predict_file=str(squad_helpers.TINY_V2), cache_dir=d, max_seq_length=64, doc_stride=32,
      max_query_length=16, shuffle_seed=0)),
      dict(common, do_eval=True), out_dir,
      ["predictions.json", "nbest_predictions.json", "null_odds.json"], report)
  # An eval batch the 8 replicas cannot share: one line, before any work.
  from albert_tf.errors import AlbertError  # pylint: disable=g-import-not-at-top
  from albert_tf.training import runner  # pylint: disable=g-import-not-at-top
  from albert_tf.training.runtime import RuntimeConfig  # pylint: disable=g-import-not-at-top
  bad_dir = os.path.join(out_dir, "bad_batch")
  try:
    runner.run(PretrainingTask(PretrainingConfig(
        albert_config=AlbertConfig.from_json_file(config), input_file=data,
        max_seq_length=helpers.TINY_SEQ, max_predictions_per_seq=helpers.TINY_PREDS)),
        runner.RunConfig(output_dir=bad_dir, **dict(common, do_train=True, do_eval=True,
                                                    eval_batch_size=12)),
        RuntimeConfig(strategy="mirrored"))
    report["bad_batch"] = None
  except AlbertError as e:
    report["bad_batch"] = {"error": str(e), "files": sorted(os.listdir(bad_dir))}
  with open(os.path.join(out_dir, "report.json"), "w", encoding="utf-8") as f:
    json.dump(report, f, indent=1)


# Tasks to run (all when empty): `python -m tests.helpers.tpu_simulation OUT_DIR squad_v2 ...`.
ONLY = set(sys.argv[2:]) if __name__ == "__main__" else set()
# Tasks run on the 8 devices (the others compile their whole step only): each costs about a
# minute of tracing on 2 cores (8 replica copies of the train and eval steps), so the suite runs
# MRPC there, the task with predictions and per-replica input pipelines (the padded eval input
# is one code for every task); TPU_SIMULATION_EIGHT_DEVICES=all runs every task.
_EIGHT = os.environ.get("TPU_SIMULATION_EIGHT_DEVICES", "mrpc")
EIGHT_DEVICE_TASKS = None if _EIGHT == "all" else set(_EIGHT.split(","))
# Tasks evaluated (and predicted) a third time, with one input pipeline per replica: the
# trainer's eval/predict input is one code for every task; MRPC checks counts, metrics and
# ordered predictions (about a minute of tracing on 2 cores).
PIPELINE_TASKS = {"mrpc"}

if __name__ == "__main__":
  main(sys.argv[1])
