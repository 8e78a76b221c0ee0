"""Our training, step for step, against what the OFFICIAL google-research/albert code computed.

The numbers come from tests/fixtures/official_training/, made once by the official code itself
(make_official_trajectory.py there: official modeling, run_pretraining losses, classifier_utils
and optimization.create_optimizer under tf.compat.v1; see its docstring). The runs here go
through the real scripts, from the fixture's initial checkpoint (official TF1 names), on its
records in file order (--shuffle_train_input=false):

  * run_pretraining.py, LAMB, 12 steps (warmup 3, poly decay to 0, clipping), with
    --gradient_accumulation_steps 1, 2 and 4 (K micro-batches must give the step of one K-times
    batch, the masked-LM normaliser included): every step's total / MLM / SOP loss within 1e-4
    relative, the learning rates, and the final weights (converted to the official layout by our
    converter) within 1e-4. run_pretraining.py --do_eval on the official run's final weights: the
    official metric_fn's four metrics and loss.
  * run_classifier.py, AdamW, MRPC, 6 steps: the official converter's features, every step's loss
    and learning rate, the final weights (encoder + head).
  * Unit checks: the global norm our trainer clips with is the dense (TPU, one-hot) norm the
    official code clipped with, not the gather-path one; the learning-rate schedule at every step
    with start_warmup_step and poly_power != 1.

Which step a reported value belongs to: our summary at global step s (after s updates) holds the
loss of the batch of update s (the official step t = s - 1, computed before that update) and the
learning rate the *next* update uses, lr(s).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.paths import FIXTURES_DIR
from tests.helpers.scripts import describe, run_script
from tests.helpers.training import run_pretraining, subprocess_env

FIX = FIXTURES_DIR / "official_training"
CONFIG = str(FIX / "albert_config.json")
LOSS_RTOL = 1e-4
WEIGHT_ATOL = 1e-4


def _json(path):
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def train_scalars(output_dir):
  """{global step: {tag: value}} of the TensorBoard events under <output_dir>/train/."""
  out = {}
  train_dir = os.path.join(output_dir, "train")
  for name in sorted(os.listdir(train_dir)):
    for record in tf.data.TFRecordDataset(os.path.join(train_dir, name)):
      event = tf.compat.v1.Event.FromString(record.numpy())
      for value in event.summary.value:
        number = (float(tf.make_ndarray(value.tensor)) if value.HasField("tensor")
                  else float(value.simple_value))
        out.setdefault(int(event.step), {})[value.tag] = number
  return out


def official_layout(output_dir, step, tmp_dir):
  """Our final checkpoint, converted to the official TF1 layout by our converter -> {name: array}."""
  prefix = os.path.join(tmp_dir, "official_layout", "model.ckpt")
  proc = subprocess.run(
      [sys.executable, "-m", "albert_tf.cli.convert", f"--albert_config_file={CONFIG}",
       f"--input_checkpoint={output_dir}/ckpt-{step}", f"--output_checkpoint={prefix}",
       "--output_format=tf1"],
      capture_output=True, text=True, cwd=tmp_dir, env=subprocess_env(), timeout=300,
      check=False)
  assert proc.returncode == 0, describe(proc)
  reader = tf.train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def assert_losses_match(scalars, official_steps, keys):
  """Our summary at step t + 1 against the official step t, every step, every key."""
  problems = []
  for official in official_steps:
    ours = scalars.get(official["step"] + 1)
    assert ours is not None, f"no summary at step {official['step'] + 1}: {sorted(scalars)}"
    for key in keys:
      want, got = official[key], ours[key]
      if abs(got - want) > LOSS_RTOL * abs(want):
        problems.append(f"step {official['step']} {key}: ours {got:.7g}, official {want:.7g} "
                        f"(rel {abs(got - want) / abs(want):.2e})")
  assert not problems, "\n".join(problems)


def assert_learning_rates_match(scalars, official_steps, num_train_steps):
  """Summary s holds lr(s), the rate of the next update: official step s's rate (0 at the end)."""
  rates = {s["step"]: s["learning_rate"] for s in official_steps}
  rates[num_train_steps] = 0.0  # poly decay reaches 0 at num_train_steps
  problems = [f"summary at step {s}: ours {scalars[s]['learning_rate']:.7g}, official lr({s}) "
              f"{rates[s]:.7g}" for s in range(1, num_train_steps + 1)
              if abs(scalars[s]["learning_rate"] - rates[s]) > 1e-6 * max(rates[s], 1e-3)]
  assert not problems, "\n".join(problems)


