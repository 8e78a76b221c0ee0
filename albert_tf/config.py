"""AlbertConfig: reads and writes the official `albert_config.json` unchanged.

Every official field is accepted, the released files' extra keys (net_structure_type, gap_size,
num_memory_blocks, layers_to_keep) are kept and written back, and one extension field,
`sharing`, selects the paper's parameter-sharing ablations.
"""

import copy
import difflib
import json

from absl import logging

from albert_tf.common import fileio
from albert_tf.errors import AlbertError, file_error_reason, file_errors, parse_json_object

# The activations the official `modeling.get_activation` knows, plus HF's alias for the same gelu.
KNOWN_ACTIVATIONS = ("linear", "relu", "gelu", "gelu_new", "tanh")

# Which sub-blocks are shared across the layers of a group (the paper's Table 4 ablations).
#   all:       attention and FFN shared (official ALBERT)
#   attention: only attention (+ its LayerNorm) shared; every layer has its own FFN
#   ffn:       only the FFN (+ its LayerNorm) shared; every layer has its own attention
#   none:      nothing shared (= BERT); num_hidden_groups is ignored
SHARING_MODES = ("all", "attention", "ffn", "none")

_INT_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
               "num_hidden_groups", "num_attention_heads", "intermediate_size",
               "inner_group_num", "down_scale_factor", "max_position_embeddings",
               "type_vocab_size")
_FLOAT_FIELDS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range")

# The fields a config file must give. The official AlbertConfig has no default for vocab_size
# (its from_dict leaves it None and the model fails); the others set the model's shape, differ
# between the released models, and the official defaults are xxlarge's (H 4096, 64 heads,
# I 16384; 12 layers, where large and xlarge have 24 and a 24-layer checkpoint's shared
# weights would load into 12 layers without a word). The remaining fields' defaults are the
# value of every released config (E 128, 1 group, 1 inner group, gelu, 512 positions, 2 token
# types, initializer 0.02) or only matter in training (dropout).
REQUIRED_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                   "intermediate_size")
# Every key a config file may hold without a warning: the official fields, ours (`sharing`) and
# the released files' unused extras.
RELEASED_EXTRA_KEYS = ("net_structure_type", "gap_size", "num_memory_blocks", "layers_to_keep")
KNOWN_KEYS = _INT_FIELDS + _FLOAT_FIELDS + ("hidden_act", "sharing") + RELEASED_EXTRA_KEYS
_warned_keys = set()  # (file, key): a config read several times by one run is warned about once


def check_config_keys(json_object, source):
  """A config file's keys: a missing REQUIRED_FIELDS entry is an error, an unknown key a
  warning naming the closest known one (`hidden_sizee` -> `hidden_size`).

  Raises:
    AlbertError: e.g. "albert_config.json: no vocab_size: ...".
  """
  if json_object.get("model_type") == "albert":
    # An HF transformers config.json: HF's keys, and HF leaves out the fields equal to its
    # defaults (which are the official ones); checkpoints/hf/config.py reads those.
    return
  for key in json_object:
    if key in KNOWN_KEYS or (source, key) in _warned_keys:
      continue
    _warned_keys.add((source, key))
    close = difflib.get_close_matches(key, KNOWN_KEYS, n=1)
    hint = f"did you mean {close[0]!r}?" if close else "not an ALBERT config field"
    logging.warning("%s: unknown key %r (%s); it is ignored", source, key, hint)
  missing = [field for field in REQUIRED_FIELDS if field not in json_object]
  if missing:  # (after the warnings: a misspelt key is often why a field is missing)
    raise AlbertError(f"{source}: no {missing[0]}: a config file must give "
                      f"{', '.join(REQUIRED_FIELDS)} (a default would build a model of "
                      f"another shape than the checkpoint's)")


