"""The checkpoint converter (albert_tf.checkpoints.conversion): TF1 <-> TF2 <-> HF, in process and
on the command line."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file

from albert_tf import AlbertConfig, AlbertError
from albert_tf.checkpoints.hf.config import config_from_hf
from albert_tf.checkpoints.conversion import convert
from tests.helpers import albert_numpy
from tests.helpers.paths import REPO_ROOT, FIXTURES_DIR
from tests.helpers.tiny_config import tiny_config_dict


def read_all(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


@pytest.mark.parametrize("heads", [True, False])
def test_convert_both_ways_bit_exact(tmp_path, heads):
  cfg = tiny_config_dict(num_hidden_layers=2, num_hidden_groups=2)
  weights = albert_numpy.make_official_weights(cfg, seed=4, heads=heads)
  tf1_in = albert_numpy.write_official_checkpoint(weights, str(tmp_path / "in/model.ckpt"))
  config_file = tmp_path / "albert_config.json"
  AlbertConfig.from_dict(cfg).to_json_file(config_file)
  assert convert(config_file, tf1_in, str(tmp_path / "tf2/ckpt")) == "tf1_to_tf2"
  assert convert(config_file, str(tmp_path / "tf2"), str(tmp_path / "back/model.ckpt")) == \
      "tf2_to_tf1"
  back = read_all(str(tmp_path / "back/model.ckpt"))
  assert sorted(back) == sorted(weights)
  for name, value in weights.items():
    np.testing.assert_array_equal(back[name], value, err_msg=name)


def test_convert_command_line(tmp_path):
  cfg = tiny_config_dict()
  weights = albert_numpy.make_official_weights(cfg, seed=6)
  tf1_in = albert_numpy.write_official_checkpoint(weights, str(tmp_path / "in/model.ckpt"))
  config_file = tmp_path / "albert_config.json"
  AlbertConfig.from_dict(cfg).to_json_file(config_file)
  env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="2")
  cmd = [sys.executable, "-m", "albert_tf.cli.convert",
         f"--albert_config_file={config_file}", f"--input_checkpoint={tf1_in}",
         f"--output_checkpoint={tmp_path / 'out/ckpt'}"]
  done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
  assert done.returncode == 0, done.stderr[-2000:]
  assert "tf1_to_tf2" in done.stdout
  # Bad input: one line on stderr, exit code 2, no traceback.
  bad = subprocess.run(cmd[:4] + [f"--input_checkpoint={tmp_path / 'nope'}", cmd[-1]],
                       capture_output=True, text=True, env=env, timeout=300)
  assert bad.returncode == 2
  assert "Traceback" not in bad.stderr
  assert bad.stderr.strip().splitlines()[-1].startswith("error: ")
  assert "no checkpoint there" in bad.stderr


DATA = FIXTURES_DIR / "hf"


def read_tf1(prefix):
  reader = tf.train.load_checkpoint(str(prefix))
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def test_convert_in_process_hf_tf2_hf(tmp_path):
  assert convert(None, str(DATA / "hf_g2"), str(tmp_path / "tf2" / "ckpt"),
                 output_format="tf2") == "hf_to_tf2"
  assert AlbertConfig.from_json_file(tmp_path / "tf2" / "albert_config.json") == \
      config_from_hf(DATA / "hf_g2")
  assert convert(str(tmp_path / "tf2" / "albert_config.json"), str(tmp_path / "tf2"),
                 str(tmp_path / "hf"), output_format="hf") == "tf2_to_hf"
  original = load_file(DATA / "hf_g2" / "model.safetensors")
  back = load_file(tmp_path / "hf" / "model.safetensors")
  assert sorted(back) == sorted(original)
  for key, value in original.items():
    np.testing.assert_array_equal(back[key], value, err_msg=key)
  # The TF2 output describes itself: it converts again with no --albert_config_file.
  assert convert(None, str(tmp_path / "tf2"), str(tmp_path / "x" / "model.ckpt")) == "tf2_to_tf1"
  assert AlbertConfig.from_json_file(tmp_path / "x" / "albert_config.json") == \
      config_from_hf(DATA / "hf_g2")
  with pytest.raises(AlbertError, match="--direction=tf1_to_tf2 but the input is a hf"):
    convert(None, str(DATA / "hf_g2"), str(tmp_path / "y" / "ckpt"), direction="tf1_to_tf2")
  # A different albert_config.json beside the output is not overwritten.
  (tmp_path / "z").mkdir()
  (tmp_path / "z" / "albert_config.json").write_text("{}")
  with pytest.raises(AlbertError, match="albert_config.json: exists with another config"):
    convert(None, str(DATA / "hf_g2"), str(tmp_path / "z" / "model.ckpt"))


def _cli(*args):
  env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TF_CPP_MIN_LOG_LEVEL="2")
  return subprocess.run([sys.executable, "-m", "albert_tf.cli.convert", *args],
                        capture_output=True, text=True, env=env, timeout=300, check=False)


def test_convert_command_line_both_ways(tmp_path):
  src = DATA / "hf_g1"
  done = _cli(f"--input_checkpoint={src}", f"--output_checkpoint={tmp_path / 'tf1/model.ckpt'}")
  assert done.returncode == 0, done.stderr[-2000:]
  assert "hf_to_tf1" in done.stdout  # TF1 (official layout) is the default for HF input
  tf1 = read_tf1(tmp_path / "tf1" / "model.ckpt")
  original = load_file(src / "model.safetensors")
  np.testing.assert_array_equal(tf1["bert/embeddings/word_embeddings"],
                                original["albert.embeddings.word_embeddings.weight"])
  np.testing.assert_array_equal(
      tf1["bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel"],
      original["albert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight"].T)
  np.testing.assert_array_equal(tf1["cls/seq_relationship/output_weights"],
                                original["sop_classifier.classifier.weight"])
  config_file = tmp_path / "tf1" / "albert_config.json"
  assert config_file.exists()
  back = _cli(f"--albert_config_file={config_file}",
              f"--input_checkpoint={tmp_path / 'tf1/model.ckpt'}",
              f"--output_checkpoint={tmp_path / 'hf'}", "--output_format=hf")
  assert back.returncode == 0, back.stderr[-2000:]
  assert "tf1_to_hf" in back.stdout
  again = load_file(tmp_path / "hf" / "model.safetensors")
  assert sorted(again) == sorted(original)
  for key, value in original.items():
    np.testing.assert_array_equal(again[key], value, err_msg=key)
  config_file.unlink()  # a TF1 checkpoint with no config beside it needs the flag
  bad = _cli(f"--input_checkpoint={tmp_path / 'tf1'}", f"--output_checkpoint={tmp_path / 'o'}")
  assert bad.returncode == 2 and "Traceback" not in bad.stderr
  assert bad.stderr.strip().splitlines()[-1] == (
      f"error: {tmp_path / 'tf1' / 'model.ckpt'}: no albert_config.json beside the checkpoint; "
      "pass --albert_config_file")


def test_early_exit_tf2_checkpoint_names_what_it_leaves_out(tmp_path, capsys):
  from albert_tf.checkpoints import tf2  # pylint: disable=g-import-not-at-top
  from albert_tf.models.classifier import AlbertClassifier  # pylint: disable=g-import-not-at-top
  config_file = tmp_path / "albert_config.json"
  config = AlbertConfig.from_dict(tiny_config_dict(num_hidden_layers=3))
  config.to_json_file(config_file)
  model = AlbertClassifier(config, 2, early_exit="patience")
  tf2.save_tf2_checkpoint(model, str(tmp_path / "ee" / "ckpt-1"))
  for fmt in ("tf1", "hf"):
    capsys.readouterr()
    convert(config_file, str(tmp_path / "ee" / "ckpt-1"), str(tmp_path / fmt / "out"),
            output_format=fmt)
    notes = [l for l in capsys.readouterr().out.splitlines() if "early exit" in l]
    assert notes == [
        "note: early exit's internal classifiers are left out (2 layers: "
        "model/early_exit_classifiers/{layer_1,layer_2}/output_weights and output_bias): "
        f"the {fmt} output holds the ordinary classifier only"], notes
  back = read_all(str(tmp_path / "tf1" / "out"))
  assert "output_weights" in back and not any(n.startswith("early_exit/") for n in back)
