"""HF task heads both ways: AlbertForSequenceClassification (and regression),
AlbertForMultipleChoice, AlbertForQuestionAnswering and AlbertForTokenClassification
directories against transformers' outputs.

tests/fixtures/hf_heads/ was made once with torch + transformers by
tests/fixtures/make_hf_reference.py (steps heads-ours / heads-reference, see its docstring):
hf_* by transformers, ours_* by save_hf_checkpoint and then loaded by transformers. No PyTorch is
needed here."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file

from albert_tf import AlbertError
from albert_tf.checkpoints import model_source
from albert_tf.checkpoints.hf.config import config_from_hf
from albert_tf.checkpoints.hf.heads import head_row_order, hf_label_names
from albert_tf.checkpoints.hf.load import load_hf_checkpoint
from albert_tf.checkpoints.hf.save import save_hf_checkpoint
from albert_tf.checkpoints.conversion import convert
from albert_tf.checkpoints.init import init_from_checkpoint, restore_model_weights
from tests.checkpoints.test_hf import assert_same_tensors
from tests.helpers.paths import FIXTURES_DIR, REPO

DATA = FIXTURES_DIR / "hf_heads"
HF_MADE = {"hf_classifier": "classifier", "hf_regression": "regression",
           "hf_multiple_choice": "multiple_choice", "hf_squad": "squad_v1",
           "hf_token_classifier": "token_classifier"}
OURS = {"ours_classifier": "classifier", "ours_regression": "regression",
        "ours_multiple_choice": "multiple_choice", "ours_squad": "squad_v1",
        "ours_token_classifier": "token_classifier"}
OUTPUTS = {"classifier": ("logits",), "regression": ("logits",),
           "multiple_choice": ("logits",), "squad_v1": ("start_logits", "end_logits"),
           "token_classifier": ("logits",)}
MNLI_LABELS = ["contradiction", "entailment", "neutral"]
# hf_classifier's id2label is ENTAILMENT, NEUTRAL, CONTRADICTION: MNLI's order takes rows 2, 0, 1.
MNLI_ROWS = [2, 0, 1]
TOLERANCE = 1e-4


def built(directory, **kwargs):
  """The model an HF directory holds (type read from it), built with its config."""
  model_type, num_labels = model_source.checkpoint_model_type(str(directory))
  return model_source.build_model(model_type, config_from_hf(directory), num_labels, **kwargs)


def outputs(model, ref):
  return model(dict(input_ids=ref["input_ids"], input_mask=ref["attention_mask"],
                    segment_ids=ref["token_type_ids"]), training=False)


def copy_fixture(name, tmp_path):
  return shutil.copytree(DATA / name, tmp_path / name)


def edit_config(directory, **changes):
  cfg = json.loads((directory / "config.json").read_text())
  cfg.update(changes)
  (directory / "config.json").write_text(json.dumps(cfg))


def labels_of(directory):
  """The label list a directory's own id2label gives (None: generic names)."""
  return hf_label_names(directory)


@pytest.mark.parametrize("name", sorted({**HF_MADE, **OURS}))
def test_every_head_matches_transformers(name):
  model_type = {**HF_MADE, **OURS}[name]
  model = built(DATA / name)
  assert model_source.model_type_of(model) == model_type
  report = load_hf_checkpoint(model, DATA / name, label_list=labels_of(DATA / name),
                                 require_head=True)
  assert not report.missing and not report.unexpected, report
  ref = np.load(DATA / name / "reference.npz")
  got = outputs(model, ref)
  for key in OUTPUTS[model_type]:
    assert got[key].shape == ref[key].shape, key
    assert np.max(np.abs(ref[key])) > 500 * TOLERANCE  # far from 0: a wrong tensor shows
    np.testing.assert_allclose(got[key].numpy(), ref[key], rtol=0, atol=TOLERANCE,
                               err_msg=f"{name} {key}")


@pytest.mark.parametrize("name", sorted(OURS))
def test_ours_are_what_transformers_loaded_cleanly(name, tmp_path):
  """transformers loaded these save_hf_checkpoint directories with nothing missing or unexpected
  and the same outputs (recorded); saving the same weights now writes the same files."""
  record = json.loads((DATA / name / "reference.json").read_text())
  assert record["made_by"] == "albert_tf save_hf_checkpoint"
  assert all(record["loading_info"][k] == [] for k in (
      "missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"))
  assert set(record["max_abs_diff_vs_ours"]) == set(OUTPUTS[OURS[name]])
  assert max(record["max_abs_diff_vs_ours"].values()) <= TOLERANCE
  model = built(DATA / name)
  labels = labels_of(DATA / name)
  load_hf_checkpoint(model, DATA / name, label_list=labels)
  written = save_hf_checkpoint(model, tmp_path / "again", label_list=labels)
  assert written == sorted(load_file(DATA / name / "model.safetensors"))
  assert_same_tensors(DATA / name, tmp_path / "again")
  assert json.loads((tmp_path / "again" / "config.json").read_text()) == json.loads(
      (DATA / name / "config.json").read_text())


