"""A serving export holds each weight once: core_ops/ reads the version's own variable files.

The version (raw text, tensorflow-text ops) and its core_ops/ copy (plain TensorFlow) save the same
variables; core_ops/variables/ are hard links to <version>/variables/, and core_ops/ still gives
the model's answers from them.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.export import exporters
from albert_tf.export import serving
from albert_tf.models import AlbertClassifier
from tests.helpers import text as text_helpers
from tests.helpers.paths import REPO

VOCAB = 300


def _classifier(num_classes, seed):
  tf.keras.utils.set_random_seed(seed)
  config = AlbertConfig.from_json_file(os.path.join(REPO, "configs", "albert_tiny.json"))
  config = AlbertConfig.from_dict(dict(config.to_dict(), vocab_size=VOCAB))
  model = AlbertClassifier(config, num_classes=num_classes)
  ids = np.array([[2, 5, 7, 3, 0]], np.int32)
  model(dict(input_ids=ids, input_mask=(ids > 0).astype(np.int32),
             segment_ids=np.zeros_like(ids)))
  return model


def _features():
  ids = np.array([[2, 15, 40, 61, 3, 0, 0], [2, 9, 3, 22, 3, 0, 0]], np.int32)
  return dict(input_ids=ids, input_mask=(ids > 0).astype(np.int32),
              segment_ids=np.array([[0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 1, 0, 0]], np.int32))


@pytest.fixture(scope="module")
def export(tmp_path_factory):
  root = tmp_path_factory.mktemp("core_ops")
  spm = text_helpers.make_tiny_spm_model(str(root / "spm"), vocab_size=VOCAB)
  model = _classifier(3, seed=1)
  version = exporters.export_classifier(model, str(root / "export"), ["a", "b", "c"], 16,
                                        spm_model_file=spm)
  return model, version


def test_core_ops_variables_are_the_versions_files(export):
  _, version = export
  main = os.path.join(version, "variables")
  core = os.path.join(version, "core_ops", "variables")
  assert sorted(os.listdir(core)) == sorted(os.listdir(main))
  for name in os.listdir(main):
    assert os.path.samefile(os.path.join(core, name), os.path.join(main, name)), name
    assert os.stat(os.path.join(main, name)).st_nlink == 2


def test_core_ops_answers_from_the_shared_files(export):
  model, version = export
  features = _features()
  want = tf.nn.softmax(model(features, training=False)["logits"], axis=-1).numpy()
  loaded = tf.saved_model.load(os.path.join(version, "core_ops"))
  got = loaded.signatures["token_ids"](**{k: tf.constant(v) for k, v in features.items()})
  np.testing.assert_allclose(got["probabilities"].numpy(), want, atol=1e-5)


def test_other_variables_are_never_linked(tmp_path):
  # Two different models (3 vs 2 classes: the head's shapes differ): core_ops keeps its copy.
  first = exporters.export_classifier(_classifier(3, seed=2), str(tmp_path / "a"),
                                      ["a", "b", "c"], 16)
  second = exporters.export_classifier(_classifier(2, seed=3), str(tmp_path / "b"),
                                       ["a", "b"], 16)
  core = os.path.join(second, "core_ops")
  before = {name: open(os.path.join(core, "variables", name), "rb").read()
            for name in os.listdir(os.path.join(core, "variables"))}
  assert serving.share_variables(first, core) is False
  after = {name: open(os.path.join(core, "variables", name), "rb").read()
           for name in os.listdir(os.path.join(core, "variables"))}
  assert after == before
