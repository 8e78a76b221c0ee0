"""HF directories holding only pytorch_model.bin (or its shards) or only tf_model.h5, through the
real scripts with torch made unimportable: run_classifier.py fine-tunes and exports from them,
the converter turns them into safetensors bit-equal to transformers' own, and from_pretrained
loads them. Fixtures: tests/fixtures/hf_torch/, hf_h5/ (tests/fixtures/make_hf_other_formats.py).
"""

import os
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file

from tests.helpers import glue_fixtures
from tests.helpers import scripts
from tests.helpers.paths import FIXTURES_DIR, REPO
from tests.helpers.text import make_tiny_spm_model

TORCH = FIXTURES_DIR / "hf_torch"
H5 = FIXTURES_DIR / "hf_h5"


def _env(tmp_path):
  """The scripts' environment with a `torch` that cannot be imported (even were it installed)."""
  blocker = tmp_path / "no_torch" / "torch"
  blocker.mkdir(parents=True, exist_ok=True)
  (blocker / "__init__.py").write_text("raise ImportError('torch is blocked in this test')\n")
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
              PYTHONPATH=os.pathsep.join([str(tmp_path / "no_torch"), str(REPO)]))


def _run(tmp_path, args, cwd):
  return subprocess.run([sys.executable] + args, capture_output=True, text=True, cwd=str(cwd),
                        env=_env(tmp_path), timeout=900, check=False)


def test_run_classifier_fine_tunes_and_exports_from_a_bin_only_directory(tmp_path):
  directory = TORCH / "classifier_zip"
  assert not (directory / "model.safetensors").exists()
  spm = make_tiny_spm_model(str(tmp_path), vocab_size=300)  # the fixtures' vocab_size
  glue_fixtures.write_glue(str(tmp_path / "glue"))
  proc = _run(tmp_path, [
      os.path.join(REPO, "run_classifier.py"), "--task_name=MNLI", "--data_dir=glue",
      "--output_dir=out", f"--init_checkpoint={directory}", f"--spm_model_file={spm}",
      "--max_seq_length=24", "--do_train", "--train_step=2", "--save_checkpoints_steps=2",
      "--train_batch_size=4", "--warmup_step=0", "--learning_rate=1e-7", "--optimizer=adamw",
      "--export_dir=serving"], tmp_path)
  assert proc.returncode == 0, scripts.describe(proc)
  assert f"{directory}: loaded " in proc.stderr
  # Trained from the directory's weights (a learning rate of 1e-7 moves them by ~1e-7).
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path / "out")))
  key = [k for k in reader.get_variable_to_shape_map()
         if "word_embeddings" in k and "OPTIMIZER_SLOT" not in k][0]
  source = FIXTURES_DIR / "hf_heads" / "hf_classifier" / "model.safetensors"
  np.testing.assert_allclose(reader.get_tensor(key), load_file(source)[
      "albert.embeddings.word_embeddings.weight"], atol=1e-5)
  assert os.path.exists(scripts.versioned_export(str(tmp_path / "serving")))


def _assert_same_safetensors(expected_dir, got_dir):
  expected = load_file(expected_dir / "model.safetensors")
  got = load_file(got_dir / "model.safetensors")
  assert sorted(got) == sorted(expected)
  for key, value in expected.items():
    np.testing.assert_array_equal(got[key], value, err_msg=key)


@pytest.mark.parametrize("directory, source", [
    (TORCH / "g2_sharded", FIXTURES_DIR / "hf" / "hf_g2"),
    (H5 / "multiple_choice", FIXTURES_DIR / "hf_heads" / "hf_multiple_choice"),
], ids=["bin_shards", "h5"])
def test_converter_writes_transformers_tensors_back(tmp_path, directory, source):
  """bin shards / h5 -> HF safetensors: the tensors transformers wrote, bit-equal."""
  proc = _run(tmp_path, ["-m", "albert_tf.cli.convert",
                         f"--input_checkpoint={directory}", "--output_checkpoint=hf",
                         "--output_format=hf"], tmp_path)
  assert proc.returncode == 0, scripts.describe(proc)
  _assert_same_safetensors(source, tmp_path / "hf")


def test_converter_legacy_bin_to_tf1_and_back(tmp_path):
  """The legacy pickle -> official TF1 -> HF, in process: bit-equal to transformers' tensors."""
  from albert_tf.checkpoints.conversion import convert  # pylint: disable=g-import-not-at-top
  assert convert(None, str(TORCH / "squad_legacy"), str(tmp_path / "tf1" / "model.ckpt")) == (
      "hf_to_tf1")
  convert(str(tmp_path / "tf1" / "albert_config.json"), str(tmp_path / "tf1" / "model.ckpt"),
          str(tmp_path / "hf"), output_format="hf", model_type="squad_v1")
  _assert_same_safetensors(FIXTURES_DIR / "hf_heads" / "hf_squad", tmp_path / "hf")


def test_hostile_bin_is_a_one_line_script_error(tmp_path):
  """A pickle that would run a command, as --init_checkpoint: exit 2, one line, nothing run."""
  import shutil  # pylint: disable=g-import-not-at-top
  import zipfile  # pylint: disable=g-import-not-at-top
  directory = shutil.copytree(TORCH / "classifier_zip", tmp_path / "evil")
  sentinel = tmp_path / "ran"
  payload = (b"\x80\x02}q\x00X\x01\x00\x00\x00wq\x01cposix\nsystem\nq\x02X"
             + len(f"touch {sentinel}").to_bytes(4, "little") + f"touch {sentinel}".encode()
             + b"q\x03\x85q\x04Rq\x05s.")
  with zipfile.ZipFile(directory / "pytorch_model.bin", "w") as archive:
    archive.writestr("archive/data.pkl", payload)
  proc = _run(tmp_path, ["-m", "albert_tf.cli.convert",
                         f"--input_checkpoint={directory}", "--output_checkpoint=x/model.ckpt"],
              tmp_path)
  assert proc.returncode == 2, scripts.describe(proc)
  assert "Traceback" not in proc.stderr
  assert scripts.last_line(proc.stderr) == (
      f"error: {directory / 'pytorch_model.bin'}: refused as a PyTorch checkpoint: the pickle "
      "asks for posix.system, which is not tensor storage (nothing in it was run)")
  assert not sentinel.exists()


def test_from_pretrained_reads_every_format(tmp_path):
  del tmp_path
  import albert_tf  # pylint: disable=g-import-not-at-top
  logits = []
  for directory in (FIXTURES_DIR / "hf_heads" / "hf_classifier", TORCH / "classifier_zip",
                    H5 / "classifier"):
    model = albert_tf.from_pretrained(str(directory), model_type="classifier").model
    ref = np.load(directory / "reference.npz")
    logits.append(model(dict(input_ids=ref["input_ids"], input_mask=ref["attention_mask"],
                             segment_ids=ref["token_type_ids"]), training=False)["logits"])
  np.testing.assert_allclose(logits[1], logits[0], atol=1e-6)
  np.testing.assert_allclose(logits[2], logits[0], atol=1e-6)
