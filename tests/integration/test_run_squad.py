"""End to end: run_squad's flow overfits tiny SQuAD files (v1.1 EM 100; v2.0 "" when unanswerable).

Deterministic: fixed seeds for weights and data order; learning rates and step counts were picked
with margin (several seeds reach training loss < 1e-3 well before the last step).
"""

import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import tokenization
from albert_tf.checkpoints.init import restore_model_weights
from albert_tf.cli import command
from albert_tf.config import AlbertConfig
from albert_tf.data import squad as squad_data
from albert_tf.errors import AlbertError
from albert_tf.models.squad import AlbertSquadModel
from albert_tf.tasks.squad import SquadConfig, SquadTask
from albert_tf.training import runner
from albert_tf.training.runtime import RuntimeConfig
from tests.helpers import squad as squad_helpers
from tests.helpers.paths import REPO
from tests.helpers.tiny_config import tiny_albert_config

# The two extra questions on the two-window geography passage need many more steps to separate;
# the overfitting test keeps one question there (8 questions on 4 passages).
V1_DROPPED = ("v1-geo-capital", "v1-geo-height")


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
  root = tmp_path_factory.mktemp("squad_run")
  spm = squad_helpers.make_squad_spm_model(root)
  vocab_size = tokenization.FullTokenizer(spm_model_file=spm).sp_model.GetPieceSize()
  config_path = str(root / "albert_config.json")
  tiny_albert_config(vocab_size=vocab_size, **squad_helpers.TINY_CONFIG_OVERRIDES).to_json_file(
      config_path)
  with open(squad_helpers.TINY_V1, encoding="utf-8") as f:
    v1 = json.load(f)
  for article in v1["data"]:
    for paragraph in article["paragraphs"]:
      paragraph["qas"] = [q for q in paragraph["qas"] if q["id"] not in V1_DROPPED]
  v1_path = squad_helpers.write_json(root / "v1_overfit.json", v1)
  return {"root": root, "spm": spm, "config": config_path, "v1": v1_path}


def _run(assets, output_dir, **kwargs):
  """What run_squad.py's main runs for these flags (with the default strategy and fp32)."""
  f = dict(albert_config_file=assets["config"], output_dir=output_dir,
           spm_model_file=assets["spm"], max_seq_length=128, doc_stride=32, max_query_length=16,
           train_batch_size=8, predict_batch_size=8, learning_rate=3e-3, seed=0,
           do_train=False, do_predict=False, export_dir=None, train_file=None,
           predict_file=None, num_train_epochs=3.0)
  f.update(kwargs)
  command.require_action(("do_train", "do_predict", "export_dir"), types.SimpleNamespace(**f))
  run_keys = ("do_train", "train_batch_size", "predict_batch_size", "learning_rate",
              "num_train_epochs", "export_dir")
  task_values = {k: v for k, v in f.items() if k not in run_keys + (
      "albert_config_file", "output_dir", "seed", "do_predict")}
  if not f["do_train"]:
    task_values["train_file"] = None
  if not f["do_predict"]:
    task_values["predict_file"] = None
  task = SquadTask(SquadConfig(AlbertConfig.from_json_file(f["albert_config_file"]),
                               cache_dir=output_dir, shuffle_seed=f["seed"], **task_values))
  evaluate = f["do_predict"] and task.has_gold_answers
  run_config = runner.RunConfig(
      output_dir=output_dir, do_eval=evaluate, do_predict=f["do_predict"] and not evaluate,
      eval_batch_size=f["predict_batch_size"], warmup_proportion=0.1,
      **{k: f[k] for k in run_keys})
  return runner.run(task, run_config, RuntimeConfig(seed=f["seed"]))


def _load(output_dir, name):
  with open(os.path.join(output_dir, name), encoding="utf-8") as f:
    return json.load(f)


