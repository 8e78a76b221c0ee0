"""The `checkpoint` state file names checkpoints relative to its own directory (issue 30).

With a relative output path, TensorFlow's update_checkpoint_state wrote `../ckpt` into
`albert_base_tf2/checkpoint`, and the README's second convert command
(`--input_checkpoint=albert_base_tf2`) failed: "Couldn't match files for checkpoint
albert_base_tf2/../ckpt". Here: the README's commands through the real scripts with relative
paths, and every writer of a state file with relative and absolute paths, read back from another
working directory.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf.checkpoints.conversion import convert
from albert_tf.checkpoints.tf1 import write_checkpoint_state
from tests.helpers import albert_numpy
from tests.helpers.paths import REPO
from tests.helpers.tiny_config import tiny_config_dict


def _official_model(root):
  """albert_base/ as the official tarball: albert_config.json + model.ckpt-best (TF1)."""
  cfg = tiny_config_dict()
  weights = albert_numpy.make_official_weights(cfg, seed=3)
  albert_numpy.write_official_checkpoint(weights, os.path.join(root, "albert_base",
                                                               "model.ckpt-best"))
  AlbertConfig.from_dict(cfg).to_json_file(os.path.join(root, "albert_base",
                                                        "albert_config.json"))
  return weights


def _state_names(directory):
  """(model_checkpoint_path, all_model_checkpoint_paths) as written in `directory/checkpoint`."""
  state = tf.train.get_checkpoint_state(directory)
  with open(os.path.join(directory, "checkpoint"), encoding="utf-8") as f:
    text = f.read()
  assert state is not None, text
  return text


def _run(args, cwd):
  env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.run([sys.executable] + args, capture_output=True, text=True, cwd=cwd,
                        env=env, timeout=300, check=False)
  assert proc.returncode == 0, f"{' '.join(args)}: exit {proc.returncode}\n{proc.stderr[-2000:]}"
  return proc


def test_readme_convert_export_and_from_pretrained_with_relative_paths(tmp_path):
  root = str(tmp_path)
  weights = _official_model(root)
  config = "--albert_config_file=albert_base/albert_config.json"
  # README, "Moving weights": official TF1 -> ours, and back from the directory just written.
  _run(["-m", "albert_tf.cli.convert", config,
        "--input_checkpoint=albert_base/model.ckpt-best",
        "--output_checkpoint=albert_base_tf2/ckpt"], root)
  _run(["-m", "albert_tf.cli.convert", config, "--input_checkpoint=albert_base_tf2",
        "--output_checkpoint=albert_base_tf1/model.ckpt"], root)
  os.replace(os.path.join(root, "albert_base", "albert_config.json"),
             os.path.join(root, "albert_base_tf1", "albert_config.json"))
  # export_checkpoints.py, then its output directory as a checkpoint.
  _run([os.path.join(REPO, "export_checkpoints.py"), "--albert_directory=albert_base_tf1",
        "--checkpoint_name=model.ckpt", "--export_path=clean/model.ckpt"], root)
  for directory in ("albert_base_tf2", "albert_base_tf1", "clean"):
    assert '"../' not in _state_names(os.path.join(root, directory)), directory
  # from_pretrained(<directory>), from another working directory (absolute) and from root.
  elsewhere = tmp_path / "elsewhere"
  elsewhere.mkdir()
  script = ("import sys, numpy as np, albert_tf\n"
            "for path in sys.argv[1:]:\n"
            "  m = albert_tf.from_pretrained(path, albert_config_file=%r)\n"
            "  e = [w for w in m.model.weights if 'word_embeddings' in w.name][0]\n"
            "  np.save(path.replace('/', '_') + '.npy', e.numpy())\n"
            % os.path.join(root, "albert_base_tf1", "albert_config.json"))
  _run(["-c", script, os.path.join(root, "clean"), os.path.join(root, "albert_base_tf2")],
       str(elsewhere))
  expected = weights["bert/embeddings/word_embeddings"]
  for path in (os.path.join(root, "clean"), os.path.join(root, "albert_base_tf2")):
    np.testing.assert_array_equal(np.load(elsewhere / (path.replace("/", "_") + ".npy")),
                                  expected, err_msg=path)


@pytest.mark.parametrize("style", ["relative", "nested_relative", "absolute"])
def test_converted_checkpoints_resolve_from_any_working_directory(tmp_path, monkeypatch, style):
  root = tmp_path / "work"
  root.mkdir()
  weights = _official_model(str(root))
  monkeypatch.chdir(root)
  base = {"relative": "", "nested_relative": "a/b/", "absolute": f"{root}/"}[style]
  config = "albert_base/albert_config.json"
  convert(config, "albert_base/model.ckpt-best", f"{base}tf2/ckpt")
  convert(config, f"{base}tf2", f"{base}tf1/model.ckpt")
  for name, prefix in (("tf2", "ckpt"), ("tf1", "model.ckpt")):
    text = _state_names(f"{base}{name}")
    assert text.splitlines()[0] == f'model_checkpoint_path: "{prefix}"', text
  monkeypatch.chdir(tmp_path)  # another working directory: the directories, absolute
  for name in ("tf2", "tf1"):
    directory = os.path.join(root, base, name) if style != "absolute" else f"{base}{name}"
    latest = tf.train.latest_checkpoint(directory)
    assert latest is not None, directory
  back = tf.train.load_checkpoint(tf.train.latest_checkpoint(os.path.join(root, base, "tf1")))
  np.testing.assert_array_equal(back.get_tensor("bert/embeddings/word_embeddings"),
                                weights["bert/embeddings/word_embeddings"])


def test_state_file_lists_every_kept_checkpoint_by_basename(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  write_checkpoint_state("out/ckpt-4", ["out/ckpt-2", "out/ckpt-4"])
  state = tf.train.get_checkpoint_state(str(tmp_path / "out"))
  assert list(state.all_model_checkpoint_paths) == [str(tmp_path / "out" / "ckpt-2"),
                                                    str(tmp_path / "out" / "ckpt-4")]
  assert state.model_checkpoint_path == str(tmp_path / "out" / "ckpt-4")


def test_converter_reads_an_untarred_official_directory_whole(tmp_path):
  """`--input_checkpoint=albert_base` (the untarred official directory, no state file, as the
  tarballs ship) needs no --albert_config_file: the converter reads the albert_config.json and
  model.ckpt-best inside; every official weight comes through unchanged."""
  root = str(tmp_path)
  weights = _official_model(root)
  os.remove(os.path.join(root, "albert_base", "checkpoint"))  # the tarballs have none
  proc = _run(["-m", "albert_tf.cli.convert", "--input_checkpoint=albert_base",
               "--output_checkpoint=albert_base_tf1/model.ckpt", "--output_format=tf1"], root)
  assert "tarball_to_tf1" in proc.stdout + proc.stderr
  reader = tf.train.load_checkpoint(os.path.join(root, "albert_base_tf1", "model.ckpt"))
  assert set(reader.get_variable_to_shape_map()) >= set(weights)
  for name, value in weights.items():
    np.testing.assert_array_equal(reader.get_tensor(name), value, err_msg=name)