class AlbertConfig:
  """Configuration of an ALBERT model (the fields of the official `albert_config.json`).

  Attributes mirror the official `AlbertConfig`. `extra` holds any key the official code
  does not read (e.g. net_structure_type), so that writing the config back is lossless.
  """

  def __init__(self,
               vocab_size=30000,
               embedding_size=128,
               hidden_size=4096,
               num_hidden_layers=12,
               num_hidden_groups=1,
               num_attention_heads=64,
               intermediate_size=16384,
               inner_group_num=1,
               down_scale_factor=1,
               hidden_act="gelu",
               hidden_dropout_prob=0.0,
               attention_probs_dropout_prob=0.0,
               max_position_embeddings=512,
               type_vocab_size=2,
               initializer_range=0.02,
               sharing="all",
               source=None,
               **extra):
    # Defaults are the official AlbertConfig constructor's (xxlarge shape).
    self.vocab_size = vocab_size
    self.embedding_size = embedding_size
    self.hidden_size = hidden_size
    self.num_hidden_layers = num_hidden_layers
    self.num_hidden_groups = num_hidden_groups
    self.num_attention_heads = num_attention_heads
    self.intermediate_size = intermediate_size
    self.inner_group_num = inner_group_num
    self.down_scale_factor = down_scale_factor
    self.hidden_act = hidden_act
    self.hidden_dropout_prob = hidden_dropout_prob
    self.attention_probs_dropout_prob = attention_probs_dropout_prob
    self.max_position_embeddings = max_position_embeddings
    self.type_vocab_size = type_vocab_size
    self.initializer_range = initializer_range
    self.sharing = sharing
    self.extra = dict(extra)
    # Where the config came from, for error messages ("albert_config.json: ...").
    self._source = source
    self.validate()

  # ---------------------------------------------------------------- construction
  @classmethod
  def from_dict(cls, json_object, source=None):
    """Builds a config from a dict with the official keys (unknown keys go to `extra`).

    With a `source` (the dict was read from that file), the keys are checked first
    (`check_config_keys`): a required field missing is an error, an unknown key a warning.
    """
    if not isinstance(json_object, dict):
      raise AlbertError(f"{source or 'config'}: expected a JSON object, got "
                        f"{type(json_object).__name__}")
    if source is not None:
      check_config_keys(json_object, source)
    return cls(source=source, **copy.deepcopy(json_object))

  @classmethod
  def from_json_file(cls, json_file):
    """Reads an official `albert_config.json` (a local path or any tf.io.gfile URL)."""
    try:
      text = fileio.read_text(json_file)
    except file_errors() as e:
      raise AlbertError(f"{json_file}: cannot read config ({file_error_reason(e)})") from None
    except UnicodeDecodeError as e:
      raise AlbertError(f"{json_file}: not a UTF-8 text file (byte {e.start}); expected an "
                        f"albert_config.json (was a checkpoint or model file given?)") from None
    obj = parse_json_object(text, json_file, "a JSON object of ALBERT config fields")
    return cls.from_dict(obj, source=str(json_file))

  # ---------------------------------------------------------------- serialization
  def to_dict(self):
    """The official keys, then the kept extra keys; `sharing` only when not the default."""
    out = {
        "attention_probs_dropout_prob": self.attention_probs_dropout_prob,
        "hidden_act": self.hidden_act,
        "hidden_dropout_prob": self.hidden_dropout_prob,
        "embedding_size": self.embedding_size,
        "hidden_size": self.hidden_size,
        "initializer_range": self.initializer_range,
        "intermediate_size": self.intermediate_size,
        "max_position_embeddings": self.max_position_embeddings,
        "num_attention_heads": self.num_attention_heads,
        "num_hidden_layers": self.num_hidden_layers,
        "num_hidden_groups": self.num_hidden_groups,
        "inner_group_num": self.inner_group_num,
        "down_scale_factor": self.down_scale_factor,
        "type_vocab_size": self.type_vocab_size,
        "vocab_size": self.vocab_size,
    }
    out.update(copy.deepcopy(self.extra))
    if self.sharing != "all":
      out["sharing"] = self.sharing
    return out

  def to_json_string(self):
    return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

  def to_json_file(self, json_file):
    """Writes the config to `json_file` (any path fileio takes), whole or not at all."""
    fileio.write_text(json_file, self.to_json_string())

  def __eq__(self, other):
    return isinstance(other, AlbertConfig) and self.to_dict() == other.to_dict()

  def __repr__(self):
    return f"AlbertConfig({self.to_dict()})"

  # ---------------------------------------------------------------- derived values
  def group_index(self, layer_index):
    """Group used by layer `layer_index`, computed in floating point as the official code does.

    For some (L, G) this is not `layer_index * G // L` (e.g. L = G = 22 leaves a group unused),
    and official checkpoints of such layouts only load with the float formula.
    """
    if self.sharing == "none":
      return layer_index
    return int(layer_index / self.num_hidden_layers * self.num_hidden_groups)

  def check_sequence_length(self, max_seq_length, flag="--max_seq_length"):
    """Raises AlbertError unless sequences of `max_seq_length` fit the position embeddings."""
    if max_seq_length > self.max_position_embeddings:
      raise AlbertError(f"{flag}={max_seq_length} exceeds max_position_embeddings="
                        f"{self.max_position_embeddings} of the albert config (the model was "
                        "only trained up to that length)")

  @property
  def source(self):
    """The file the config was read from (None when built in code), for error messages."""
    return self._source

  # ---------------------------------------------------------------- validation
  def _fail(self, field, value, expected):
    where = self._source or "albert config"
    raise AlbertError(f"{where}: {field}={value!r} is invalid: {expected}")

  def validate(self):
    """Raises AlbertError (one line, naming field and value) if the config is inconsistent."""
    for field in _INT_FIELDS:
      value = getattr(self, field)
      if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
          setattr(self, field, int(value))
          continue
        self._fail(field, value, "expected an integer")
    for field in _FLOAT_FIELDS:
      value = getattr(self, field)
      if isinstance(value, bool) or not isinstance(value, (int, float)):
        self._fail(field, value, "expected a number")
    for field in ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                  "num_hidden_groups", "num_attention_heads", "intermediate_size",
                  "inner_group_num", "down_scale_factor", "max_position_embeddings",
                  "type_vocab_size"):
      if getattr(self, field) <= 0:
        self._fail(field, getattr(self, field), "expected a positive integer")
    for field in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
      value = getattr(self, field)
      if not 0.0 <= value < 1.0:
        self._fail(field, value, "expected a probability in [0, 1)")
    if self.initializer_range < 0:
      self._fail("initializer_range", self.initializer_range, "expected a number >= 0")
    if self.hidden_size % self.num_attention_heads:
      self._fail("hidden_size", self.hidden_size,
                 f"must be a multiple of num_attention_heads={self.num_attention_heads}")
    if self.num_hidden_groups > self.num_hidden_layers:
      self._fail("num_hidden_groups", self.num_hidden_groups,
                 f"must not exceed num_hidden_layers={self.num_hidden_layers}")
    if not isinstance(self.hidden_act, str) or self.hidden_act.lower() not in KNOWN_ACTIVATIONS:
      self._fail("hidden_act", self.hidden_act, f"expected one of {', '.join(KNOWN_ACTIVATIONS)}")
    if self.sharing not in SHARING_MODES:
      self._fail("sharing", self.sharing, f"expected one of {', '.join(SHARING_MODES)}")
    if self.down_scale_factor != 1:
      # The official modeling code reads but never uses it; other values would be silently
      # ignored there, so refuse rather than pretend.
      self._fail("down_scale_factor", self.down_scale_factor, "only 1 is supported")
