"""ALBERT TF-Hub modules as the source of config, SentencePiece model and initial weights.

The official scripts' `--albert_hub_module_handle` takes a TF-Hub module and reads everything
from it: the SentencePiece model and do_lower_case (official `FullTokenizer.from_hub_module`: the
`tokenization_info` signature's `vocab_file` and `do_lower_case` outputs, read by
albert_tf/text/hub_tokenization.py, which the tokenizer uses alone) and the encoder weights
(`hub.Module(handle)` in `fine_tuning_utils.create_albert`). Two kinds of module are read here,
from a local directory (or any path TensorFlow reads, e.g. gs://), never from the network:

* `tf1_hub`: the TF1 hub format written by the official `export_to_tfhub.py`
  (`hub.create_module_spec(...).export(...)`): `tfhub_module.pb`, a `saved_model.pb` with one
  graph per tag set ({"train"} and {}) carrying the signatures `tokens`, `sop`, `mlm` and
  `tokenization_info`, `variables/variables.*` holding a name-based checkpoint with the official
  names (`bert/...`, `cls/...`, no scope prefix), and `assets/` with albert_config.json,
  30k-clean.model and 30k-clean.vocab.
* `albert_tf`: our `export_savedmodel.py` output (albert_tf.export.hub_encoder): a TF2 SavedModel
  whose variables are the AlbertPretrainer's, stored under `model_variables/<i>` in the order of
  `AlbertPretrainer(config).variables`; assets 30k-clean.model and albert_config.json.
"""

import dataclasses
import posixpath
import re
from typing import Dict, Optional

import tensorflow as tf

from albert_tf.checkpoints import integrity
from albert_tf.checkpoints import official_names
from albert_tf.checkpoints.tf1 import LoadReport
from albert_tf.common import fileio
from albert_tf.common.export_format import CONFIG_ASSET_NAME, VOCAB_ASSET_NAME
from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError, file_error_reason, file_errors, parse_json_object
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.text import hub_tokenization

TF1_HUB = "tf1_hub"
ALBERT_TF = "albert_tf"

_OURS_KEY_RE = re.compile(r"^model_variables/(\d+)/\.ATTRIBUTES/VARIABLE_VALUE$")


@dataclasses.dataclass
class HubModule:
  """What `read_hub_module` found in a module directory.

  path: the module directory.
  format: "tf1_hub" (official export_to_tfhub.py) or "albert_tf" (our export_savedmodel.py).
  config: the module's albert_config.json asset.
  spm_model_file: the SentencePiece model asset (the tokenization_info `vocab_file`).
  vocab_file: the 30k-clean.vocab asset, or None.
  do_lower_case: the tokenization_info `do_lower_case` of the module.
  checkpoint_prefix: `<path>/variables/variables`.
  variable_names: {official name: name in the checkpoint at checkpoint_prefix}; filled for
    tf1_hub modules (the official names with any scope prefix the module carries), and on the
    first `load_hub_module_weights` for albert_tf modules.
  """
  path: str
  format: str
  config: AlbertConfig
  spm_model_file: str
  vocab_file: Optional[str]
  do_lower_case: bool
  checkpoint_prefix: str
  variable_names: Dict[str, str] = dataclasses.field(default_factory=dict, repr=False)


def read_hub_module(handle):
  """Reads an ALBERT TF-Hub module directory (official TF1 hub format or our export).

  Args:
    handle: the module's local directory (or a gs:// path); URLs are refused.
  Returns:
    HubModule.
  Raises:
    AlbertError (one line, naming the path): a URL, not a directory, no saved_model.pb, no
      albert_config.json or SentencePiece asset, an unreadable config, not an ALBERT module.
  """
  path, saved_model = hub_tokenization.read_module_directory(handle)
  config_file = posixpath.join(path, "assets", CONFIG_ASSET_NAME)
  if not fileio.exists(config_file):
    raise AlbertError(f"{path}: no assets/{CONFIG_ASSET_NAME} (expected an ALBERT TF-Hub "
                      f"module with its albert_config.json asset)")
  config = _read_config(config_file)
  checkpoint_prefix = posixpath.join(path, "variables", "variables")
  shapes = _checkpoint_shapes(path, checkpoint_prefix)
  vocab = posixpath.join(path, "assets", VOCAB_ASSET_NAME)
  vocab_file = vocab if fileio.exists(vocab) else None
  if hub_tokenization.is_tf1_hub_module(path):
    variable_names = _tf1_variable_names(path, shapes)
    spm_model_file, do_lower_case = hub_tokenization.tf1_tokenization_info(path, saved_model)
    return HubModule(path=path, format=TF1_HUB, config=config, spm_model_file=spm_model_file,
                     vocab_file=vocab_file, do_lower_case=do_lower_case,
                     checkpoint_prefix=checkpoint_prefix, variable_names=variable_names)
  if not any(_OURS_KEY_RE.match(name) for name in shapes):
    raise AlbertError(f"{path}: not an ALBERT TF-Hub module (no tfhub_module.pb and no "
                      f"albert_tf encoder variables; expected the official export_to_tfhub.py "
                      f"or export_savedmodel.py output)")
  spm_model_file, do_lower_case = hub_tokenization.albert_tf_tokenization_info(path)
  return HubModule(path=path, format=ALBERT_TF, config=config, spm_model_file=spm_model_file,
                   vocab_file=vocab_file, do_lower_case=do_lower_case,
                   checkpoint_prefix=checkpoint_prefix)