def assert_weights_match(ours, official):
  assert sorted(ours) == sorted(official.files), (
      f"missing {sorted(set(official.files) - set(ours))}, "
      f"extra {sorted(set(ours) - set(official.files))}")
  diffs = {name: float(np.max(np.abs(ours[name] - official[name]))) for name in official.files}
  bad = {n: d for n, d in diffs.items() if d > WEIGHT_ATOL}
  assert not bad, "final weights differ from the official run (max abs): " + ", ".join(
      f"{n} {d:.3g}" for n, d in sorted(bad.items(), key=lambda kv: -kv[1]))


# ----------------------------------------------------------------------------- pretraining
PRETRAINING = _json(FIX / "pretraining" / "trajectory.json")
_RUNS = {}


def pretraining_run(accumulation, tmp_path_factory):
  """run_pretraining.py on the fixture, once per accumulation; -> (output_dir, tmp dir)."""
  if accumulation not in _RUNS:
    hp = PRETRAINING["hyperparameters"]
    tmp = str(tmp_path_factory.mktemp(f"official_pretraining_k{accumulation}"))
    output_dir = os.path.join(tmp, "out")
    proc = run_pretraining([
        "--do_train=true", "--do_eval=false",
        f"--input_file={FIX / 'pretraining' / 'train.tfrecord'}",
        f"--init_checkpoint={FIX / 'pretraining' / 'init.ckpt'}",
        f"--albert_config_file={CONFIG}", f"--output_dir={output_dir}",
        f"--train_batch_size={hp['train_batch_size']}",
        f"--max_seq_length={hp['max_seq_length']}",
        f"--max_predictions_per_seq={hp['max_predictions_per_seq']}",
        f"--num_train_steps={hp['num_train_steps']}",
        f"--num_warmup_steps={hp['num_warmup_steps']}",
        f"--learning_rate={hp['learning_rate']}", f"--poly_power={hp['poly_power']}",
        f"--optimizer={hp['optimizer']}", "--shuffle_train_input=false",
        f"--gradient_accumulation_steps={accumulation}", "--log_every_n_steps=1",
        f"--save_checkpoints_steps={hp['num_train_steps']}"], timeout=600)
    assert proc.returncode == 0, describe(proc)
    _RUNS[accumulation] = (output_dir, tmp)
  return _RUNS[accumulation]


@pytest.mark.parametrize("accumulation", [1, 2, 4])
def test_pretraining_losses_match_the_official_run_every_step(accumulation, tmp_path_factory):
  output_dir, _ = pretraining_run(accumulation, tmp_path_factory)
  assert_losses_match(train_scalars(output_dir), PRETRAINING["steps"],
                      ("loss", "mlm_loss", "sop_loss"))


@pytest.mark.parametrize("accumulation", [1, 2, 4])
def test_pretraining_final_weights_match_the_official_run(accumulation, tmp_path_factory):
  output_dir, tmp = pretraining_run(accumulation, tmp_path_factory)
  steps = PRETRAINING["hyperparameters"]["num_train_steps"]
  assert_weights_match(official_layout(output_dir, steps, tmp),
                       np.load(FIX / "pretraining" / "final_weights.npz"))


def test_pretraining_learning_rates_match_the_official_run(tmp_path_factory):
  output_dir, _ = pretraining_run(1, tmp_path_factory)
  assert_learning_rates_match(train_scalars(output_dir), PRETRAINING["steps"],
                              PRETRAINING["hyperparameters"]["num_train_steps"])


