"""Fine-tuned HF transformers directories through the real scripts, as --init_checkpoint.

run_classifier.py evaluates, predicts and exports an AlbertForSequenceClassification directory
(tests/fixtures/hf_heads/hf_classifier: 3 labels that id2label names in another order and case
than MNLI's) with its own head, and the exported SavedModel, served in a fresh interpreter, gives
transformers' probabilities; run_squad.py (v1.1) and run_race.py predict / evaluate with the
AlbertForQuestionAnswering and AlbertForMultipleChoice heads; a 3-label head for a 2-label task
is a one-line error. The fixtures' vocabulary is 300 pieces: a tiny SentencePiece model of 300.
"""

import json
import os
import shutil

import numpy as np
import pytest

from tests.helpers import finetune
from tests.helpers import glue_fixtures
from tests.helpers import scripts
from tests.helpers.paths import FIXTURES_DIR
from tests.helpers.squad import TINY_V1
from tests.helpers.text import make_tiny_spm_model

HEADS = FIXTURES_DIR / "hf_heads"
MNLI_LABELS = ["contradiction", "entailment", "neutral"]
MNLI_ROWS = [2, 0, 1]  # hf_classifier's id2label: ENTAILMENT, NEUTRAL, CONTRADICTION
SEQ = 24


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
  root = tmp_path_factory.mktemp("hf_heads")
  spm = make_tiny_spm_model(str(root), vocab_size=300)  # the fixtures' vocab_size
  tests = glue_fixtures.write_glue(str(root / "glue"))
  finetune.write_race(str(root / "race"), splits=("dev", "test"), files_per_level=1)
  for name in ("hf_classifier", "hf_squad", "hf_multiple_choice"):
    shutil.copytree(HEADS / name, root / name)
  return dict(root=root, spm=spm, mnli_test=tests["MNLI"])


