"""AlbertConfig: official files read and written unchanged; invalid configs refused in one line."""

import json
import logging

import pytest

from albert_tf import AlbertConfig, AlbertError
from albert_tf import config as config_lib
from albert_tf.checkpoints.hf.config import config_from_hf
from tests.helpers.paths import CONFIG_DIR, FIXTURES_DIR, REPO_ROOT

RELEASED = {
    "base": (12, 768, 12, 3072),
    "large": (24, 1024, 16, 4096),
    "xlarge": (24, 2048, 16, 8192),
    "xxlarge": (12, 4096, 64, 16384),
}


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("size", sorted(RELEASED))
def test_released_configs(size, version):
  config = AlbertConfig.from_json_file(CONFIG_DIR / f"albert_{size}_{version}.json")
  layers, hidden, heads, inter = RELEASED[size]
  assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
          config.intermediate_size) == (layers, hidden, heads, inter)
  assert (config.vocab_size, config.embedding_size, config.max_position_embeddings,
          config.type_vocab_size) == (30000, 128, 512, 2)
  assert config.num_hidden_groups == 1 and config.inner_group_num == 1
  expected_dropout = 0.0 if version == "v2" else 0.1
  assert config.hidden_dropout_prob == expected_dropout
  assert config.attention_probs_dropout_prob == expected_dropout


def test_round_trip_keeps_every_key(tmp_path):
  original = json.loads((CONFIG_DIR / "albert_base_v2.json").read_text())
  original["some_future_key"] = {"nested": [1, 2]}
  src = tmp_path / "albert_config.json"
  src.write_text(json.dumps(original))
  config = AlbertConfig.from_json_file(src)
  assert config.extra["net_structure_type"] == 0
  assert config.extra["layers_to_keep"] == []
  out = tmp_path / "written.json"
  config.to_json_file(out)
  assert json.loads(out.read_text()) == original
  assert AlbertConfig.from_json_file(out) == config


def test_sharing_extension_written_only_when_set(tmp_path):
  config = AlbertConfig.from_json_file(CONFIG_DIR / "albert_tiny.json")
  assert "sharing" not in config.to_dict()
  config.sharing = "attention"
  assert config.to_dict()["sharing"] == "attention"


def test_group_index_uses_float_arithmetic():
  config = AlbertConfig(num_hidden_layers=22, num_hidden_groups=22, hidden_size=64,
                        num_attention_heads=4)
  groups = [config.group_index(i) for i in range(22)]
  # 15 / 22 * 22 is 14.999... in floating point: layers 14 and 15 share group 14, 15 is unused.
  assert groups[14] == groups[15] == 14
  assert 15 not in groups
  assert groups == [int(i / 22 * 22) for i in range(22)]


@pytest.mark.parametrize("field,value,needle", [
    ("hidden_size", 770, "hidden_size=770"),
    ("num_hidden_groups", 13, "num_hidden_groups=13"),
    ("intermediate_size", -5, "intermediate_size=-5"),
    ("hidden_act", "swishy", "hidden_act='swishy'"),
    ("vocab_size", "many", "vocab_size='many'"),
    ("hidden_dropout_prob", 1.5, "hidden_dropout_prob=1.5"),
])
def test_invalid_configs_fail_in_one_line(tmp_path, field, value, needle):
  cfg = json.loads((CONFIG_DIR / "albert_base_v2.json").read_text())
  cfg[field] = value
  path = tmp_path / "bad.json"
  path.write_text(json.dumps(cfg))
  with pytest.raises(AlbertError) as info:
    AlbertConfig.from_json_file(path)
  message = str(info.value)
  assert "\n" not in message
  assert needle in message and str(path) in message


def test_not_json_names_file_and_line(tmp_path):
  path = tmp_path / "albert_config.json"
  path.write_text('{\n  "hidden_size": 768,\n  oops\n}')
  with pytest.raises(AlbertError, match=r"albert_config.json: not JSON \(line 3"):
    AlbertConfig.from_json_file(path)


def test_missing_file():
  with pytest.raises(AlbertError, match="cannot read config"):
    AlbertConfig.from_json_file("/nonexistent/albert_config.json")


# --------------------------------------------------------------------- keys of a config file
def _written(tmp_path, drop=(), **extra):
  cfg = json.loads((CONFIG_DIR / "albert_base_v2.json").read_text())
  for key in drop:
    del cfg[key]
  cfg.update(extra)
  path = tmp_path / "albert_config.json"
  path.write_text(json.dumps(cfg))
  return path


@pytest.mark.parametrize("field", config_lib.REQUIRED_FIELDS)
def test_a_required_field_missing_is_one_line_naming_file_and_field(tmp_path, field):
  path = _written(tmp_path, drop=[field])
  with pytest.raises(AlbertError, match=rf"^{path}: no {field}: ") as e:
    AlbertConfig.from_json_file(path)
  assert "\n" not in str(e.value)


def test_an_unknown_key_is_a_warning_naming_the_closest_known_one(tmp_path, caplog):
  path = _written(tmp_path, drop=["hidden_size"], hidden_sizee=768, colour="blue")
  with pytest.raises(AlbertError, match="no hidden_size"):  # the warning comes first
    AlbertConfig.from_json_file(path)
  warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
  assert warnings == [f"{path}: unknown key 'hidden_sizee' (did you mean 'hidden_size'?); it is "
                      f"ignored", f"{path}: unknown key 'colour' (not an ALBERT config field); "
                      f"it is ignored"]


CONFIG_FILES_OF_OTHERS = (
    [CONFIG_DIR / f"albert_{size}_{v}.json" for size in RELEASED for v in ("v1", "v2")]
    + [FIXTURES_DIR / "official_training" / "albert_config.json",   # the official code's
       FIXTURES_DIR / "keras_hub" / "tf1" / "albert_config.json",   # keras-hub's converter
       FIXTURES_DIR / "keras_hub" / "hf" / "config.json",           # keras-hub's HF export
       FIXTURES_DIR / "hf" / "hf_g1" / "config.json"])              # HF transformers'


@pytest.mark.parametrize("path", CONFIG_FILES_OF_OTHERS, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_configs_written_by_others_load_without_warnings(path, caplog):
  if path.name == "config.json":  # HF's: through the HF reader, and as --albert_config_file
    config_from_hf(path)
  config = AlbertConfig.from_json_file(path)
  # ... and ours, written back from it
  assert AlbertConfig.from_dict(json.loads(config.to_json_string()), source="written") == config
  assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
