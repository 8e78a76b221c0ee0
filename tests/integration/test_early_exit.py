"""run_classifier.py --early_exit=patience through the real script: a GLUE task trained,
evaluated, predicted and exported with early exit (checkpoint names, exit layers in every
output, the SavedModel and TFLite answering with exit_layer, as the run's predictions), and a
regression on the user's own data."""

import os

import numpy as np
import pytest

from tests.helpers import finetune
from tests.helpers import scripts
from tests.helpers.tiny_config import write_tiny_config

LAYERS = 3


def _job_args(setup, *extra):
  return [f"--albert_config_file={setup['config']}", f"--spm_model_file={setup['spm']}",
          "--max_seq_length=24", "--train_batch_size=4", "--eval_batch_size=4",
          "--predict_batch_size=4", "--learning_rate=3e-4", "--early_exit=patience", *extra]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  setup = finetune.mrpc_setup(tmp_path_factory.mktemp("early_exit"), n_train=8, n_dev=6,
                              n_test=5)
  setup["config"] = write_tiny_config(setup["root"] / "albert_config_l3.json",
                                      num_hidden_layers=LAYERS)
  return setup


@pytest.fixture(scope="module")
def mrpc_run(setup):
  root = setup["root"]
  proc = scripts.run_script("run_classifier.py", _job_args(
      setup, "--task_name=MRPC", "--data_dir=glue", "--output_dir=out", "--do_train",
      "--do_eval", "--do_predict", "--export_dir=serving", "--train_step=3",
      "--save_checkpoints_steps=3", "--early_exit_patience=1"), cwd=str(root))
  assert proc.returncode == 0, scripts.describe(proc)
  return root


def _rows(path):
  return [line.split("\t") for line in path.read_text().splitlines()]


def test_training_keeps_internal_classifiers_under_their_names(mrpc_run):
  best = scripts.checkpoint_variables(str(mrpc_run / "out" / "model.ckpt-best"))
  for layer in range(1, LAYERS):
    assert best[f"early_exit/layer_{layer}/output_weights"] == [2, 32]
    assert best[f"early_exit/layer_{layer}/output_bias"] == [2]
  assert f"early_exit/layer_{LAYERS}/output_weights" not in best
  assert best["output_weights"] == [2, 32]  # the ordinary head: the last layer's


def test_eval_and_predict_report_exit_layers(mrpc_run):
  text = (mrpc_run / "out" / "eval_results.txt").read_text()
  means = [float(line.split(" = ")[1]) for line in text.splitlines()
           if line.startswith("eval_mean_exit_layer = ")]
  # Patience 1: no answer before layer 2 (it needs a layer to agree with).
  assert means and all(2 <= mean <= LAYERS for mean in means), text
  rows = _rows(mrpc_run / "out" / "exit_layers.tsv")
  assert rows[0] == ["index", "exit_layer"] and [r[0] for r in rows[1:]] == list("01234")
  assert {int(r[1]) for r in rows[1:]} <= {2, 3}
  # The submission file keeps the leaderboard's two columns.
  assert _rows(mrpc_run / "out" / "MRPC.tsv")[0] == ["index", "prediction"]


