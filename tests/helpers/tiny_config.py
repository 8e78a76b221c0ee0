"""The tiny ALBERT config of the tests, built in one place.

configs/albert_tiny.json (H=32, E=16, L=2, 4 heads, I=64, vocab 1000, 128 positions, no
dropout) is the base; a test that needs another size (vocabulary, layers, groups, dropout, ...)
passes it as an override, so every variant stays visibly a delta from the one config.
"""

import json
import pathlib

from tests.helpers.paths import CONFIG_DIR

TINY_CONFIG_FILE = CONFIG_DIR / "albert_tiny.json"


def tiny_config_dict(**overrides):
  """The tiny config as a dict (the official albert_config.json keys), with overrides."""
  cfg = json.loads(TINY_CONFIG_FILE.read_text())
  cfg.update(overrides)
  return cfg


def tiny_albert_config(**overrides):
  """The tiny config as an AlbertConfig, with overrides."""
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  return AlbertConfig.from_dict(tiny_config_dict(**overrides))


def write_tiny_config(path, **overrides):
  """Writes the tiny config, with overrides, as an albert_config.json file; returns its path.

  The parent directory is created if needed (a run's output tree often does not exist yet).
  """
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(tiny_config_dict(**overrides)), encoding="utf-8")
  return str(path)
