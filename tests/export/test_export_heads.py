"""An export serves only what its checkpoint holds.

export_savedmodel.py builds the pretrainer (encoder + masked-LM + sentence-order heads), as the
official export_to_tfhub.py does, but writes the `mlm` / `sop` signatures (and TF Hub's `mlm`
object) only for the heads the checkpoint held; a head it lacked is neither served nor stored,
and one line says which signature was left out and why. Checked through the real script on a
classifier's checkpoint (the issue's case: both heads absent), and in-process on a TF1 checkpoint with the masked-LM head but no sentence-order head.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import models
from albert_tf.common import kinds
from albert_tf.checkpoints import formats, hub_module
from albert_tf.checkpoints.init import init_pretrainer
from albert_tf.export import export_encoder
from albert_tf.export.hub_encoder import stored_variables
from albert_tf.models.pretrainer import AlbertPretrainer
from tests.helpers import scripts
from tests.helpers.albert_numpy import make_official_weights, write_official_checkpoint
from tests.helpers.model_inputs import randomize_weights
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_albert_config, tiny_config_dict

_ALL = {"serving_default", "tokens", "tokenization_info", "mlm", "sop"}
_IDS = np.array([[2, 10, 11, 12, 3, 0]], np.int32)


def _tokens(signature_fn):
  return signature_fn(input_ids=tf.constant(_IDS),
                      input_mask=tf.constant((_IDS > 0).astype(np.int32)),
                      segment_ids=tf.zeros_like(_IDS))


def _albert_directory(root, kind):
  """An official-layout directory: albert_config.json, 30k-clean.model, model.ckpt-best (TF1)."""
  directory = root / kind
  directory.mkdir()
  model = models.build(kind, tiny_albert_config(), 2 if kind == kinds.CLASSIFIER else None)
  randomize_weights(model, seed=7)
  formats.adapter_class(formats.TF1).save(model, str(directory / "model.ckpt-best"))
  (directory / "albert_config.json").write_text(tiny_albert_config().to_json_string())
  make_tiny_spm_model(str(directory), name="30k-clean")
  return directory, model


def test_export_savedmodel_of_a_classifier_serves_the_encoder_alone(tmp_path):
  """(A pretraining checkpoint's export, every signature: tests/export/test_serving.py.)"""
  kind = kinds.CLASSIFIER
  directory, model = _albert_directory(tmp_path, kind)
  proc = scripts.run_script("export_savedmodel.py", [
      f"--albert_directory={directory.name}", "--export_path=hub"], cwd=str(tmp_path))
  assert proc.returncode == 0, scripts.describe(proc)
  notes = [line for line in proc.stdout.splitlines() if line.startswith("note:")]
  loaded = tf.saved_model.load(str(tmp_path / "hub"))
  assert notes == [
      f"note: signatures mlm and sop left out of the export: {directory.name}/model.ckpt-best "
      "holds a classifier checkpoint (2 classes; GLUE-style classifier, run_classifier.py; its "
      "output_weights [2, 32]), without the masked-LM and sentence-order heads (a served "
      "signature must not answer with random weights)"], proc.stdout
  assert set(loaded.signatures) == _ALL - {"mlm", "sop"}
  assert not hasattr(loaded, "mlm")  # TF Hub's MLM object is left out with its signature
  # Only the encoder is stored, with the checkpoint's weights.
  assert len(loaded.model_variables) == len(model.encoder.variables)
  got = _tokens(loaded.signatures["tokens"])["pooled_output"].numpy()
  want = model.encoder(dict(input_ids=_IDS, input_mask=(_IDS > 0).astype(np.int32),
                            segment_ids=np.zeros_like(_IDS)), training=False)["pooled_output"]
  np.testing.assert_allclose(got, want.numpy(), atol=1e-5)
  # The export still reads back as a module for --albert_hub_module_handle: the encoder whole.
  classifier = models.build(kinds.CLASSIFIER, tiny_albert_config(), 2)
  report = hub_module.load_hub_module_weights(classifier, str(tmp_path / "hub"))
  assert report.missing == ["output_bias", "output_weights"] and report.unexpected == []


def test_a_checkpoint_without_the_sentence_order_head_exports_mlm_only(tmp_path):
  weights = make_official_weights(tiny_config_dict())
  weights = {k: v for k, v in weights.items() if not k.startswith("cls/seq_relationship/")}
  prefix = write_official_checkpoint(weights, str(tmp_path / "ckpt" / "model.ckpt"))
  pretrainer = AlbertPretrainer(tiny_albert_config())
  heads, held = init_pretrainer(pretrainer, prefix)
  assert heads == ("mlm",) and held.kinds == (kinds.PRETRAINER,)
  export = export_encoder(pretrainer, str(tmp_path / "hub"), heads=heads)
  loaded = tf.saved_model.load(export)
  assert set(loaded.signatures) == _ALL - {"sop"}
  assert hasattr(loaded, "mlm")
  stored = stored_variables(pretrainer, heads)
  assert len(loaded.model_variables) == len(stored) == (
      len(pretrainer.encoder.variables) + len(pretrainer.masked_lm_head.variables))
  np.testing.assert_array_equal(
      pretrainer.masked_lm_head.output_bias.numpy(), weights["cls/predictions/output_bias"])


def test_our_tf2_pretraining_checkpoint_holds_both_heads(tmp_path):
  pretrainer = AlbertPretrainer(tiny_albert_config())
  prefix = str(tmp_path / "tf2" / "ckpt")
  formats.adapter_class(formats.TF2).save(pretrainer, prefix)
  assert init_pretrainer(AlbertPretrainer(tiny_albert_config()), prefix)[0] == ("mlm", "sop")
  classifier = models.build(kinds.CLASSIFIER, tiny_albert_config(), 2)
  formats.adapter_class(formats.TF2).save(classifier, str(tmp_path / "cls" / "ckpt"))
  assert init_pretrainer(AlbertPretrainer(tiny_albert_config()),
                         str(tmp_path / "cls" / "ckpt"))[0] == ()
  assert os.path.exists(str(tmp_path / "cls" / "ckpt.index"))
