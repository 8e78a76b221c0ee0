"""The road to Keras 3: the HF directory our converter writes is what keras-hub's
`AlbertBackbone.from_preset(<dir>)` loads, and keras-hub computes our encoder's outputs from it.

keras-hub is not a dependency: tests/fixtures/make_keras_hub_reference.py ran once with it
(JAX backend) and committed its outputs (tests/fixtures/keras_hub/reference.npz). Here the same
official TF1 checkpoint goes through `python -m albert_tf.cli.convert --output_format=hf`
again: the directory must hold the very tensors keras-hub loaded, and our AlbertEncoder on it
must give keras-hub's outputs.
"""

import json
import os
import subprocess
import sys

import numpy as np
from safetensors.numpy import load_file

from albert_tf.checkpoints.init import init_from_checkpoint
from albert_tf.config import AlbertConfig
from albert_tf.networks.encoder import AlbertEncoder
from tests.helpers.paths import FIXTURES_DIR, REPO

DATA = FIXTURES_DIR / "keras_hub"


def _convert_to_hf(tmp_path):
  target = str(tmp_path / "hf")
  proc = subprocess.run(
      [sys.executable, "-m", "albert_tf.cli.convert",
       f"--albert_config_file={DATA / 'tf1' / 'albert_config.json'}",
       f"--input_checkpoint={DATA / 'tf1' / 'model.ckpt'}", f"--output_checkpoint={target}",
       "--output_format=hf"],
      capture_output=True, text=True, timeout=300, check=False, cwd=REPO,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO))
  assert proc.returncode == 0, proc.stderr[-3000:]
  return target


def test_our_hf_directory_gives_keras_hub_outputs(tmp_path):
  hf_dir = _convert_to_hf(tmp_path)
  # The converter writes today exactly what keras-hub loaded when the reference was made.
  with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
    config = json.load(f)
  with open(DATA / "hf" / "config.json", encoding="utf-8") as f:
    assert config == json.load(f)
  got, loaded = load_file(os.path.join(hf_dir, "model.safetensors")), load_file(
      str(DATA / "hf" / "model.safetensors"))
  assert sorted(got) == sorted(loaded)
  for key, value in loaded.items():
    np.testing.assert_array_equal(got[key], value, err_msg=key)

  # What keras-hub built from config.json: the same architecture.
  with open(DATA / "reference.json", encoding="utf-8") as f:
    keras_hub_config = json.load(f)["backbone_config"]
  assert {k: keras_hub_config[k] for k in ("num_layers", "num_groups", "num_inner_repetitions",
                                           "embedding_dim", "hidden_dim", "vocabulary_size")} \
      == dict(num_layers=4, num_groups=2, num_inner_repetitions=2, embedding_dim=16,
              hidden_dim=32, vocabulary_size=300)

  reference = np.load(DATA / "reference.npz")
  encoder = AlbertEncoder(AlbertConfig.from_json_file(str(DATA / "tf1" / "albert_config.json")))
  init_from_checkpoint(encoder, hf_dir)
  outputs = encoder({"input_ids": reference["token_ids"], "input_mask": reference["padding_mask"],
                     "segment_ids": reference["segment_ids"]}, training=False)
  assert reference["padding_mask"].min() == 0  # padding is part of the comparison
  for key in ("sequence_output", "pooled_output"):
    assert np.abs(reference[key]).max() > 0.5  # not a degenerate reference
    np.testing.assert_allclose(outputs[key].numpy(), reference[key], atol=1e-5, rtol=0,
                               err_msg=key)