def test_pretraining_eval_metrics_match_the_official_eval(tmp_path):
  """The official run_pretraining EVAL (its metric_fn) of the fixture's final weights: weighted
  masked-LM accuracy and mean loss (Σw·CE / Σw), SOP accuracy and loss, and the estimator's loss
  (mean of the batches' total loss). 6 batches of 10 cover the 60 records exactly once, as the
  official eval does (it repeats the records to fill --max_eval_steps and drops the remainder;
  ours reads them once and keeps it: equal here)."""
  hp = PRETRAINING["hyperparameters"]
  official = _json(FIX / "pretraining" / "eval.json")
  evaluation = [e for e in official["evaluations"] if e["eval_batch_size"] == 10][0]
  output_dir = str(tmp_path / "eval")
  proc = run_pretraining([
      "--do_train=false", "--do_eval=true",
      f"--input_file={FIX / 'pretraining' / 'train.tfrecord'}",
      f"--init_checkpoint={FIX / 'pretraining' / official['checkpoint']}",
      f"--albert_config_file={CONFIG}", f"--output_dir={output_dir}",
      f"--max_seq_length={hp['max_seq_length']}",
      f"--max_predictions_per_seq={hp['max_predictions_per_seq']}",
      f"--eval_batch_size={evaluation['eval_batch_size']}",
      f"--max_eval_steps={evaluation['max_eval_steps']}"], timeout=600)
  assert proc.returncode == 0, describe(proc)
  with open(os.path.join(output_dir, "eval_results.txt"), encoding="utf-8") as f:
    ours = dict(line.split(" = ", 1) for line in f.read().splitlines() if " = " in line)
  problems = [f"{key}: ours {ours.get(key)}, official {want:.7g}"
              for key, want in evaluation["results"].items()
              if key not in ours or abs(float(ours[key]) - want) > LOSS_RTOL * abs(want)]
  assert not problems, "\n".join(problems)


# ----------------------------------------------------------------------------- fine-tuning
CLASSIFIER = _json(FIX / "classifier" / "trajectory.json")


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory):
  hp = CLASSIFIER["hyperparameters"]
  tmp = str(tmp_path_factory.mktemp("official_classifier"))
  output_dir = os.path.join(tmp, "out")
  proc = run_script("run_classifier.py", [
      f"--task_name={hp['task_name']}", f"--data_dir={FIX / 'classifier' / 'glue'}",
      f"--spm_model_file={FIX / 'spm.model'}", f"--albert_config_file={CONFIG}",
      f"--init_checkpoint={FIX / 'classifier' / 'init.ckpt'}", f"--output_dir={output_dir}",
      "--do_train=true", "--do_eval=false", "--do_predict=false",
      f"--do_lower_case={str(hp['do_lower_case']).lower()}",
      f"--max_seq_length={hp['max_seq_length']}", f"--train_batch_size={hp['train_batch_size']}",
      f"--train_step={hp['num_train_steps']}", f"--warmup_step={hp['num_warmup_steps']}",
      f"--learning_rate={hp['learning_rate']}", f"--optimizer={hp['optimizer']}",
      "--dropout_prob=0", "--shuffle_train_input=false", "--log_every_n_steps=1",
      f"--save_checkpoints_steps={hp['num_train_steps']}"], cwd=tmp, timeout=600)
  assert proc.returncode == 0, describe(proc)
  return output_dir, tmp, proc


def test_classifier_features_are_the_official_converters(classifier_run):
  output_dir, _, _ = classifier_run
  records = [f for f in os.listdir(output_dir) if f.endswith("train.tf_record")]
  assert len(records) == 1, os.listdir(output_dir)
  official = np.load(FIX / "classifier" / "features.npz")
  names = ("input_ids", "input_mask", "segment_ids", "label_ids")
  ours = {n: [] for n in names}
  for record in tf.data.TFRecordDataset(os.path.join(output_dir, records[0])):
    example = tf.train.Example.FromString(record.numpy())
    for n in names:
      ours[n].append(list(example.features.feature[n].int64_list.value))
  for n in names:
    np.testing.assert_array_equal(np.array(ours[n]), official[n], err_msg=n)


def test_classifier_loads_its_head_from_the_init_checkpoint(classifier_run):
  # The fixture's head (output_weights / output_bias) is the official graph's; a head drawn
  # anew would make every later comparison meaningless.
  _, _, proc = classifier_run
  assert "init.ckpt: loaded 27 variables" in proc.stdout + proc.stderr, proc.stdout[-2000:]