def test_written_configs_name_the_head():
  cfg = {name: json.loads((DATA / name / "config.json").read_text()) for name in OURS}
  assert cfg["ours_classifier"]["architectures"] == ["AlbertForSequenceClassification"]
  assert cfg["ours_classifier"]["id2label"] == {"0": "negative", "1": "neutral", "2": "positive"}
  assert cfg["ours_classifier"]["label2id"] == {"negative": 0, "neutral": 1, "positive": 2}
  assert cfg["ours_classifier"]["problem_type"] == "single_label_classification"
  assert cfg["ours_regression"]["problem_type"] == "regression"
  assert cfg["ours_regression"]["id2label"] == {"0": "LABEL_0"}
  assert cfg["ours_multiple_choice"]["architectures"] == ["AlbertForMultipleChoice"]
  assert cfg["ours_squad"]["architectures"] == ["AlbertForQuestionAnswering"]
  assert cfg["ours_token_classifier"]["architectures"] == ["AlbertForTokenClassification"]
  assert cfg["ours_token_classifier"]["id2label"] == {
      "0": "O", "1": "B-LOC", "2": "B-PER", "3": "I-LOC", "4": "I-PER"}
  assert "problem_type" not in cfg["ours_token_classifier"]
  # HF's question answering and token classification have no pooler: none written.
  for name in ("ours_squad", "ours_token_classifier"):
    assert not [k for k in load_file(DATA / name / "model.safetensors")
                if k.startswith("albert.pooler")]


def test_token_classifier_logits_within_1e5_and_tags_in_the_tasks_order():
  """transformers' AlbertForTokenClassification (tags B-PER, I-PER, O, B-LOC, I-LOC) read for a
  task whose labels are O, B-LOC, B-PER, I-LOC, I-PER: every piece's logits equal transformers'
  within 1e-5, columns in the task's order."""
  from albert_tf import from_pretrained  # pylint: disable=g-import-not-at-top
  tags = ["O", "B-LOC", "B-PER", "I-LOC", "I-PER"]
  hf_tags = json.loads((DATA / "hf_token_classifier" / "config.json").read_text())["id2label"]
  hf_order = [hf_tags[str(i)] for i in range(len(hf_tags))]
  assert hf_order != tags
  loaded = from_pretrained(str(DATA / "hf_token_classifier"), label_list=tags)
  assert loaded.model_type == "token_classifier" and loaded.label_list == tags
  ref = np.load(DATA / "hf_token_classifier" / "reference.npz")
  got = outputs(loaded.model, ref)["logits"].numpy()
  assert got.shape == ref["logits"].shape == (2, 12, 5)
  np.testing.assert_allclose(got, ref["logits"][..., [hf_order.index(t) for t in tags]],
                             rtol=0, atol=1e-5)
  # With no label list, the directory's own id2label names the labels, in its order.
  own = from_pretrained(str(DATA / "hf_token_classifier"))
  assert own.label_list == hf_order
  np.testing.assert_allclose(outputs(own.model, ref)["logits"].numpy(), ref["logits"], rtol=0,
                             atol=1e-5)


def test_id2label_puts_the_rows_in_the_tasks_order(tmp_path):
  ref = np.load(DATA / "hf_classifier" / "reference.npz")
  model = built(DATA / "hf_classifier")
  load_hf_checkpoint(model, DATA / "hf_classifier", label_list=MNLI_LABELS)
  np.testing.assert_allclose(outputs(model, ref)["logits"].numpy(), ref["logits"][:, MNLI_ROWS],
                             atol=TOLERANCE)
  # Written back with the task's labels, the rows and the names move together.
  save_hf_checkpoint(model, tmp_path / "out", label_list=MNLI_LABELS)
  original = load_file(DATA / "hf_classifier" / "model.safetensors")
  written = load_file(tmp_path / "out" / "model.safetensors")
  np.testing.assert_array_equal(written["classifier.weight"],
                                original["classifier.weight"][MNLI_ROWS])
  assert json.loads((tmp_path / "out" / "config.json").read_text())["id2label"] == {
      "0": "contradiction", "1": "entailment", "2": "neutral"}
  # Generic LABEL_<i> names keep their order, whatever the task's labels.
  generic = copy_fixture("hf_classifier", tmp_path)
  edit_config(generic, id2label={str(i): f"LABEL_{i}" for i in range(3)})
  load_hf_checkpoint(model, generic, label_list=MNLI_LABELS)
  np.testing.assert_allclose(outputs(model, ref)["logits"].numpy(), ref["logits"],
                             atol=TOLERANCE)


