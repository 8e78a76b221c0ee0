"""A checkpoint of another model kind is refused in one line naming both kinds.

`restore_model_weights` (what every script's evaluation, prediction and export calls, and
`from_pretrained` for task models) reads the kind the checkpoint holds from its variable names
(`formats.detect(path).held_kind()`) and compares it with the model the command builds: for
every pair of the seven kinds (and a checkpoint of the encoder alone), in the official TF1 layout
(what `model.ckpt-best` is) and in ours (the trainer's `ckpt-N`). The message names the kind
the checkpoint holds, the variable that says so, and the kind the command wanted; never a shape
error blaming albert_config.

The official one-row head (`output_weights` [1, H]) is a regression classifier or a
multiple-choice scorer: the names cannot tell them apart, so a TF1 checkpoint of one loads into
the other unless the run's best_checkpoint.json beside it records its kind (our runs write it).
Then through the real scripts: run_race.py --export_dir on a classifier's output directory, and
run_classifier.py (STS-B) --export_dir on a RACE run's output directory.
"""

import json
import os

import numpy as np
import pytest

from albert_tf import models
from albert_tf.common import kinds, output_layout
from albert_tf.checkpoints import formats
from albert_tf.checkpoints.init import restore_model_weights
from albert_tf.errors import AlbertError
from tests.helpers import finetune
from tests.helpers import scripts
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import TINY_CONFIG_FILE, tiny_albert_config

WANTED = (kinds.PRETRAINER, kinds.CLASSIFIER, kinds.REGRESSION, kinds.MULTIPLE_CHOICE,
          kinds.SQUAD_V1, kinds.SQUAD_V2, kinds.TOKEN_CLASSIFIER)
HELD = (kinds.ENCODER,) + WANTED
_CLASSES = {kinds.CLASSIFIER: 3, kinds.TOKEN_CLASSIFIER: 5}


def _build(kind, classes=None):
  return models.build(kind, tiny_albert_config(), classes or _CLASSES.get(kind))


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
  """{(format, kind): checkpoint prefix}: one model of each kind in TF1 and TF2."""
  root = tmp_path_factory.mktemp("kinds")
  written = {}
  for fmt in (formats.TF1, formats.TF2):
    for kind in HELD:
      prefix = str(root / f"{fmt}_{kind}" / "model.ckpt")
      formats.adapter_class(fmt).save(_build(kind), prefix)
      written[fmt, kind] = prefix
  return written


def _is_one_row_pair(fmt, held, wanted):
  return (fmt == formats.TF1 and held != wanted
          and {held, wanted} <= set(kinds.ONE_ROW_KINDS))


@pytest.mark.parametrize("fmt", [formats.TF1, formats.TF2])
@pytest.mark.parametrize("held", HELD)
@pytest.mark.parametrize("wanted", WANTED)
def test_restore_names_the_kind_held_and_the_kind_wanted(checkpoints, fmt, held, wanted):
  path = checkpoints[fmt, held]
  model = _build(wanted)
  if held == wanted or _is_one_row_pair(fmt, held, wanted):
    restore_model_weights(model, path)  # the same kind (or one the names cannot tell): loads
    return
  with pytest.raises(AlbertError) as raised:
    restore_model_weights(model, path)
  message = str(raised.value)
  assert "\n" not in message
  one_row = fmt == formats.TF1 and held in kinds.ONE_ROW_KINDS
  held_text = "regression or multiple_choice" if one_row else held
  assert message.startswith(f"{path}: holds a{'n' if held_text[0] in 'aeiou' else ''} "
                            f"{held_text} checkpoint ("), message
  assert f"this command needs a {wanted} model" in message, message
  assert "albert_config" not in message  # the old shape error's wrong hint
  if held != kinds.ENCODER:  # the variable that gave the kind away, with its shape
    assert "its " in message and "[" in message


@pytest.mark.parametrize("held,wanted", [(kinds.REGRESSION, kinds.MULTIPLE_CHOICE),
                                         (kinds.MULTIPLE_CHOICE, kinds.REGRESSION)])
def test_a_runs_record_tells_the_one_row_heads_apart(checkpoints, tmp_path, held, wanted):
  """Our runs record the kind in best_checkpoint.json beside model.ckpt-best."""
  out = tmp_path / "out"
  out.mkdir()
  prefix = str(out / output_layout.BEST_CHECKPOINT)
  formats.adapter_class(formats.TF1).save(_build(held), prefix)
  output_layout.write_best_checkpoint_record(str(out), prefix, 1, "eval_accuracy", 0.5, {},
                                             kind=held)
  assert formats.detect(prefix).held_kind().kinds == (held,)
  with pytest.raises(AlbertError, match=f"holds a {held} checkpoint .*needs a {wanted} model"):
    restore_model_weights(_build(wanted), prefix)
  restore_model_weights(_build(held), prefix)
  assert formats.detect(prefix).kind() == (held, 1 if held == kinds.REGRESSION else None)