def _softmax(logits):
  e = np.exp(logits - logits.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def test_run_classifier_evaluates_predicts_and_serves_an_hf_classifier(assets):
  root, hf_dir = assets["root"], str(assets["root"] / "hf_classifier")
  proc = scripts.run_script("run_classifier.py", [
      "--task_name=MNLI", "--data_dir=glue", "--output_dir=mnli", f"--init_checkpoint={hf_dir}",
      f"--spm_model_file={assets['spm']}", f"--max_seq_length={SEQ}", "--do_eval",
      "--do_predict", "--export_dir=serving", "--eval_batch_size=4", "--predict_batch_size=2"],
      cwd=str(root))
  assert proc.returncode == 0, scripts.describe(proc)
  # No --albert_config_file: the config is the directory's; every weight came from it.
  block = scripts.eval_blocks(root / "mnli" / "eval_results.txt")[0]
  assert block["num_examples"] == "5" and 0.0 <= float(block["eval_accuracy"]) <= 1.0
  assert json.loads((root / "mnli" / "best_checkpoint.json").read_text())["checkpoint"] == hf_dir
  # Predictions: the HF head's rows in MNLI's label order (the in-process load, which matches
  # transformers to 1e-6, tests/checkpoints/test_hf_heads.py), on the script's own features.
  from albert_tf.checkpoints import init  # pylint: disable=g-import-not-at-top
  from albert_tf.checkpoints.hf.config import config_from_hf  # pylint: disable=g-import-not-at-top
  from albert_tf.models import AlbertClassifier  # pylint: disable=g-import-not-at-top
  model = AlbertClassifier(config_from_hf(hf_dir), num_classes=3)
  init.restore_model_weights(model, hf_dir, label_list=MNLI_LABELS)
  features = scripts.read_feature_records(str(root / "mnli" / "mnli_predict.tf_record"))
  expected = model(features, training=False)["probabilities"].numpy()
  predicted = scripts.read_test_results(root / "mnli" / "test_results.tsv")
  assert predicted.shape == (len(assets["mnli_test"]), 3)
  np.testing.assert_allclose(predicted, expected, atol=1e-5)
  _, rows = scripts.read_submission(root / "mnli" / "MNLI-m.tsv")
  assert [label for _, label in rows] == [MNLI_LABELS[i] for i in expected.argmax(-1)]
  # The export served as TF Serving would (its core_ops copy: plain TensorFlow): transformers'
  # probabilities, columns in MNLI order.
  ref = np.load(HEADS / "hf_classifier" / "reference.npz")
  version_dir = scripts.versioned_export(str(root / "serving"))
  served, = finetune.run_serving_client(str(root / "client"), [dict(
      export_dir=os.path.join(version_dir, "core_ops"), signature="token_ids",
      inputs=dict(input_ids=ref["input_ids"].tolist(), input_mask=ref["attention_mask"].tolist(),
                  segment_ids=ref["token_type_ids"].tolist()))], tensorflow_text=False)
  transformers_probabilities = _softmax(ref["logits"].astype(np.float64))[:, MNLI_ROWS]
  difference = float(np.max(np.abs(served["probabilities"] - transformers_probabilities)))
  print(f"served vs transformers: max probability difference {difference:.3g}")
  assert difference <= 1e-4
  assert [s.decode() for s in served["label"]] == [
      MNLI_LABELS[i] for i in transformers_probabilities.argmax(-1)]


def test_a_head_of_other_classes_is_a_one_line_error(assets):
  root, hf_dir = assets["root"], str(assets["root"] / "hf_classifier")
  proc = scripts.run_script("run_classifier.py", [
      "--task_name=MRPC", "--data_dir=glue", "--output_dir=mrpc", f"--init_checkpoint={hf_dir}",
      f"--spm_model_file={assets['spm']}", f"--max_seq_length={SEQ}", "--do_eval"],
      cwd=str(root))
  assert proc.returncode == 2, scripts.describe(proc)
  assert "Traceback" not in proc.stderr
  assert scripts.last_line(proc.stderr) == (
      f"error: {hf_dir}: the HF head has 3 labels (ENTAILMENT, NEUTRAL, CONTRADICTION) but the "
      "task has 2 labels (0, 1)")


def test_run_squad_predicts_and_evaluates_with_an_hf_qa_head(assets):
  root, hf_dir = assets["root"], str(assets["root"] / "hf_squad")
  proc = scripts.run_script("run_squad.py", [
      f"--predict_file={TINY_V1}", "--output_dir=squad", f"--init_checkpoint={hf_dir}",
      f"--spm_model_file={assets['spm']}", "--max_seq_length=64", "--max_query_length=16",
      "--doc_stride=32", "--do_predict"], cwd=str(root))
  assert proc.returncode == 0, scripts.describe(proc)
  assert f"{hf_dir}: loaded " in proc.stderr and "missing" not in proc.stderr
  gold = json.loads(TINY_V1.read_text())
  ids = {qa["id"] for article in gold["data"] for paragraph in article["paragraphs"]
         for qa in paragraph["qas"]}
  predictions = json.loads((root / "squad" / "predictions.json").read_text())
  assert set(predictions) == ids
  assert "f1 = " in (root / "squad" / "eval_results.txt").read_text()


def test_run_race_evaluates_with_an_hf_multiple_choice_head(assets):
  root, hf_dir = assets["root"], str(assets["root"] / "hf_multiple_choice")
  proc = scripts.run_script("run_race.py", [
      "--data_dir=race", "--output_dir=race_out", f"--init_checkpoint={hf_dir}",
      f"--spm_model_file={assets['spm']}", "--max_seq_length=48", "--max_qa_length=16",
      "--nodo_train", "--do_eval", "--eval_batch_size=2"], cwd=str(root))
  assert proc.returncode == 0, scripts.describe(proc)
  assert f"{hf_dir}: loaded " in proc.stderr
  block = scripts.eval_blocks(root / "race_out" / "eval_results.txt")[0]
  assert 0.0 <= float(block["eval_accuracy"]) <= 1.0
  assert os.path.exists(root / "race_out" / "model.ckpt-best.index")