def test_classifier_losses_and_learning_rates_match_the_official_run(classifier_run):
  output_dir, _, _ = classifier_run
  scalars = train_scalars(output_dir)
  assert_losses_match(scalars, CLASSIFIER["steps"], ("loss",))
  assert_learning_rates_match(scalars, CLASSIFIER["steps"],
                              CLASSIFIER["hyperparameters"]["num_train_steps"])


def test_classifier_final_weights_match_the_official_run(classifier_run):
  output_dir, tmp, _ = classifier_run
  assert_weights_match(
      official_layout(output_dir, CLASSIFIER["hyperparameters"]["num_train_steps"], tmp),
      np.load(FIX / "classifier" / "final_weights.npz"))


# ----------------------------------------------------------------------------- unit checks
def test_the_clipped_global_norm_is_the_dense_one():
  """Issue 29, 4b: the official code clips with the dense norm on TPU (one-hot embeddings) and
  with the IndexedSlices norm (repeated ids counted row by row) on the gather path. Ours is the
  dense one: the norm of the gradients exactly as the trainer hands them to the clipping."""
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks.pretraining import PretrainingConfig, PretrainingTask  # pylint: disable=g-import-not-at-top
  from albert_tf.training import steps as steps_lib  # pylint: disable=g-import-not-at-top
  from albert_tf.training import trainer as trainer_lib  # pylint: disable=g-import-not-at-top
  hp = PRETRAINING["hyperparameters"]
  norms = PRETRAINING["step0_global_norm"]
  task = PretrainingTask(PretrainingConfig(
      albert_config=AlbertConfig.from_json_file(CONFIG),
      input_file=str(FIX / "pretraining" / "train.tfrecord"),
      max_seq_length=hp["max_seq_length"], max_predictions_per_seq=hp["max_predictions_per_seq"],
      init_checkpoint=str(FIX / "pretraining" / "init.ckpt"), shuffle_train_input=False))
  trainer = trainer_lib.Trainer(task)
  dataset = task.build_inputs("train", hp["train_batch_size"])
  trainer.build(dataset.element_spec)
  task.initialize(trainer.model)
  features, labels = next(iter(dataset))
  micro = tf.nest.map_structure(lambda t: t[None], (features, labels))  # K = 1 micro-batch
  forward_backward = steps_lib.forward_backward(trainer.model, task, None, trainer.train_metrics,
                                                hp["train_batch_size"])
  loss, _, grads = forward_backward(*micro)
  step0 = PRETRAINING["steps"][0]
  assert abs(float(loss) - step0["loss"]) <= LOSS_RTOL * step0["loss"]
  norm = float(tf.linalg.global_norm(grads))
  # The fixture's two official norms are far enough apart for this test to tell them apart.
  assert abs(norms["gather_clipped"] - norms["one_hot_dense"]) > 1e-3
  assert abs(norm - norms["one_hot_dense"]) <= 1e-5 * norms["one_hot_dense"], (norm, norms)
  assert abs(norm - norms["gather_clipped"]) > 1e-3, (norm, norms)


def test_learning_rate_schedule_with_start_warmup_step_and_poly_power():
  """The official create_optimizer's rate at global steps 0..14 (warmup from step 2, power 0.5)."""
  from albert_tf.training import optimizer as optimizer_lib  # pylint: disable=g-import-not-at-top
  official = _json(FIX / "pretraining" / "lr_schedule.json")
  hp = official["hyperparameters"]
  optimizer = optimizer_lib.create_optimizer(
      hp["optimizer"], hp["learning_rate"], hp["num_train_steps"], hp["num_warmup_steps"],
      start_warmup_step=hp["start_warmup_step"], poly_power=hp["poly_power"])
  problems = []
  for step, want in zip(official["global_steps"], official["learning_rate"]):
    optimizer.iterations.assign(step)
    got = float(optimizer_lib.current_learning_rate(optimizer))
    # Before start_warmup_step the official formula gives a negative rate (a TF1 quirk);
    # ours clamps it to 0, a documented difference (albert_tf/training/optimizer.py).
    expected = max(want, 0.0)
    if abs(got - expected) > 1e-6 * max(abs(expected), 1e-3):
      problems.append(f"global step {step}: ours {got:.7g}, official {want:.7g}")
  assert not problems, "\n".join(problems)
  assert min(official["learning_rate"]) < 0  # the quirk above is in the fixture
