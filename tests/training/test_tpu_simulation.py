"""A TPU simulated on CPU (issue 48): pretraining (LAMB), a GLUE classifier (MRPC), SQuAD v2 and
RACE on 8 logical CPU devices under MirroredStrategy (a v3-8's core count), in one subprocess
(tests/helpers/tpu_simulation.py) checked many ways:

  * every dataset's element spec is fully static (train, and padded eval and predict);
  * the whole replica step (forward, loss, backward, clipping, optimizer update, metrics,
    accumulation over 2 micro-batches) and the eval step compile with jit_compile=True on one
    replica (XLA has no CPU kernel for the cross-replica sum) and train and evaluate;
  * evaluating sets that the batch does not divide (53 pretraining records, 13 MRPC dev
    examples, 12 RACE dev questions, SQuAD v2 features) over 8 replicas with padded batches
    gives the counts and metrics, eval_results.txt and prediction files of one unpadded replica;
  * predictions keep exactly the real examples, in order;
  * with one input pipeline per replica under one client (as a TPU pod's hosts each feed their
    cores), evaluation counts each example once and predictions come back in order.
Also, in this process: the one rule for "on TPU", and the batch-size check before any work.

The suite runs MRPC on the 8 devices and compiles the whole step of all four: pretraining, RACE
and SQuAD v2 on 8 devices cost about 4 more minutes of tracing on 2 cores (8 replica copies of
each step); TPU_SIMULATION_EIGHT_DEVICES=all runs all four there.
"""

import json
import re
import subprocess
import sys

import pytest

from albert_tf.errors import AlbertError
from albert_tf.training import runtime
from tests.helpers import training as helpers
from tests.helpers.paths import REPO

TASKS = ("pretraining", "mrpc", "race", "squad_v2")


def _on_eight_devices(report, task):
  """Skips a check of the 8-device run of a task the simulation compiled only (see
  EIGHT_DEVICE_TASKS in tests/helpers/tpu_simulation.py)."""
  if "eight" not in report[task]:
    pytest.skip(f"{task} ran its whole step only (TPU_SIMULATION_EIGHT_DEVICES=all runs it on "
                "8 devices)")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
  out = tmp_path_factory.mktemp("tpu_simulation")
  proc = subprocess.run([sys.executable, "-m", "tests.helpers.tpu_simulation", str(out)],
                        env=helpers.subprocess_env(), cwd=str(REPO), capture_output=True,
                        text=True, timeout=900)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
  return json.loads((out / "report.json").read_text())


def test_eight_logical_devices(report):
  assert report["devices"] == 8


@pytest.mark.parametrize("task", TASKS)
def test_every_element_spec_is_static(report, task):
  _on_eight_devices(report, task)
  specs = report[task]["specs"]
  assert set(specs) == {"train", "eval", "predict"}
  for mode, spec in specs.items():
    open_dims = [(name, shape) for name, shape, _ in spec if None in shape]
    assert not open_dims, f"{task} {mode}: {open_dims}"
  # Eval/predict: the per-replica batch (8 / 8 replicas = 1) and the padding mask last.
  for mode in ("eval", "predict"):
    assert report[task]["specs"][mode][-1][1:] == [[1], "float32"], specs[mode][-1]


def _numbers(text):
  """{key: value} of eval_results.txt's `key = value` lines (the last of each key)."""
  values = {}
  for line in (text or "").splitlines():
    match = re.match(r"^(\S+) = (\S+)$", line)
    if match:
      values[match.group(1)] = match.group(2)
  return values


@pytest.mark.parametrize("task", TASKS)
def test_padded_eight_replica_eval_equals_one_replica(report, task):
  _on_eight_devices(report, task)
  eight, one = report[task]["eight"], report[task]["one"]
  expected = {"pretraining": 53, "mrpc": 13, "race": 12, "squad_v2": 21}[task]
  if task == "pretraining":
    got, ref = eight["eval"], one["eval"]
  else:
    got, ref = eight["best_result"], one["best_result"]
    assert len(eight["eval_results"]) == len(one["eval_results"]) == 1
    for a, b in zip(eight["eval_results"], one["eval_results"]):
      assert set(a) == set(b)
      for key in a:
        assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-5), (task, key)
  if expected is not None:
    assert eight["eval_counts"] == one["eval_counts"] == [expected]
    assert expected % 8  # the batch does not divide the set
  assert set(got) == set(ref)
  for key in got:
    assert got[key] == pytest.approx(ref[key], rel=1e-4, abs=1e-5), (task, key)
  if task != "pretraining":
    a = _numbers(report[task]["eight_files"]["eval_results.txt"])
    b = _numbers(report[task]["one_files"]["eval_results.txt"])
    assert set(a) == set(b) and len(a) > 3
    for key in a:
      if key == "best_checkpoint":
        assert a[key].rsplit("/", 1)[-1] == b[key].rsplit("/", 1)[-1]
      else:
        assert float(a[key]) == pytest.approx(float(b[key]), rel=1e-4, abs=1e-5), (task, key)