def load_hub_module_weights(model, module):
  """Loads a module's encoder (and pretraining heads, when both have them) into a model.

  Args:
    model: AlbertEncoder, AlbertPretrainer or any model with an AlbertEncoder at `.encoder`.
    module: a HubModule from `read_hub_module`, or a module directory.
  Returns:
    LoadReport (`missing` are head variables the module lacks; `unexpected` module variables the
    model has no place for, e.g. `cls/...` for a classifier).
  Raises:
    AlbertError: an encoder variable is missing from the module (names the first one and the
      count) or has another shape than the model's (wrong config); the model is then unchanged.
  """
  if not isinstance(module, HubModule):
    module = read_hub_module(module)
  if not module.variable_names:
    module.variable_names = _albert_tf_variable_names(module)
  reader = integrity.checkpoint_reader(module.checkpoint_prefix)
  shapes = reader.get_variable_to_shape_map()
  encoder_names = set(official_names.encoder_variable_map(model))
  model_vars = official_names.model_variable_map(model)
  missing_encoder = sorted(n for n in encoder_names if n not in module.variable_names)
  if missing_encoder:
    raise AlbertError(f"{module.path}: the module lacks encoder variable {missing_encoder[0]} "
                      f"({len(missing_encoder)} of {len(encoder_names)} encoder variables "
                      f"missing; wrong albert_config.json, or not an ALBERT encoder module?)")
  loaded, missing, assignments = [], [], []
  for name, variable in sorted(model_vars.items()):
    source = module.variable_names.get(name)
    if source is None:
      missing.append(name)
      continue
    want = variable.shape.as_list()
    have = list(shapes[source])
    if have != want:
      raise AlbertError(f"{module.path}: variable {name} has shape {have} in the module but the "
                        f"model expects {want} (does the module's albert_config.json match "
                        f"its variables?)")
    assignments.append((variable, source))
    loaded.append(name)
  used = set(loaded)
  unexpected = sorted(n for n in module.variable_names if n not in used)
  extra_encoder = [n for n in unexpected if n.startswith(official_names.ENCODER_SCOPE)]
  if extra_encoder:
    # E.g. group_1 weights with a one-group config: the module would compute something else.
    raise AlbertError(f"{module.path}: the module holds encoder variable {extra_encoder[0]} that "
                      f"its albert_config.json has no place for ({len(extra_encoder)} such model "
                      f"variables; does the config match its variables?)")
  # Assign only after every check, so a refused module leaves the model untouched.
  for variable, source in assignments:
    variable.assign(reader.get_tensor(source).astype(variable.dtype.as_numpy_dtype))
  return LoadReport(checkpoint=module.path, loaded=loaded, missing=missing,
                    unexpected=unexpected)


# ------------------------------------------------------------------------------- reading


def _read_config(config_file):
  try:
    text = fileio.read_text(config_file)
  except file_errors() as e:
    raise AlbertError(f"{config_file}: cannot read config ({file_error_reason(e)})") from None
  obj = parse_json_object(text, config_file, "a JSON object of ALBERT config fields")
  return AlbertConfig.from_dict(obj, source=config_file)


def _checkpoint_shapes(path, prefix):
  if not fileio.exists(prefix + ".index"):
    raise AlbertError(f"{path}: no variables/variables.index (a TF-Hub module without "
                      f"weights?)")
  return integrity.checkpoint_reader(prefix, "TF-Hub module weights").get_variable_to_shape_map()


def _tf1_variable_names(path, shapes):
  """{official name: checkpoint name}: the names with any scope prefix (`module/`) removed."""
  anchor = official_names.WORD_EMBEDDINGS
  anchors = sorted(n for n in shapes if n == anchor or n.endswith("/" + anchor))
  if not anchors:
    raise AlbertError(f"{path}: not an ALBERT module (no {anchor} among its "
                      f"{len(shapes)} variables)")
  prefix = anchors[0][:-len(anchor)]
  return {name[len(prefix):]: name for name in shapes
          if name.startswith(prefix) and not official_names.is_optimizer_state(name)
          and name[len(prefix):] != "global_step"}


def _albert_tf_variable_names(module):
  """{official name: checkpoint key} for our export.

  The export stores the AlbertPretrainer's variables as `model_variables/<i>` without their
  official names. When its albert_export.json lists them (`tf1_variable_names`, official name of
  variable i) that list is used; otherwise the order of `AlbertPretrainer(config).variables`,
  checked against the stored count and shapes.
  """
  shapes = integrity.checkpoint_reader(module.checkpoint_prefix).get_variable_to_shape_map()
  stored = {int(m.group(1)): name for name in shapes for m in [_OURS_KEY_RE.match(name)] if m}
  recorded = hub_tokenization.export_info(module.path).get("tf1_variable_names")
  if isinstance(recorded, list) and len(recorded) == len(stored) and (
      sorted(stored) == list(range(len(stored)))):
    return {name: stored[i] for i, name in enumerate(recorded) if name}
  with tf.init_scope():
    template = AlbertPretrainer(module.config, name="hub_module_template")
  variables = template.variables
  if len(stored) != len(variables) or sorted(stored) != list(range(len(variables))):
    raise AlbertError(f"{module.path}: the module stores {len(stored)} model variables but its "
                      f"albert_config.json gives a model with {len(variables)} (does the config "
                      f"match its variables?)")
  index = {id(v): i for i, v in enumerate(variables)}
  names = {}
  for name, variable in official_names.model_variable_map(template).items():
    key = stored[index[id(variable)]]
    if list(shapes[key]) != variable.shape.as_list():
      raise AlbertError(f"{module.path}: variable {name} has shape {list(shapes[key])} in the "
                        f"module but its albert_config.json gives {variable.shape.as_list()} "
                        f"(does the config match its variables?)")
    names[name] = key
  return names