def test_v1_overfits_to_exact_match_100(assets, tmp_path):
  out = str(tmp_path / "v1")
  # 8 questions / batch 8 x 400 epochs = 400 steps.
  summary = _run(assets, out, train_file=assets["v1"], predict_file=assets["v1"],
                 do_train=True, do_predict=True, num_train_epochs=400.0)
  assert summary["num_train_steps"] == 400
  assert summary["train"]["loss"] < 0.05
  metrics = summary["best_result"]
  assert metrics["exact_match"] == 100.0 and metrics["f1"] == 100.0
  predictions = _load(out, "predictions.json")
  with open(assets["v1"], encoding="utf-8") as f:
    gold = {qa["id"]: qa["answers"][0]["text"] for a in json.load(f)["data"]
            for p in a["paragraphs"] for qa in p["qas"]}
  assert predictions == gold  # exact strings, accents and digit-commas included
  nbest = _load(out, "nbest_predictions.json")
  assert set(nbest) == set(gold)
  assert all(1 <= len(v) <= 20 and v[0]["text"] == gold[k] for k, v in nbest.items())
  assert not os.path.exists(os.path.join(out, "null_odds.json"))
  results = open(os.path.join(out, "eval_results.txt")).read()
  assert "exact_match = 100.0" in results and "best f1 = 100.0" in results
  # Feature files were cached in output_dir; a second predict-only run reuses them.
  cached = sorted(p for p in os.listdir(out) if p.startswith("squad_v1"))
  assert cached == ["squad_v1_predict.tf_record", "squad_v1_predict_left.json",
                    "squad_v1_train.tf_record", "squad_v1_train.tf_record.settings.json"]
  mtimes = {p: os.path.getmtime(os.path.join(out, p)) for p in cached}
  # Same questions without gold answers (a test set): predictions only, no metrics.
  with open(assets["v1"], encoding="utf-8") as f:
    unlabelled = json.load(f)
  for article in unlabelled["data"]:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        del qa["answers"]
  unlabelled_path = squad_helpers.write_json(tmp_path / "unlabelled.json", unlabelled)
  os.remove(os.path.join(out, "predictions.json"))
  again = _run(assets, out, predict_file=unlabelled_path, do_predict=True)
  assert "best_result" not in again  # no answers: predicted, not evaluated
  assert _load(out, "predictions.json") == gold
  assert mtimes == {p: os.path.getmtime(os.path.join(out, p)) for p in cached}
  # --export_dir alone exports the best checkpoint; the SavedModel computes what the model does.
  export_dir = str(tmp_path / "export")
  version_dir = _run(assets, out, export_dir=export_dir)["export_dir"]
  # The official run_squad_v1 layout: <export_dir>/saved_model/<version>/.
  assert os.path.dirname(version_dir) == os.path.join(export_dir, "saved_model")
  assert os.path.basename(version_dir).isdigit()
  serve = tf.saved_model.load(version_dir).signatures["serving_default"]
  batch = next(iter(squad_data.feature_dataset(
      os.path.join(out, "squad_v1_predict.tf_record"), 128, False, 4, False)))
  model = AlbertSquadModel(AlbertConfig.from_json_file(assets["config"]))
  model(batch)
  # The export is the official model.ckpt-best (TF1 layout, best F1 of the labelled sweep).
  assert again["predict_checkpoint"] == os.path.join(out, "model.ckpt-best")
  reader = tf.train.load_checkpoint(os.path.join(out, "model.ckpt-best"))
  assert reader.has_tensor("cls/squad/output_weights") and reader.has_tensor("global_step")
  restore_model_weights(model, os.path.join(out, "model.ckpt-best"))
  expected = model(batch, training=False)
  served = serve(input_ids=batch["input_ids"], input_mask=batch["input_mask"],
                 segment_ids=batch["segment_ids"])
  for name in ("start_logits", "end_logits"):
    np.testing.assert_allclose(served[name].numpy(), expected[name].numpy(), atol=1e-5)


def test_v2_predicts_empty_for_unanswerable_after_overfitting(assets, tmp_path):
  out = str(tmp_path / "v2")
  v2 = str(squad_helpers.TINY_V2)
  # 6 questions / batch 8 x 400 epochs = 300 steps. Threshold 0: "no answer" iff P(no answer) > 0.5.
  summary = _run(assets, out, version_2_with_negative=True, train_file=v2, predict_file=v2,
                 do_train=True, do_predict=True, num_train_epochs=400.0,
                 null_score_diff_threshold=0.0, start_n_top=3, end_n_top=3)
  assert summary["num_train_steps"] == 300
  predictions = _load(out, "predictions.json")
  assert predictions == {"v2-cafe-where": "Zürich", "v2-cafe-year": "1887", "v2-cafe-moon": "",
                         "v2-geo-capital": "Paris", "v2-geo-ocean": "",
                         "v2-geo-height": "3,776 metres"}
  null_odds = _load(out, "null_odds.json")
  assert all((null_odds[k] > 0) == (v == "") for k, v in predictions.items())
  metrics = summary["best_result"]
  for key in ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1"):
    assert metrics[key] == 100.0, key
  assert metrics["HasAns_total"] == 4 and metrics["NoAns_total"] == 2
  # The official flow (threshold tuned on the predict file) gives the same predictions here.
  # No version flag: a v2.0 predict file selects the v2.0 head (official command lines).
  tuned = _run(assets, out, predict_file=v2, do_predict=True, start_n_top=3, end_n_top=3)
  assert tuned["task"] == "squad/v2.0"
  assert tuned["best_result"]["exact"] == 100.0
  assert _load(out, "predictions.json") == predictions


def test_cli_reports_bad_input_on_one_line(assets, tmp_path):
  bad = squad_helpers.write_json(tmp_path / "bad.json", {"version": "1.1", "articles": []})
  out = str(tmp_path / "cli")
  cmd = [sys.executable, "run_squad.py", f"--albert_config_file={assets['config']}",
         f"--spm_model_file={assets['spm']}", f"--output_dir={out}", f"--predict_file={bad}",
         "--do_predict", "--max_seq_length=64", "--max_query_length=16"]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                        env=env, timeout=120)
  assert proc.returncode == 2
  assert f"error: {bad}: the top-level object has no \"data\" (not a SQuAD file?)" in proc.stderr
  assert "Traceback" not in proc.stderr


def test_official_flag_validation(assets, tmp_path):
  base = dict(albert_config_file=assets["config"], output_dir=str(tmp_path),
              spm_model_file=assets["spm"], predict_file=assets["v1"], do_predict=True,
              max_seq_length=64, max_query_length=16)
  cases = [
      (dict(do_predict=False), "at least one of --do_train, --do_predict or --export_dir"),
      (dict(do_train=True), "--do_train needs --train_file"),
      (dict(max_seq_length=64, max_query_length=61),
       r"--max_seq_length \(64\) must be greater than --max_query_length \(61\) \+ 3"),
      (dict(max_seq_length=256), "--max_seq_length=256 exceeds max_position_embeddings=128 of "
                                 "the albert config"),
      (dict(spm_model_file=None), "--spm_model_file is required"),
      (dict(doc_stride=0), "--doc_stride=0 is invalid"),
  ]
  for overrides, message in cases:
    with pytest.raises(AlbertError, match=message):
      _run(assets, **dict(base, **overrides))