def test_label_order_rules():
  assert head_row_order(["B", "a"], ["a", "b"], "c") == [1, 0]  # case folded
  assert head_row_order(["LABEL_0", "LABEL_1"], ["x", "y"], "c") is None
  # Labels that are the class ids (GLUE's 0/1 tasks) take HF's ids as they are.
  assert head_row_order(["NEGATIVE", "POSITIVE"], ["0", "1"], "c") is None
  with pytest.raises(AlbertError, match=r"^c: id2label names \(yes, no\) are not the task's "
                     r"labels \(entailment, not_entailment\)$"):
    head_row_order(["yes", "no"], ["entailment", "not_entailment"], "c")


@pytest.mark.parametrize("labels,message", [
    (None, r"config.json: id2label names the classes \(ENTAILMENT, NEUTRAL, CONTRADICTION\): "
           r"give the task's label list"),
    (["a", "b", "c"], r"config.json: id2label names \(ENTAILMENT, NEUTRAL, CONTRADICTION\) are "
                      r"not the task's labels \(a, b, c\)"),
])
def test_named_rows_never_guessed(labels, message):
  model = built(DATA / "hf_classifier")
  before = model.classifier_head.output_weights.numpy()
  with pytest.raises(AlbertError, match=message) as raised:
    init_from_checkpoint(model, str(DATA / "hf_classifier"), label_list=labels)
  assert "\n" not in str(raised.value)
  np.testing.assert_array_equal(model.classifier_head.output_weights.numpy(), before)


@pytest.mark.parametrize("num_classes,regression,message", [
    (2, False, r"hf_classifier: the HF head has 3 labels \(ENTAILMENT, NEUTRAL, CONTRADICTION\) "
               r"but the task has 2 labels \(0, 1\)$"),
    (1, True, r"hf_classifier: the HF head has 3 labels .* but the task has 1 regression output$"),
])
def test_head_of_other_classes_is_one_line_error(num_classes, regression, message):
  config = config_from_hf(DATA / "hf_classifier")
  model = model_source.build_model("regression" if regression else "classifier", config,
                                   num_classes)
  labels = None if regression else ["0", "1"]
  for load in (init_from_checkpoint, restore_model_weights):  # fine-tuning start and evaluation
    with pytest.raises(AlbertError, match=message):
      load(model, str(DATA / "hf_classifier"), label_list=labels)
  # A regression head into a 3-label task.
  three = model_source.build_model("classifier", config, 3)
  with pytest.raises(AlbertError, match=r"hf_regression: the HF head has 1 regression output "
                     r"but the task has 3 labels \(contradiction, entailment, neutral\)$"):
    restore_model_weights(three, str(DATA / "hf_regression"), label_list=MNLI_LABELS)


def test_evaluation_needs_the_tasks_own_head():
  """restore_model_weights (eval / predict / export) takes no directory without this head;
  init_from_checkpoint (fine-tuning start) takes its encoder."""
  regression = built(DATA / "hf_regression")
  with pytest.raises(AlbertError, match=r"hf_multiple_choice: an HF AlbertForMultipleChoice "
                     r"directory has no AlbertForSequenceClassification head for this "
                     r"AlbertClassifier \(lacks output_bias\); fine-tune it first"):
    restore_model_weights(regression, str(DATA / "hf_multiple_choice"))
  pretraining = FIXTURES_DIR / "hf" / "hf_g1"
  with pytest.raises(AlbertError, match=r"an HF AlbertForPreTraining directory has no "
                     r"AlbertForSequenceClassification head"):
    restore_model_weights(regression, str(pretraining))
  # The same [1, H] `classifier` of a multiple-choice model does not start a regression head.
  report = init_from_checkpoint(regression, str(DATA / "hf_multiple_choice"))
  assert report.missing == ["output_bias", "output_weights"]
  assert report.unexpected == ["classifier.bias", "classifier.weight"]
  choice = built(DATA / "hf_multiple_choice")
  with pytest.raises(AlbertError, match="has no AlbertForMultipleChoice head"):
    restore_model_weights(choice, str(DATA / "hf_regression"))


def test_squad_reads_no_pooler():
  model = built(DATA / "hf_squad")
  pooler = model.encoder.pooler.kernel.numpy()
  assert restore_model_weights(model, str(DATA / "hf_squad")) is None  # nothing missing
  np.testing.assert_array_equal(model.encoder.pooler.kernel.numpy(), pooler)  # left as it was
  # A classifier does read the pooler: a directory without one is refused for it.
  classifier = model_source.build_model("classifier", config_from_hf(DATA / "hf_squad"), 2)
  with pytest.raises(AlbertError, match="lacks 2 encoder variables, e.g. bert/pooler/dense"):
    init_from_checkpoint(classifier, str(DATA / "hf_squad"))