def test_predictions_keep_exactly_the_real_examples_in_order(report):
  mrpc, squad = report["mrpc"], report["squad_v2"]
  got = mrpc["eight_files"]["test_results.tsv"].splitlines()
  ref = mrpc["one_files"]["test_results.tsv"].splitlines()
  assert len(got) == len(ref) == 11  # 11 test examples, predicted in batches of 8
  for a, b in zip(got, ref):
    assert len(a.split("\t")) == len(b.split("\t")) == 2
    for x, y in zip(a.split("\t"), b.split("\t")):
      assert float(x) == pytest.approx(float(y), rel=1e-4, abs=1e-6), (a, b)
  if "eight" not in squad:
    return
  got = json.loads(squad["eight_files"]["predictions.json"])
  ref = json.loads(squad["one_files"]["predictions.json"])
  assert list(got) == list(ref) and got == ref
  got = json.loads(squad["eight_files"]["null_odds.json"])
  ref = json.loads(squad["one_files"]["null_odds.json"])
  assert list(got) == list(ref)
  for key in got:
    assert got[key] == pytest.approx(ref[key], rel=1e-4, abs=1e-4)


def test_one_input_pipeline_per_replica_counts_each_example_once_in_order(report):
  """8 input pipelines under one client (a pod's hosts): every pipeline reads the whole set and
  keeps its chunks of it; the client's results are one replica's, in order (MRPC: the
  trainer's eval/predict input is one code for every task)."""
  task = "mrpc"
  got, one = report[task]["pipelines"], report[task]["one"]
  assert got["num_input_pipelines"] == 8
  expected = {"pretraining": 53, "mrpc": 13, "race": 12, "squad_v2": 21}[task]
  assert got["eval_counts"] == one["eval_counts"] == [expected]
  a, b = (got["eval"], one["eval"]) if task == "pretraining" else (
      got["best_result"], one["best_result"])
  assert set(a) == set(b)
  for key in a:
    assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-5), (task, key)
  # The examples predicted, in order: exactly the test set's, each once (their input_ids rows).
  predicted, ref_ids = got["predicted_input_ids"], one["predicted_input_ids"]
  assert len(predicted) == len(ref_ids) == 1 and len(ref_ids[0]) == 11
  assert len(set(map(tuple, ref_ids[0]))) > 1  # distinguishable examples: order is checked
  assert predicted == ref_ids
  if task == "mrpc":
    rows = report[task]["pipelines_files"]["test_results.tsv"].splitlines()
    ref = report[task]["one_files"]["test_results.tsv"].splitlines()
    assert len(rows) == len(ref) == 11
    for x, y in zip(rows, ref):
      assert [float(v) for v in x.split("\t")] == pytest.approx(
          [float(v) for v in y.split("\t")], rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("task", TASKS)
def test_whole_step_under_xla_trains(report, task):
  whole = report[task]["whole_step"]
  assert whole["num_train_steps"] == 2 and whole["train"]["global_step"] == 2
  assert 0 < whole["train"]["loss"] < 20


def test_eval_step_under_xla_counts_the_real_examples(report):
  whole, one = report["mrpc"]["whole_step"], report["mrpc"]["one"]
  assert whole["best_result"]["num_examples"] == one["best_result"]["num_examples"] == 13


# ------------------------------------------------------------------ in this process
def test_one_rule_for_on_tpu():
  assert runtime.on_tpu("tpu")
  assert runtime.on_tpu("auto", use_tpu=True)
  assert runtime.on_tpu("auto", tpu_name="my-tpu")  # --tpu=NAME alone (the gap of issue 48)
  assert not runtime.on_tpu("mirrored", use_tpu=True)  # an explicit strategy wins
  assert not runtime.on_tpu("auto")
  config = runtime.RuntimeConfig(tpu_name="my-tpu")
  assert config.on_tpu and config.static_shapes and config.trainer_kwargs()["pad_eval_batches"]
  assert runtime.RuntimeConfig(xla_whole_step=True).static_shapes
  plain = runtime.RuntimeConfig(pad_eval_batches=True)
  assert not plain.static_shapes and plain.trainer_kwargs()["pad_eval_batches"]
  assert not runtime.RuntimeConfig().trainer_kwargs()["pad_eval_batches"]
  # Once a strategy exists, one test on the object: either TPUStrategy class, nothing else.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.training import strategy as strategy_lib  # pylint: disable=g-import-not-at-top
  for tpu_class in (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy):
    assert strategy_lib.is_tpu_strategy(object.__new__(tpu_class)), tpu_class
  assert not strategy_lib.is_tpu_strategy(tf.distribute.get_strategy())
  assert not strategy_lib.is_tpu_strategy(tf.distribute.OneDeviceStrategy("/cpu:0"))


def test_tpu_name_alone_turns_bucketing_off():
  """--tpu=NAME (or --tpu_name) alone is a TPU run: length bucketing's auto is off there, as
  with --use_tpu, --strategy=tpu and --xla_whole_step; --strategy=mirrored keeps it."""
  import types  # pylint: disable=g-import-not-at-top
  from albert_tf.cli import finetuning_flags  # pylint: disable=g-import-not-at-top

  def flags(**values):
    base = dict(strategy="auto", use_tpu=False, tpu_name=None, tpu_zone=None, gcp_project=None,
                master=None, precision="fp32", jit_compile=False, gradient_accumulation_steps=1,
                log_every_n_steps=1, iterations_per_loop=1, recompute="none",
                deterministic=False, seed=None, worker_wait_seconds=None, xla_whole_step=False,
                pad_eval_batches=False, bucket_boundaries="auto", max_seq_length=128,
                tpu_connect_timeout=None)
    return types.SimpleNamespace(**dict(base, **values))
  assert finetuning_flags.bucket_boundaries(flags())  # CPU/GPU: on
  for values in (dict(tpu_name="my-tpu"), dict(use_tpu=True), dict(strategy="tpu"),
                 dict(xla_whole_step=True)):
    assert finetuning_flags.bucket_boundaries(flags(**values)) is None, values
  assert finetuning_flags.bucket_boundaries(flags(strategy="mirrored", use_tpu=True))
  with pytest.raises(AlbertError, match="not supported on TPU"):
    finetuning_flags.bucket_boundaries(flags(tpu_name="my-tpu", bucket_boundaries="64,128"))


def test_eval_batch_not_divisible_by_eight_replicas_stops_before_training(report):
  bad = report["bad_batch"]
  assert bad and bad["error"] == ("--eval_batch_size=12 is invalid: must be a multiple of the "
                                  "replicas (8)")
  assert not [f for f in bad["files"] if f.startswith("ckpt")], bad["files"]


def test_batch_size_not_divisible_by_replicas_is_one_line_before_any_work(tmp_path):
  from albert_tf.training import input_distribution  # pylint: disable=g-import-not-at-top
  with pytest.raises(AlbertError, match=r"--eval_batch_size=8 is invalid: must be a multiple "
                     r"of the replicas \(3\)"):
    input_distribution.check_batch_size("--eval_batch_size", 8, 3)
  input_distribution.check_batch_size("--predict_batch_size", 9, 3)
  with pytest.raises(AlbertError, match=r"x --gradient_accumulation_steps \(2\)"):
    input_distribution.check_batch_size("--train_batch_size", 6, 2, 2)


def test_pad_batches_fills_every_replica_with_full_masked_batches():
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.training import input_distribution  # pylint: disable=g-import-not-at-top
  # 7 examples in batches of 2 for 3 replicas: batches of 2, 2, 2, 1 rows become 6 batches of
  # [2, 3] (2 steps of 3 replicas), the mask 1 on exactly the 7 real rows, in order.
  ids = np.arange(21, dtype=np.int32).reshape(7, 3)
  dataset = tf.data.Dataset.from_tensor_slices(({"ids": ids}, {"y": np.arange(7.0)})).batch(2)
  padded = input_distribution.pad_batches(dataset, 2, num_replicas=3, full_length=3)
  spec = padded.element_spec
  assert spec[0]["ids"].shape.as_list() == [2, 3] and spec[2].shape.as_list() == [2]
  batches = list(padded.as_numpy_iterator())
  assert len(batches) == 6
  real = np.concatenate([b[2] for b in batches])
  assert real.tolist() == [1] * 7 + [0] * 5
  kept = input_distribution.keep_real(
      (np.concatenate([b[0]["ids"] for b in batches]), np.float32(3.0)), real)
  np.testing.assert_array_equal(kept[0], ids)
  assert kept[1] == 3.0  # a scalar is left as it is
  # Already a multiple of the replicas: no padding batch is added.
  assert len(list(input_distribution.pad_batches(dataset.take(3), 2, num_replicas=3))) == 3


def test_shard_chunks_gives_each_pipeline_its_chunks_and_the_steps_their_order():
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.training import input_distribution  # pylint: disable=g-import-not-at-top
  # 13 examples in batches of 2 for 2 pipelines of 2 replicas (N = 4): padded to 8 batches.
  dataset = tf.data.Dataset.from_tensor_slices(({"ids": np.arange(13)},)).batch(2)
  padded = input_distribution.pad_batches(dataset, 2, num_replicas=4)
  shares = [list(input_distribution.shard_chunks(padded, 2, p, 2).as_numpy_iterator())
            for p in range(2)]
  assert [len(s) for s in shares] == [4, 4]  # every pipeline runs the same 2 steps
  # Step k: pipeline 0's 2 batches then pipeline 1's, in replica order, are batches 4k..4k+3.
  order = [b for k in range(2) for p in range(2) for b in shares[p][2 * k:2 * k + 2]]
  ids = np.concatenate([b[0]["ids"] for b in order])
  real = np.concatenate([b[1] for b in order])
  assert ids[real > 0].tolist() == list(range(13))
  assert real.tolist() == [1] * 13 + [0] * 3


def test_stop_flag_is_read_between_loops_on_tpu_and_in_a_whole_step():
  """On a TPU (by the one rule) and under --xla_whole_step the trainer checks the stop flag
  between loops; elsewhere the flag is read inside the step."""
  from albert_tf.training import optimizer as optimizer_lib  # pylint: disable=g-import-not-at-top
  from albert_tf.training.trainer import Trainer  # pylint: disable=g-import-not-at-top
  task = helpers.make_toy_task()
  for kwargs, in_graph in (({}, True), ({"on_tpu": True}, False),
                           ({"xla_whole_step": True}, False)):
    trainer = Trainer(task, optimizer_fn=lambda: optimizer_lib.create_optimizer(
        "adamw", 1e-3, 10, 0), **kwargs)
    trainer.train_loop(8)
    assert trainer.stop_read_in_graph is in_graph, kwargs
    # The loop of a run that reads the flag in the step holds the trainer's flag.
    assert (trainer.stop_signals.stop_flag is not None) is in_graph, kwargs
    if kwargs.get("on_tpu"):
      assert trainer.pad_eval_batches  # padded evaluation follows the same rule


def test_early_exit_answers_alike_on_eight_devices_one_replica_and_compiled(report):
  """Early exit's loop compiled by XLA (as on a TPU) keeps static shapes: each example's exit
  layer and answer as uncompiled, on one replica and over 8 padded replicas."""
  if "mrpc_early_exit" not in report:
    pytest.skip("early exit on the 8 devices runs with TPU_SIMULATION_EIGHT_DEVICES=all (or "
                "=mrpc,mrpc_early_exit)")
  runs = report["mrpc_early_exit"]
  exits = {run: runs[run]["exit_layers.tsv"] for run in ("eight", "one", "whole_step")}
  layers = [int(line.split("\t")[1]) for line in exits["one"].splitlines()[1:]]
  assert len(layers) == 11 and len(set(layers)) > 2, exits["one"]  # a split batch
  assert exits["eight"] == exits["one"] == exits["whole_step"], exits
  import numpy as np  # pylint: disable=g-import-not-at-top
  probabilities = {run: np.array([[float(x) for x in line.split("\t")] for line in
                                  runs[run]["test_results.tsv"].splitlines()])
                   for run in exits}
  np.testing.assert_allclose(probabilities["eight"], probabilities["one"], atol=1e-5)
  np.testing.assert_allclose(probabilities["whole_step"], probabilities["one"], atol=1e-5)

  def results(run):
    return dict(line.split(" = ") for line in runs[run]["eval_results.txt"].splitlines()
                if " = " in line)
  for key in ("eval_accuracy", "eval_mean_exit_layer"):
    values = {run: float(results(run)[key]) for run in exits}
    assert values["eight"] == pytest.approx(values["one"]) == pytest.approx(
        values["whole_step"]), (key, values)
