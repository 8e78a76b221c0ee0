"""albert_tf.checkpoints.model_source: a model directory given as --init_checkpoint supplies the
config and the SentencePiece model the flags leave out (the recipes pass only the directory),
flags given win, a directory without weights or config is one error, and --albert_dropout_prob
(the paper's fine-tuning DR) replaces the config's dropout."""

import os
import shutil

import pytest

from albert_tf.checkpoints.model_source import resolve_model_source
from albert_tf.errors import AlbertError
from tests.helpers.model_dirs import write_model_directories
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import write_tiny_config

# Another size than the tiny config's defaults, so a config read from anywhere else shows.
_CONFIG = dict(num_hidden_layers=3, intermediate_size=48)


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
  """The three kinds of model directory ({"tarball", "tf2", "hf": path}) and "spm"."""
  root = tmp_path_factory.mktemp("model_dirs")
  spm = make_tiny_spm_model(str(root / "build"))
  return dict(write_model_directories(root, spm, **_CONFIG), spm=spm)


@pytest.mark.parametrize("kind,spm_name", [("tarball", "30k-clean.model"),
                                           ("tf2", "30k-clean.model"), ("hf", "spiece.model")])
def test_a_model_directory_supplies_config_and_sentencepiece(model_dirs, kind, spm_name):
  source = resolve_model_source(init_checkpoint=model_dirs[kind])
  assert source.config.num_hidden_layers == 3 and source.config.intermediate_size == 48
  assert source.spm_model_file == os.path.join(model_dirs[kind], spm_name)
  assert source.init_checkpoint == model_dirs[kind]


@pytest.mark.parametrize("kind,vocab_name", [("tarball", "vocab_chinese.txt"),
                                             ("tf2", "vocab_chinese.txt"), ("hf", "vocab.txt")])
def test_a_wordpiece_directory_supplies_its_vocabulary(model_dirs, tmp_path, kind, vocab_name):
  """The official albert_*_zh tarballs hold vocab_chinese.txt and no .model; HF Chinese
  ALBERTs a BertTokenizer's vocab.txt: the directory alone is the model and its vocabulary."""
  directory = tmp_path / kind
  shutil.copytree(model_dirs[kind], directory,
                  ignore=shutil.ignore_patterns("30k-clean.model", "spiece.model"))
  (directory / vocab_name).write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", encoding="utf-8")
  source = resolve_model_source(init_checkpoint=str(directory))
  assert source.spm_model_file is None
  assert source.vocab_file == str(directory / vocab_name)
  assert source.config.num_hidden_layers == 3


def test_flags_given_win_over_the_directory(model_dirs, tmp_path):
  config_file = write_tiny_config(tmp_path / "albert_config.json")  # 2 layers
  source = resolve_model_source(albert_config_file=config_file, init_checkpoint=model_dirs["hf"],
                                spm_model_file="mine.model")
  assert source.config.num_hidden_layers == 2 and source.spm_model_file == "mine.model"
  # A WordPiece vocabulary given: the directory's SentencePiece model is not taken.
  source = resolve_model_source(init_checkpoint=model_dirs["tarball"], vocab_file="vocab.txt")
  assert source.spm_model_file is None and source.config.num_hidden_layers == 3


def test_a_directory_without_weights_is_one_error(model_dirs, tmp_path):
  empty_tarball = tmp_path / "albert_base_v2"
  empty_tarball.mkdir()
  shutil.copy(os.path.join(model_dirs["tarball"], "albert_config.json"), empty_tarball)
  shutil.copy(model_dirs["spm"], empty_tarball / "30k-clean.model")
  with pytest.raises(AlbertError, match=r"^--init_checkpoint .*albert_base_v2: has "
                     r"albert_config.json but no checkpoint"):
    resolve_model_source(init_checkpoint=str(empty_tarball))
  empty_hf = tmp_path / "albert_hf"
  shutil.copytree(model_dirs["hf"], empty_hf, ignore=shutil.ignore_patterns("model.safetensors"))
  with pytest.raises(AlbertError, match=r"albert_hf: HF directory has no weights file"):
    resolve_model_source(init_checkpoint=str(empty_hf))
  with pytest.raises(AlbertError, match=r"--init_checkpoint .*nothing.*no checkpoint"):
    resolve_model_source(init_checkpoint=str(tmp_path / "nothing"))


def test_a_checkpoint_without_its_config_names_the_flag(model_dirs, tmp_path):
  bare = tmp_path / "bare"
  shutil.copytree(model_dirs["tf2"], bare)
  os.remove(bare / "albert_config.json")
  with pytest.raises(AlbertError, match=r"no albert_config.json beside the checkpoint; pass "
                     r"--albert_config_file"):
    resolve_model_source(init_checkpoint=str(bare))
  with pytest.raises(AlbertError, match="one of --albert_config_file"):
    resolve_model_source()


def test_albert_dropout_prob_replaces_the_config_dropout(model_dirs):
  kept = resolve_model_source(init_checkpoint=model_dirs["tarball"])
  assert kept.config.hidden_dropout_prob == 0 and kept.config.attention_probs_dropout_prob == 0
  source = resolve_model_source(init_checkpoint=model_dirs["tarball"], albert_dropout_prob=0.1)
  assert source.config.hidden_dropout_prob == 0.1
  assert source.config.attention_probs_dropout_prob == 0.1
  assert source.config.num_hidden_layers == 3  # the rest of the config unchanged
  with pytest.raises(AlbertError, match="hidden_dropout_prob.*probability"):
    resolve_model_source(init_checkpoint=model_dirs["tarball"], albert_dropout_prob=1.5)