@pytest.mark.parametrize("fmt", [formats.TF1, formats.TF2])
def test_another_number_of_classes_is_named(checkpoints, fmt):
  path = checkpoints[fmt, kinds.CLASSIFIER]
  with pytest.raises(AlbertError, match=r"holds a classifier with 3 classes \(its "
                     r"\S*output_weights \[3, 32\]\), but this task's classifier has 2"):
    restore_model_weights(_build(kinds.CLASSIFIER, 2), path)


# ------------------------------------------------------------------------ through the scripts
@pytest.fixture(scope="module")
def spm(tmp_path_factory):
  return make_tiny_spm_model(str(tmp_path_factory.mktemp("spm")))


def _output_dir(root, kind, classes=None):
  """An output directory as a run leaves it: model.ckpt-best (TF1) and best_checkpoint.json."""
  out = root / f"{kind}_out"
  out.mkdir()
  prefix = str(out / output_layout.BEST_CHECKPOINT)
  formats.adapter_class(formats.TF1).save(_build(kind, classes), prefix)
  output_layout.write_best_checkpoint_record(str(out), prefix, 1, "eval_accuracy", 0.5, {},
                                             kind=kind)
  return out


def test_run_race_export_on_a_classifiers_output_dir(tmp_path, spm):
  out = _output_dir(tmp_path, kinds.CLASSIFIER, 2)
  finetune.write_race(str(tmp_path / "race"), splits=("dev", "test"), files_per_level=1)
  proc = scripts.run_script("run_race.py", [
      f"--output_dir={out.name}", f"--albert_config_file={TINY_CONFIG_FILE}",
      f"--spm_model_file={spm}", "--max_seq_length=32", "--max_qa_length=8", "--nodo_train",
      "--data_dir=race", "--export_dir=exported"], cwd=str(tmp_path))
  assert proc.returncode == 2, scripts.describe(proc)
  line = scripts.last_line(proc.stderr)
  assert line.startswith(f"error: {out.name}/model.ckpt-best: holds a classifier checkpoint "
                         "(2 classes; GLUE-style classifier, run_classifier.py; its "
                         "output_weights [2, 32]), but this command needs a multiple_choice "
                         "model"), line
  assert "albert_config" not in line and "Traceback" not in proc.stderr
  assert not os.path.exists(tmp_path / "exported" / "albert_model.tflite")


def test_run_classifier_stsb_export_on_a_race_output_dir(tmp_path, spm):
  out = _output_dir(tmp_path, kinds.MULTIPLE_CHOICE)
  assert json.loads((out / output_layout.BEST_CHECKPOINT_JSON).read_text())["kind"] == (
      kinds.MULTIPLE_CHOICE)
  proc = scripts.run_script("run_classifier.py", [
      "--task_name=STS-B", f"--output_dir={out.name}", f"--albert_config_file={TINY_CONFIG_FILE}",
      f"--spm_model_file={spm}", "--max_seq_length=32", "--nodo_train", "--data_dir=unused",
      "--export_dir=exported"], cwd=str(tmp_path))
  assert proc.returncode == 2, scripts.describe(proc)
  line = scripts.last_line(proc.stderr)
  assert line.startswith(f"error: {out.name}/model.ckpt-best: holds a multiple_choice "
                         "checkpoint"), line
  assert "this command needs a regression model" in line, line


def test_an_official_run_from_a_hub_module_is_its_task_head(tmp_path):
  """The official run_classifier with --albert_hub_module_handle saves the module's variables
  under `module/` (its cls/ heads included) beside the task head: the task head says the kind."""
  from tests.helpers.albert_numpy import make_official_weights, write_official_checkpoint  # pylint: disable=g-import-not-at-top
  from tests.helpers.tiny_config import tiny_config_dict  # pylint: disable=g-import-not-at-top
  weights = {"module/" + k: v for k, v in make_official_weights(tiny_config_dict()).items()}
  hidden = tiny_config_dict()["hidden_size"]
  weights["output_weights"] = np.full([2, hidden], 0.5, np.float32)
  weights["output_bias"] = np.zeros([2], np.float32)
  prefix = write_official_checkpoint(weights, str(tmp_path / "model.ckpt-3"))
  assert formats.detect(prefix).held_kind().kinds == (kinds.CLASSIFIER,)
  classifier = _build(kinds.CLASSIFIER, 2)
  restore_model_weights(classifier, prefix)
  np.testing.assert_array_equal(classifier.classifier_head.output_weights.numpy(),
                                weights["output_weights"])
  with pytest.raises(AlbertError, match="holds a classifier checkpoint .*needs a pretrainer"):
    restore_model_weights(_build(kinds.PRETRAINER), prefix)