def test_export_answers_with_exit_layer_as_the_run_predicted(mrpc_run):
  version = scripts.versioned_export(str(mrpc_run / "serving"))
  test = _rows(mrpc_run / "glue" / "MRPC" / "test.tsv")[1:]
  raw, = finetune.run_serving_client(str(mrpc_run / "client"), [{
      "export_dir": version, "signature": "serving_default",
      "inputs": {"text_a": [r[3] for r in test], "text_b": [r[4] for r in test]}}],
      tensorflow_text=True)
  exit_layers = [int(r[1]) for r in _rows(mrpc_run / "out" / "exit_layers.tsv")[1:]]
  assert raw["exit_layer"].tolist() == exit_layers
  predictions = [int(r[1]) for r in _rows(mrpc_run / "out" / "MRPC.tsv")[1:]]
  assert raw["predictions"].tolist() == predictions
  np.testing.assert_allclose(raw["probabilities"],
                             np.loadtxt(mrpc_run / "out" / "test_results.tsv"), atol=1e-5)
  # TFLite (batch 1, builtin ops only) runs the same loop.
  from ai_edge_litert.interpreter import Interpreter  # pylint: disable=g-import-not-at-top
  records = scripts.read_feature_records(str(mrpc_run / "out" / "mrpc_predict.tf_record"))
  runner = Interpreter(model_path=str(mrpc_run / "serving" / "albert_model.tflite")
                       ).get_signature_runner()
  got = [int(runner(**{k: np.asarray(v[i:i + 1], np.int32) for k, v in records.items()}
                    )["exit_layer"][0]) for i in range(len(exit_layers))]
  assert got == exit_layers


def test_resuming_without_early_exit_refuses_in_one_line(setup, mrpc_run):
  # Going on would drop the internal classifiers from every later checkpoint silently.
  args = [a for a in _job_args(setup) if a != "--early_exit=patience"]
  proc = scripts.run_script("run_classifier.py", args + [
      "--task_name=MRPC", "--data_dir=glue", "--output_dir=out", "--do_train",
      "--train_step=6"], cwd=str(mrpc_run))
  assert proc.returncode == 2 and "Traceback" not in proc.stderr, scripts.describe(proc)
  line = scripts.last_line(proc.stderr)
  assert line.startswith("error: ") and "ckpt-3: the run in --output_dir cannot resume with " \
      "another early-exit mode: it was trained with --early_exit=patience: it holds internal " \
      "classifiers, e.g. model/early_exit_classifiers/layer_1/output_weights" in line, line
  assert line.endswith("resume with the --early_exit it was started with, or start a new "
                       "--output_dir with --init_checkpoint=out/ckpt-3") or \
      line.endswith("ckpt-3"), line
  assert not (mrpc_run / "out" / "ckpt-6.index").exists()


def test_convert_and_export_checkpoints_name_what_they_leave_out(mrpc_run):
  # The trainer's TF2 ckpt-3 converted to TF1, and the official export_checkpoints.py of
  # model.ckpt-best: one line each naming the internal classifiers they do not carry.
  proc = scripts.run_script("albert_tf/cli/convert.py", [
      "--input_checkpoint=out/ckpt-3", "--output_checkpoint=converted/model.ckpt",
      "--output_format=tf1"], cwd=str(mrpc_run))
  assert proc.returncode == 0, scripts.describe(proc)
  assert [l for l in proc.stdout.splitlines() if "early exit" in l] == [
      f"note: early exit's internal classifiers are left out ({LAYERS - 1} layers: "
      "model/early_exit_classifiers/{layer_1,layer_2}/output_weights and output_bias): the "
      "tf1 output holds the ordinary classifier only"], proc.stdout
  proc = scripts.run_script("export_checkpoints.py", [
      "--albert_directory=out", "--export_path=exported/model.ckpt"], cwd=str(mrpc_run))
  assert proc.returncode == 0, scripts.describe(proc)
  notes = [l for l in proc.stdout.splitlines() if l.startswith("note:")]
  assert notes == [
      "note: left out, as by the official export_checkpoints.py: its classifier head "
      "(output_weights [2, 32]) and early exit's internal classifiers (early_exit/layer_*); "
      "python -m albert_tf.cli.convert keeps a fine-tuned head"], proc.stdout
  exported = scripts.checkpoint_variables(str(mrpc_run / "exported" / "model.ckpt"))
  assert "output_weights" not in exported and not any(n.startswith("early_exit/")
                                                        for n in exported)


