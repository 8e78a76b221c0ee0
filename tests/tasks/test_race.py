"""The RACE Task: per-level accuracy, and a tiny train/eval/predict run through the runner."""

import os

import numpy as np
import pytest

from albert_tf.errors import AlbertError
from albert_tf.tasks.race import RaceConfig, RaceTask
from tests.helpers import finetune
from tests.helpers.tiny_config import tiny_albert_config, write_tiny_config


def test_race_task_per_level_accuracy(tmp_path):
  task = RaceTask(RaceConfig(tiny_albert_config(), str(tmp_path), max_seq_length=16,
                             max_qa_length=8, cached_dir=str(tmp_path)), tokenizer=object())
  logits = np.eye(4, dtype=np.float32)[[0, 1, 2, 3]]
  labels = {"label_ids": np.array([0, 1, 0, 0]), "level": np.array([0, 0, 1, 1]),
            "is_real_example": np.ones(4, np.float32)}
  outputs = {"logits": logits, "probabilities": logits}
  result, _ = task.reduce_outputs(task.aggregate_outputs(None, None, labels, outputs), "eval")
  assert result["eval_accuracy"] == 0.5
  assert result["middle_accuracy"] == 1.0 and result["high_accuracy"] == 0.0
  with pytest.raises(AlbertError, match="max_qa_length=20 must be in"):
    RaceConfig(tiny_albert_config(), str(tmp_path), max_seq_length=16, max_qa_length=20)


@pytest.fixture(scope="module")
def race_run(tmp_path_factory):
  """A 2-step run_race through the one runner (train, eval all ckpts, predict)."""
  from albert_tf.training import runner  # pylint: disable=g-import-not-at-top
  from albert_tf.training.runtime import RuntimeConfig  # pylint: disable=g-import-not-at-top
  from tests.helpers.text import make_tiny_spm_model  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp("race_run")
  spm = make_tiny_spm_model(str(root))
  finetune.write_race(str(root / "data"), files_per_level=1)
  config = write_tiny_config(str(root / "albert_config.json"))
  task = RaceTask(RaceConfig(
      config, str(root / "data"), max_seq_length=24, max_qa_length=8,
      cached_dir=str(root / "out"), spm_model_file=spm,
      eval_file=str(root / "race_eval.tf_record")))
  summary = runner.run(task, runner.RunConfig(
      output_dir=str(root / "out"), do_train=True, do_eval=True, do_predict=True,
      train_batch_size=2, eval_batch_size=3, predict_batch_size=3, learning_rate=1e-3,
      train_steps=2, warmup_steps=0, save_checkpoints_steps=1),
      RuntimeConfig(log_every_n_steps=1, steps_per_loop=1))
  return root, summary


def test_race_run_evaluates_every_checkpoint_and_predicts(race_run):
  root, summary = race_run
  out = root / "out"
  results = (out / "eval_results.txt").read_text()
  # Both checkpoints evaluated, each with overall and per-level accuracy; the best reported.
  assert results.count("=" * 50) == 2
  assert "middle_accuracy = " in results and "high_accuracy = " in results
  assert f"best_checkpoint = {summary['best_checkpoint']}" in results
  assert summary["best_result"]["num_examples"] == 4
  assert os.path.exists(root / "race_eval.tf_record")  # official --eval_file honoured
  lines = (out / "predictions.tsv").read_text().splitlines()
  assert lines[0] == "id\tprediction" and len(lines) == 5
  assert all(line.split("\t")[1] in "ABCD" for line in lines[1:])
  probabilities = np.loadtxt(out / "test_results.tsv")
  np.testing.assert_allclose(probabilities.sum(-1), np.ones(4), rtol=1e-5)
