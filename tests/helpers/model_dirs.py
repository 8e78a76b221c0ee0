"""The three kinds of pretrained-model directory a user hands to the scripts and recipes, written
from one tiny AlbertPretrainer: an untarred official tarball (`albert_config.json`,
`30k-clean.model`, `model.ckpt-best`, no `checkpoint` state file, as in albert_base_v2.tar.gz),
our TF2 checkpoint directory (`ckpt-1` with its `checkpoint` file, `albert_config.json` and
`30k-clean.model` beside) and an HF transformers directory (`config.json`,
`model.safetensors`, `spiece.model`)."""

import os
import shutil

import numpy as np

from tests.helpers.tiny_config import tiny_albert_config, write_tiny_config

TARBALL, TF2, HF = "tarball", "tf2", "hf"


def write_model_directories(root, spm_model_file, **config_overrides):
  """Writes root/albert_base_v2, root/albert_tf2 and root/albert_hf (the tiny config with
  `config_overrides`); returns {TARBALL, TF2, HF: path}."""
  import albert_tf  # pylint: disable=g-import-not-at-top
  from albert_tf.checkpoints import tf2  # pylint: disable=g-import-not-at-top
  root = os.fspath(root)
  model = albert_tf.AlbertPretrainer(tiny_albert_config(**config_overrides))
  ids = np.array([[2, 10, 11, 3, 0]], np.int32)
  model(dict(input_ids=ids, input_mask=(ids > 0).astype(np.int32), segment_ids=0 * ids,
             masked_lm_positions=np.array([[1]], np.int32)), training=False)
  dirs = {name: os.path.join(root, directory) for name, directory in
          ((TARBALL, "albert_base_v2"), (TF2, "albert_tf2"), (HF, "albert_hf"))}
  albert_tf.save_tf1_checkpoint(model, os.path.join(dirs[TARBALL], "model.ckpt-best"))
  os.remove(os.path.join(dirs[TARBALL], "checkpoint"))  # the tarballs have none
  tf2.save_tf2_checkpoint(model, os.path.join(dirs[TF2], "ckpt-1"))
  for name in (TARBALL, TF2):
    write_tiny_config(os.path.join(dirs[name], "albert_config.json"), **config_overrides)
    shutil.copy(spm_model_file, os.path.join(dirs[name], "30k-clean.model"))
  albert_tf.save_hf_checkpoint(model, dirs[HF])
  shutil.copy(spm_model_file, os.path.join(dirs[HF], "spiece.model"))
  return dirs


ZH, ZH_HF = "zh", "zh_hf"


def write_chinese_directories(root, **config_overrides):
  """An official-layout Chinese model directory and its HF conversion, as the official
  albert_*_zh tarballs and HF's Chinese ALBERTs are laid out (tiny, random weights):

    root/albert_tiny_zh/     albert_config.json, model.ckpt-best.*, vocab_chinese.txt
                             (WordPiece, no .model, no `checkpoint` state file)
    root/albert_tiny_zh_hf/  config.json, model.safetensors, vocab.txt, tokenizer_config.json
                             (written by our converter from the directory above)

  Returns {ZH, ZH_HF: path}."""
  import albert_tf  # pylint: disable=g-import-not-at-top
  from albert_tf.checkpoints import conversion  # pylint: disable=g-import-not-at-top
  from tests.helpers.text import make_wordpiece_vocab  # pylint: disable=g-import-not-at-top
  root = os.fspath(root)
  zh = os.path.join(root, "albert_tiny_zh")
  vocab = make_wordpiece_vocab(os.path.join(zh, "vocab_chinese.txt"))
  with open(vocab, encoding="utf-8") as f:
    vocab_size = len(f.read().split())
  config_overrides = dict(config_overrides, vocab_size=vocab_size)
  model = albert_tf.AlbertPretrainer(tiny_albert_config(**config_overrides))
  ids = np.array([[2, 10, 11, 3, 0]], np.int32)
  model(dict(input_ids=ids, input_mask=(ids > 0).astype(np.int32), segment_ids=0 * ids,
             masked_lm_positions=np.array([[1]], np.int32)), training=False)
  albert_tf.save_tf1_checkpoint(model, os.path.join(zh, "model.ckpt-best"))
  os.remove(os.path.join(zh, "checkpoint"))  # the tarballs have none
  write_tiny_config(os.path.join(zh, "albert_config.json"), **config_overrides)
  hf = os.path.join(root, "albert_tiny_zh_hf")
  conversion.convert(None, zh, hf, output_format="hf")
  return {ZH: zh, ZH_HF: hf}
