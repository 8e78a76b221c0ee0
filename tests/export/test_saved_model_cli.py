"""TensorFlow's own `saved_model_cli` on our exports, as the README's "Exporting and serving" says
to use it: `show` works on every export; `run` on a serving version fails on the
tensorflow-text ops (even for token_ids), runs on its `core_ops/` copy (token_ids, tf_example)
and on the hub encoder; the raw-text signature runs through saved_model_cli with
tensorflow_text imported first.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from albert_tf.config import AlbertConfig
from albert_tf.export import export_classifier, export_encoder
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.text.in_graph_tokenizer import InGraphTokenizer
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_config_dict

SEQ = 16
CLI = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
# saved_model_cli's own main, after `import tensorflow_text` has registered its ops.
WITH_TEXT_OPS = ("import sys, tensorflow_text; from tensorflow.python.tools import "
                 "saved_model_cli; sys.argv[0] = 'saved_model_cli'; saved_model_cli.main()")
TOKEN_IDS = "input_ids=[[2,10,11,3]];input_mask=[[1,1,1,1]];segment_ids=[[0,0,0,0]]"


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
  root = tmp_path_factory.mktemp("saved_model_cli")
  spm = make_tiny_spm_model(str(root))
  config = AlbertConfig.from_dict(tiny_config_dict(vocab_size=400))
  model = AlbertClassifier(config, num_classes=2)
  version = export_classifier(model, str(root / "serving"), ["neg", "pos"], SEQ, spm)
  hub = export_encoder(AlbertPretrainer(config), str(root / "hub_encoder"), spm)
  return dict(root=root, spm=spm, model=model, version=version, hub=hub)


def _cli(args, root, text_ops=False):
  argv = [sys.executable, "-c", WITH_TEXT_OPS] if text_ops else [CLI]
  return subprocess.run(argv + list(args), capture_output=True, text=True, cwd=str(root),
                        timeout=300, check=False,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES=""))


def _run(exports, directory, signature, inputs, text_ops=False, flag="--input_exprs"):
  outdir = exports["root"] / f"out_{signature}_{os.path.basename(directory)}_{int(text_ops)}"
  proc = _cli(["run", "--dir", directory, "--tag_set", "serve", "--signature_def", signature,
               flag, inputs, "--outdir", str(outdir), "--overwrite"], exports["root"], text_ops)
  return proc, outdir


def _probabilities(exports, features):
  return exports["model"]({k: np.array(v, np.int32) for k, v in features.items()},
                          training=False)["probabilities"].numpy()


def test_show_works_on_every_export(exports):
  proc = _cli(["show", "--dir", exports["version"], "--all"], exports["root"])
  assert proc.returncode == 0, proc.stderr[-2000:]
  for signature in ("serving_default", "token_ids", "tf_example"):
    assert f"signature_def['{signature}']" in proc.stdout
  assert "'SentencepieceOp'" in proc.stdout  # why `run` needs tensorflow-text here
  for directory in (os.path.join(exports["version"], "core_ops"), exports["hub"]):
    proc = _cli(["show", "--dir", directory, "--tag_set", "serve"], exports["root"])
    assert proc.returncode == 0 and "SignatureDef key" in proc.stdout, proc.stderr[-2000:]


def test_run_on_a_version_needs_the_text_ops(exports):
  proc, _ = _run(exports, exports["version"], "token_ids", TOKEN_IDS)
  assert proc.returncode != 0
  assert "Op type not registered 'SentencepieceOp'" in proc.stderr


def test_run_on_core_ops(exports):
  core_ops = os.path.join(exports["version"], "core_ops")
  proc, outdir = _run(exports, core_ops, "token_ids", TOKEN_IDS)
  assert proc.returncode == 0, proc.stderr[-2000:]
  want = _probabilities(exports, dict(input_ids=[[2, 10, 11, 3]], input_mask=[[1] * 4],
                                      segment_ids=[[0] * 4]))
  np.testing.assert_allclose(np.load(outdir / "probabilities.npy"), want, atol=1e-6)
  # tf_example: one record of max_seq_length values per feature.
  ids = [2, 10, 11, 3] + [0] * (SEQ - 4)
  mask = [1] * 4 + [0] * (SEQ - 4)
  example = f"examples=[{{'input_ids':{ids},'input_mask':{mask},'segment_ids':{[0] * SEQ}}}]"
  proc, outdir = _run(exports, core_ops, "tf_example", example.replace(" ", ""),
                      flag="--input_examples")
  assert proc.returncode == 0, proc.stderr[-2000:]
  want = _probabilities(exports, dict(input_ids=[ids], input_mask=[mask], segment_ids=[[0] * SEQ]))
  np.testing.assert_allclose(np.load(outdir / "probabilities.npy"), want, atol=1e-6)


def test_run_on_the_hub_encoder(exports):
  proc, outdir = _run(exports, exports["hub"], "tokens", TOKEN_IDS)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert np.load(outdir / "pooled_output.npy").shape == (1, 32)


def test_raw_text_through_saved_model_cli_with_tensorflow_text(exports):
  proc, outdir = _run(exports, exports["version"], "serving_default",
                      'text_a=["The cat sat on the mat."];text_b=["It then fell asleep."]',
                      text_ops=True)
  assert proc.returncode == 0, proc.stderr[-2000:]
  features = InGraphTokenizer(exports["spm"], max_seq_length=SEQ)(
      (np.array(["The cat sat on the mat."]), np.array(["It then fell asleep."])))
  want = exports["model"](features, training=False)["probabilities"].numpy()
  np.testing.assert_allclose(np.load(outdir / "probabilities.npy"), want, atol=1e-6)
  assert np.load(outdir / "label.npy", allow_pickle=True).tolist()[0] in (b"neg", b"pos")