def test_patience_sweep_run_evaluates_the_best_checkpoint_at_another_patience(setup, mrpc_run):
  # The docs' sweep: --do_eval alone, the fine-tuned model.ckpt-best (TF1 names, internal
  # classifiers included) as --init_checkpoint, a patience no example can reach in 3 layers.
  proc = scripts.run_script("run_classifier.py", _job_args(
      setup, "--task_name=MRPC", "--data_dir=glue",
      "--output_dir=sweep_p2", "--init_checkpoint=out/model.ckpt-best", "--do_eval",
      "--early_exit_patience=2"), cwd=str(mrpc_run))
  assert proc.returncode == 0, scripts.describe(proc)
  text = (mrpc_run / "sweep_p2" / "eval_results.txt").read_text()
  assert f"eval_mean_exit_layer = {float(LAYERS)!r}" in text, text


def test_regression_on_own_data_predicts_exit_layers(setup):
  root = setup["root"]
  data = root / "own"
  data.mkdir()
  sentences = finetune.SENTENCES
  for split, n in (("train", 8), ("test", 3)):
    (data / f"{split}.csv").write_text("text,score\n" + "".join(
        f"\"{sentences[i % 8]}\",{(i % 5) * 0.5}\n" for i in range(n)))
  proc = scripts.run_script("run_classifier.py", _job_args(
      setup, "--task_name=custom", "--data_dir=own", "--output_dir=own_out", "--regression",
      "--text_a_column=text", "--label_column=score", "--do_train", "--do_predict",
      "--train_step=2", "--save_checkpoints_steps=2", "--early_exit_patience=1",
      "--early_exit_threshold=1000"), cwd=str(root))
  assert proc.returncode == 0, scripts.describe(proc)
  rows = _rows(root / "own_out" / "predictions.tsv")
  assert rows[0] == ["id", "prediction", "exit_layer"] and len(rows) == 4
  # Any change counts as unchanged under that threshold: every answer leaves at layer 2.
  assert [r[2] for r in rows[1:]] == ["2", "2", "2"]



def test_xla_whole_step_answers_as_the_uncompiled_run(setup, mrpc_run):
  # A 4-layer early-exit model evaluated and predicted compiled by XLA (as every TPU step is),
  # batches of 4 padded (6 dev, 5 test examples): each example's exit layer and answer as the
  # same model's uncompiled (eager) ones.
  root = setup["root"]
  config, prefix, model = finetune.disagreeing_early_exit_checkpoint(
      root, [mrpc_run / "out" / f"mrpc_{mode}.tf_record" for mode in ("eval", "predict")])
  proc = scripts.run_script("run_classifier.py", _job_args(
      setup, f"--albert_config_file={config}", "--task_name=MRPC", "--data_dir=glue",
      "--output_dir=xla", f"--init_checkpoint={prefix}", "--do_eval", "--do_predict",
      "--xla_whole_step", "--early_exit_patience=1"), cwd=str(root))
  assert proc.returncode == 0, scripts.describe(proc)

  def uncompiled(mode):
    features, labels = finetune.feature_records(root / "xla" / f"mrpc_{mode}.tf_record")
    out = model(features, training=False)
    return labels, out["exit_layer"].numpy(), out["probabilities"].numpy()

  _, exit_layers, probabilities = uncompiled("predict")
  assert len(set(exit_layers.tolist())) > 1, exit_layers  # the batches really were split
  assert [int(r[1]) for r in _rows(root / "xla" / "exit_layers.tsv")[1:]] == exit_layers.tolist()
  np.testing.assert_allclose(np.loadtxt(root / "xla" / "test_results.tsv"), probabilities,
                             atol=1e-5)
  labels, exit_layers, probabilities = uncompiled("eval")
  results = dict(line.split(" = ") for line in
                 (root / "xla" / "eval_results.txt").read_text().splitlines() if " = " in line)
  assert float(results["eval_mean_exit_layer"]) == pytest.approx(exit_layers.mean())
  assert float(results["eval_accuracy"]) == pytest.approx(
      (probabilities.argmax(-1) == labels).mean())