def test_config_inconsistencies_are_refused(tmp_path):
  directory = copy_fixture("hf_classifier", tmp_path)
  edit_config(directory, id2label={"0": "a", "1": "b"})
  with pytest.raises(AlbertError, match=r"config.json: id2label has 2 labels but "
                     r"classifier.weight has 3 rows"):
    load_hf_checkpoint(built(DATA / "hf_classifier"), directory, label_list=MNLI_LABELS)
  edit_config(directory, id2label={"0": "a", "2": "b", "3": "c"})
  with pytest.raises(AlbertError, match=r"id2label ids \[0, 2, 3\] are not 0..2"):
    load_hf_checkpoint(built(DATA / "hf_classifier"), directory, label_list=MNLI_LABELS)
  edit_config(directory, id2label={str(i): n for i, n in enumerate(MNLI_LABELS)},
              problem_type="multi_label_classification")
  with pytest.raises(AlbertError, match="problem_type multi_label_classification"):
    restore_model_weights(built(DATA / "hf_classifier"), str(directory), label_list=MNLI_LABELS)


def test_save_refuses_a_label_list_that_does_not_fit(tmp_path):
  model = built(DATA / "hf_classifier")
  for labels in (["a", "b"], ["a", "a", "b"]):
    with pytest.raises(AlbertError, match=r"label list \(.*\) must name each of the 3 classes "
                       "once"):
      save_hf_checkpoint(model, tmp_path / "out", label_list=labels)
  assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", sorted(HF_MADE))
@pytest.mark.parametrize("middle", ["tf1", "tf2"])
def test_hf_to_tf_and_back_is_bit_exact(name, middle, tmp_path):
  model_type = HF_MADE[name]
  labels = labels_of(DATA / name)
  prefix = str(tmp_path / middle / "model.ckpt")
  assert convert(None, str(DATA / name), prefix, output_format=middle) == f"hf_to_{middle}"
  config_file = tmp_path / middle / "albert_config.json"
  one_row = model_type in ("regression", "multiple_choice")
  if one_row and middle == "tf1":  # the official names cannot tell these two apart
    with pytest.raises(AlbertError, match="pass --model_type=regression or "
                       "--model_type=multiple_choice"):
      convert(str(config_file), prefix, str(tmp_path / "back"), output_format="hf")
  convert(str(config_file), prefix, str(tmp_path / "back"), output_format="hf",
          model_type=model_type if one_row else None, label_list=labels)
  assert_same_tensors(DATA / name, tmp_path / "back")
  theirs = json.loads((DATA / name / "config.json").read_text())
  ours = json.loads((tmp_path / "back" / "config.json").read_text())
  for key in ("architectures", "id2label", "label2id", "hidden_size"):
    assert ours.get(key) == theirs.get(key), key
  # transformers leaves a classifier's problem_type unset until trained; we write it.
  assert ours.get("problem_type") == theirs.get("problem_type") or (
      model_type == "classifier" and ours["problem_type"] == "single_label_classification")


def test_convert_of_an_official_classifier_checkpoint_names_its_classes(tmp_path):
  """A TF1 classifier (`output_weights` [3, H]) -> HF with --label_list on the command line."""
  prefix = str(tmp_path / "tf1" / "model.ckpt")
  convert(None, str(DATA / "hf_classifier"), prefix, output_format="tf1")
  env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2")
  cmd = [sys.executable, "-m", "albert_tf.cli.convert",
         f"--albert_config_file={tmp_path / 'tf1' / 'albert_config.json'}",
         f"--input_checkpoint={prefix}", f"--output_checkpoint={tmp_path / 'hf'}",
         "--output_format=hf", "--label_list=entailment,neutral,contradiction"]
  done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)
  assert done.returncode == 0, done.stderr[-2000:]
  assert "tf1_to_hf" in done.stdout and "(classifier)" in done.stdout
  cfg = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert cfg["architectures"] == ["AlbertForSequenceClassification"]
  assert cfg["id2label"] == {"0": "entailment", "1": "neutral", "2": "contradiction"}
  with pytest.raises(AlbertError, match=r"^label list \(a, b\) must name each of the 3 classes "
                     "once$"):
    convert(str(tmp_path / "tf1" / "albert_config.json"), prefix, str(tmp_path / "hf2"),
            output_format="hf", label_list=["a", "b"])
  assert not (tmp_path / "hf2").exists()
  with pytest.raises(AlbertError, match="--label_list names a classifier's classes, but .* "
                     "holds a squad_v1 model"):
    convert(None, str(DATA / "hf_squad"), str(tmp_path / "x" / "model.ckpt"),
            label_list=["a", "b"])
