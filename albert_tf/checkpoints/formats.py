"""Which checkpoint format a path is, decided in one place: `detect(path)` -> an adapter.

  TF1         an official name-based checkpoint (`bert/...`, `cls/...`; prefix or directory)
  TF2         one of ours, object-based (`tf.train.Checkpoint(model=...)`)
  HF          an HF transformers directory (`config.json` + `model.safetensors`,
              `pytorch_model.bin` or `tf_model.h5`: hf/tensors.py WEIGHT_FILES, first found)
  HUB_MODULE  a TF-Hub module / SavedModel directory (the official TF1 modules, our exports)
  TARBALL     an official tarball directory, untarred (albert_base_v2.tar.gz, ...): read only

An official tarball directory holds `albert_config.json`, `30k-clean.model` / `30k-clean.vocab`
and the weights with the official TF1 names: `model.ckpt-best` (the v2 tarballs) or, in the v1
tarballs, a TF1 TF-Hub module's `variables/variables`. A TF1 or TF2 checkpoint prefix reads its
config from the `albert_config.json` beside it too.

Each adapter answers `config()`, `spm_model_file()` (the SentencePiece model it comes with:
`30k-clean.model` beside a TF1/TF2 checkpoint or in a tarball, an HF directory's `spiece.model`,
a module's asset; else None), `vocab_file()` (a WordPiece vocabulary in the same places:
WORDPIECE_FILES, as the official Chinese tarballs and HF Chinese directories hold; else None),
`check_weights()` (a one-line error when the weights are
missing or unreadable: TF checkpoints are verified by detect, HF weights here),
`kind(model_type=None)` (the model it holds, albert_tf.common.kinds,
with a classifier's number of classes), `load_into(model, label_list=None)` (every weight of
that model) and, for the formats we write, `save(model, path, label_list=None)`. Adapters
never build models: the caller passes one (albert_tf.models.build).
"""

import os
import typing

from albert_tf.common import fileio, kinds, output_layout
from albert_tf.checkpoints.hf import heads as hf_heads
from albert_tf.checkpoints.hf.config import config_from_hf, read_hf_config_json
from albert_tf.checkpoints.hf.load import load_hf_checkpoint
from albert_tf.checkpoints.hf.save import save_hf_checkpoint
from albert_tf.checkpoints.hf.tensors import is_hf_directory, read_hf_tensors
from albert_tf.checkpoints import hub_module
from albert_tf.checkpoints import integrity
from albert_tf.checkpoints import official_names
from albert_tf.checkpoints import tf1
from albert_tf.checkpoints import tf2
from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError

TF1 = "tf1"
TF2 = "tf2"
HF = "hf"
HUB_MODULE = "hub_module"
TARBALL = "tarball"

CONFIG_FILE = output_layout.ALBERT_CONFIG  # beside a TF1/TF2 checkpoint (tarballs, our runs)
SPM_FILE = output_layout.SPM_MODEL  # the SentencePiece model of an official tarball (and ours)
HF_SPM_FILE = "spiece.model"  # the SentencePiece model of an HF transformers ALBERT directory
# A WordPiece vocabulary, first found wins: the official albert_*_zh tarballs' (no .model file
# there), then HF's / BERT's vocab.txt (HF Chinese ALBERTs pair AlbertModel with BertTokenizer).
WORDPIECE_FILES = ("vocab_chinese.txt", "vocab.txt")
# The weights of an official tarball directory, first found wins: v2, then v1 (a TF-Hub module's).
TARBALL_CHECKPOINTS = (output_layout.BEST_CHECKPOINT, os.path.join("variables", "variables"))

# (a part of a variable name, the kind), first match wins: official TF1 names, then our TF2
# object paths. The unscoped official GLUE / RACE `output_weights` is handled apart.
_KIND_SIGNATURES = (
    ("start_logits/dense", kinds.SQUAD_V2), ("model/squad_head/start_dense/", kinds.SQUAD_V2),
    ("cls/squad/output_weights", kinds.SQUAD_V1),
    (official_names.TOKEN_CLASSIFIER_SCOPE, kinds.TOKEN_CLASSIFIER),
    ("model/token_classifier_head/", kinds.TOKEN_CLASSIFIER),
    ("model/squad_head/output_weights", kinds.SQUAD_V1),
    ("model/choice_head/", kinds.MULTIPLE_CHOICE), ("model/classifier_head/", kinds.CLASSIFIER),
    ("cls/predictions/", kinds.PRETRAINER), ("model/masked_lm_head/", kinds.PRETRAINER),
)
_HEAD_ROWS = ("output_weights", "model/classifier_head/output_weights/.ATTRIBUTES/VARIABLE_VALUE",
              "model/choice_head/scorer/output_weights/.ATTRIBUTES/VARIABLE_VALUE",
              official_names.TOKEN_CLASSIFIER_SCOPE + "output_weights",
              "model/token_classifier_head/output_weights/.ATTRIBUTES/VARIABLE_VALUE")
_HEADLESS = (kinds.ENCODER, kinds.PRETRAINER)  # loading these needs no task head
_TF2_VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"  # how our TF2 checkpoints name a variable
# Where official-style TF1 checkpoints keep early exit's internal classifiers (official_names).
_TF1_EARLY_EXIT_PREFIX = "early_exit/"
# The word embeddings [V, E] in the official layout (plain, or under a hub module's scope) and in
# ours (a task model's encoder, or an encoder saved alone).
_WORD_EMBEDDING_NAMES = (
    official_names.WORD_EMBEDDINGS, tf1.HUB_SCOPE + official_names.WORD_EMBEDDINGS,
    "model/encoder/embeddings/word_embeddings" + _TF2_VALUE_SUFFIX,
    "model/embeddings/word_embeddings" + _TF2_VALUE_SUFFIX)


class HeldKind(typing.NamedTuple):
  """Which model a checkpoint holds, read from its variable names (and its head's shape).

  kinds: the kinds it may hold: one, or kinds.ONE_ROW_KINDS for an official one-row head that
    nothing beside it names. rows: the rows of a GLUE-style head (`output_weights` [rows, H]),
    else None. evidence: the variable (or HF config field) that says so, with its shape; None
    for an encoder alone.
  """
  kinds: tuple
  rows: typing.Optional[int] = None
  evidence: typing.Optional[str] = None

  def describe(self):
    """E.g. "a classifier checkpoint (3 classes; output_weights [3, 32])"."""
    what = " or ".join(self.kinds)
    detail = []
    if self.kinds in ((kinds.CLASSIFIER,), (kinds.TOKEN_CLASSIFIER,)) and self.rows:
      detail.append(f"{self.rows} classes")
    if len(self.kinds) == 1:
      detail.append(kinds.DESCRIPTIONS[self.kinds[0]])
    if self.evidence:
      detail.append(f"its {self.evidence}")
    elif self.kinds == (kinds.ENCODER,):
      detail.append(f"only {official_names.ENCODER_SCOPE} variables")
    article = "an" if what[0] in "aeiou" else "a"
    return f"{article} {what} checkpoint ({'; '.join(detail)})"


def is_saved_model_directory(path):
  """A TF-Hub module or SavedModel directory (weights under variables/)."""
  return fileio.isdir(path) and fileio.isfile(os.path.join(path, "saved_model.pb"))


def is_tarball_directory(path):
  """A directory with albert_config.json that is neither a run's (no `checkpoint` state file, no
  numbered checkpoints) nor an HF directory: an official tarball, untarred (its weights are
  checked by TarballFormat)."""
  return (fileio.isdir(path) and fileio.isfile(os.path.join(path, CONFIG_FILE))
          and not fileio.exists(os.path.join(path, output_layout.CHECKPOINT_STATE))
          and not is_hf_directory(path) and not integrity.numbered_checkpoints(path))


def directory_format(path, hub_modules=True):
  """HUB_MODULE or HF for a directory that its own loader reads whole, else None (a TF
  checkpoint prefix or a directory of checkpoints). hub_modules=False: a SavedModel directory
  is not considered (the callers that never read one)."""
  path = os.fspath(path)
  if hub_modules and is_saved_model_directory(path):
    return HUB_MODULE
  if is_hf_directory(path):
    return HF
  return None


def detect(path, what="checkpoint", hub_modules=True):
  """The adapter for the checkpoint at `path`.

  Args:
    path: a TF1/TF2 checkpoint prefix or directory, an HF directory, a TF-Hub module or an
      official tarball directory.
    what: how errors name the path (e.g. "--init_checkpoint").
    hub_modules: False for callers that never read a TF-Hub module.
  Raises:
    AlbertError: no readable checkpoint at path (a TF checkpoint is verified whole).
  """
  path = os.fspath(path)
  if is_tarball_directory(path):  # before HUB_MODULE: a v1 tarball is a TF-Hub module too
    return TarballFormat(path, what)
  found = directory_format(path, hub_modules)
  if found == HUB_MODULE:
    return HubModuleFormat(path)
  if found == HF:
    return HfFormat(path)
  resolved = tf1.resolve_checkpoint_path(path, what)
  return (Tf2Format if tf1.is_tf2_checkpoint(resolved) else Tf1Format)(resolved)


def adapter_class(name):
  """The adapter class of a format name (to `save` into it)."""
  return {TF1: Tf1Format, TF2: Tf2Format, HF: HfFormat, HUB_MODULE: HubModuleFormat,
          TARBALL: TarballFormat}[name]


class CheckpointFormat:
  """One checkpoint at `path` (a verified prefix for TF1/TF2, else a directory)."""

  name = None

  def __init__(self, path):
    self.path = path

  def config(self):
    """The AlbertConfig the checkpoint carries (TF1/TF2: the albert_config.json beside it).

    Raises:
      AlbertError: none there.
    """
    directory = os.path.dirname(self.path) or "."
    config_file = os.path.join(directory, CONFIG_FILE)
    if not fileio.exists(config_file):
      raise AlbertError(f"{self.path}: no {CONFIG_FILE} beside the checkpoint; pass "
                        "--albert_config_file")
    return AlbertConfig.from_json_file(config_file)

  def spm_model_file(self):
    """The SentencePiece model the checkpoint comes with (TF1/TF2: 30k-clean.model beside it),
    or None."""
    return _existing(os.path.join(os.path.dirname(self.path) or ".", SPM_FILE))

  def vocab_file(self):
    """The WordPiece vocabulary the checkpoint comes with (WORDPIECE_FILES beside it), or None."""
    return first_existing(os.path.dirname(self.path) or ".", WORDPIECE_FILES)

  def vocab_rows(self):
    """The number of rows of the checkpoint's word embeddings (its vocabulary size), or None
    when the format carries its own config (HF, hub modules: their loaders check it)."""
    return None

  def check_weights(self):
    """Raises a one-line AlbertError when the weights are not there or do not read (TF1/TF2
    checkpoints and tarballs were verified whole by `detect`)."""

  def kind(self, model_type=None):
    """(kind, number of classes or None) of the model the checkpoint holds; model_type: the
    kind when the caller knows it (only the classes are read then)."""
    raise NotImplementedError

  def held_kind(self):
    """HeldKind: the kinds the checkpoint may hold and the variable that says so."""
    kind, rows = self.kind()
    return HeldKind((kind,), rows)

  def holds_early_exit(self):
    """Whether the checkpoint holds early exit's internal classifiers (a classifier trained
    with --early_exit=patience); only TF1 and TF2 checkpoints can."""
    return False

  def load_into(self, model, label_list=None):
    """Loads every weight of `model` (built for `kind()`); the encoder and pretrainer need no
    task head. Returns a LoadReport (None for our TF2 checkpoints, which fail loudly).

    Raises:
      AlbertError: a weight of the model missing; shapes differ.
    """
    raise NotImplementedError

  @staticmethod
  def save(model, path, label_list=None):
    """Writes `model` in this format at `path`."""
    raise NotImplementedError


class _TfFormat(CheckpointFormat):
  """What TF1 and TF2 checkpoints share: the kind read from variable names and shapes."""

  def _shapes(self):
    return {name: shape for name, shape in
            integrity.checkpoint_reader(self.path).get_variable_to_shape_map().items()
            if "OPTIMIZER_SLOT" not in name}

  def holds_early_exit(self):
    return any(name.startswith((_TF1_EARLY_EXIT_PREFIX, tf2.EARLY_EXIT_PREFIX))
               for name in self._shapes())

  def vocab_rows(self):
    shapes = self._shapes()
    for name in _WORD_EMBEDDING_NAMES:
      if name in shapes:
        return int(shapes[name][0])
    return None

  def held_kind(self):
    shapes = self._shapes()

    def named(name):  # a variable as users know it: `output_weights [3, 32]`
      return f"{name[:-len(_TF2_VALUE_SUFFIX)] if name.endswith(_TF2_VALUE_SUFFIX) else name} " \
             f"{list(shapes[name])}"
    head = next((name for name in _HEAD_ROWS if name in shapes), None)
    rows = shapes[head][0] if head else None
    for part, kind in _KIND_SIGNATURES:
      if kind == kinds.PRETRAINER and head is not None:
        break  # a task head wins (an official run fine-tuned from a hub module keeps its cls/)
      name = next((n for n in sorted(shapes) if part in n), None)
      if name is not None:
        if kind == kinds.CLASSIFIER and rows == 1:
          kind = kinds.REGRESSION  # our TF2 classifier head with one row: STS-B
        return HeldKind((kind,), rows, named(head if head and part in head else name))
    if head is None:
      return HeldKind((kinds.ENCODER,))
    if rows > 1:
      return HeldKind((kinds.CLASSIFIER,), rows, named(head))
    recorded = output_layout.read_best_checkpoint_kind(os.path.dirname(self.path) or ".")
    return HeldKind((recorded,) if recorded in kinds.ONE_ROW_KINDS else kinds.ONE_ROW_KINDS,
                    rows, named(head))

  def kind(self, model_type=None):
    held = self.held_kind()
    if model_type is None:
      if len(held.kinds) > 1:
        raise AlbertError(f"{self.path}: its one-row head `output_weights` [1, H] is a "
                          "regression classifier (STS-B) or a multiple-choice scorer (RACE): "
                          "pass --model_type=regression or --model_type=multiple_choice")
      model_type = held.kinds[0]
    if model_type == kinds.CLASSIFIER and held.rows == 1:
      model_type = kinds.REGRESSION  # our TF2 classifier head with one row: STS-B
    return model_type, held.rows if model_type in kinds.LABELED_KINDS else None


class Tf1Format(_TfFormat):
  """An official TF1 checkpoint (name-based)."""

  name = TF1

  def load_into(self, model, label_list=None):
    report = tf1.load_tf1_checkpoint(model, self.path)
    _refuse_missing(report, self.path)
    return report

  @staticmethod
  def save(model, path, label_list=None):
    tf1.save_tf1_checkpoint(model, path)


class Tf2Format(_TfFormat):
  """One of our object-based checkpoints."""

  name = TF2

  def load_into(self, model, label_list=None):
    if kinds.kind_of(model) in _HEADLESS:
      tf2.restore_tf2_checkpoint(model, self.path)
    else:
      tf2.restore_tf2_model(model, self.path)
    return None

  @staticmethod
  def save(model, path, label_list=None):
    tf2.save_tf2_checkpoint(model, path)


class HfFormat(CheckpointFormat):
  """An HF transformers directory: carries its config, architecture and class names."""

  name = HF

  def config(self):
    return config_from_hf(self.path)

  def spm_model_file(self):
    return _existing(os.path.join(self.path, HF_SPM_FILE))

  def vocab_file(self):
    return first_existing(self.path, WORDPIECE_FILES)

  def check_weights(self):
    read_hf_tensors(self.path, shapes_only=True)  # (shapes only: the tensors are not read)

  def kind(self, model_type=None):
    return hf_heads.hf_model_type(self.path, model_type)

  def held_kind(self):
    hf_config = read_hf_config_json(self.path)
    arch = hf_heads.architecture(hf_config)
    head = read_hf_tensors(self.path, shapes_only=True).get(
        official_names.HF_CLASSIFIER + ".weight")
    rows = head[0] if head else None
    if arch is None and rows == 1:  # (the tensor names cannot tell the two apart)
      return HeldKind(kinds.ONE_ROW_KINDS, rows,
                      f"{official_names.HF_CLASSIFIER}.weight {list(head)}")
    kind, _ = self.kind()
    return HeldKind((kind,), rows if kind in kinds.LABELED_KINDS else None,
                    f"config.json architectures {arch}" if arch else None)

  def label_names(self):
    """The class names of its id2label (None when generic or absent)."""
    return hf_heads.hf_label_names(self.path)

  def load_into(self, model, label_list=None):
    report = load_hf_checkpoint(model, self.path, label_list=label_list,
                                require_head=kinds.kind_of(model) not in _HEADLESS)
    _refuse_missing(report, self.path)
    return report

  @staticmethod
  def save(model, path, label_list=None):
    save_hf_checkpoint(model, path, label_list=label_list)


class HubModuleFormat(CheckpointFormat):
  """A TF-Hub module directory: its config, SentencePiece model and an encoder with the
  pretraining heads (read only; exports are written by albert_tf/export/)."""

  name = HUB_MODULE

  def module(self):
    return hub_module.read_hub_module(self.path)

  def config(self):
    return self.module().config

  def spm_model_file(self):
    return self.module().spm_model_file

  def vocab_file(self):
    return None  # a module's vocabulary is its SentencePiece model

  def kind(self, model_type=None):
    return model_type or kinds.PRETRAINER, None

  def load_into(self, model, label_list=None):
    return hub_module.load_hub_module_weights(model, self.path)

  @staticmethod
  def save(model, path, label_list=None):
    raise AlbertError(f"{path}: TF-Hub modules are written by export_savedmodel.py "
                      "(--export_format), not by the checkpoint converter")


class TarballFormat(_TfFormat):
  """An official tarball directory, untarred (read only): its albert_config.json, its
  SentencePiece model and the TF1 weights of TARBALL_CHECKPOINTS (`path` is their prefix)."""

  name = TARBALL

  def __init__(self, path, what="checkpoint"):
    """path: the directory, or the prefix of its weights (what `path` is after detect).

    Raises:
      AlbertError: no weights in the directory, or weights that do not read whole.
    """
    path = os.fspath(path)
    directory, prefix = path, None
    for name in TARBALL_CHECKPOINTS:
      head = path[:-len(name)]  # the directory, with its trailing separator
      if path.endswith(name) and (not head or head[-1] in ("/", os.sep)):
        directory, prefix = head.rstrip("/" + os.sep) or head or ".", path
    self.directory = directory
    self.config_file = os.path.join(directory, CONFIG_FILE)
    prefix = prefix or next(
        (os.path.join(directory, name) for name in TARBALL_CHECKPOINTS
         if fileio.exists(os.path.join(directory, name) + integrity.INDEX_SUFFIX)), None)
    if prefix is None:
      expected = " or ".join(name + integrity.INDEX_SUFFIX for name in TARBALL_CHECKPOINTS)
      raise AlbertError(f"{what} {directory}: has {CONFIG_FILE} but no checkpoint (an official "
                        f"tarball directory holds {expected})")
    integrity.verify_checkpoint(prefix, what)
    super().__init__(prefix)

  def config(self):
    return AlbertConfig.from_json_file(self.config_file)

  def spm_model_file(self):
    """The tarball's 30k-clean.model, or None when it is not there."""
    return _existing(os.path.join(self.directory, SPM_FILE))

  def vocab_file(self):
    """The tarball's vocab_chinese.txt (the Chinese models), or None."""
    return first_existing(self.directory, WORDPIECE_FILES)

  def load_into(self, model, label_list=None):
    """Every weight of `model`, built from `config()`; the checkpoint must hold no encoder
    variable that the config has no place for (e.g. a second group).

    Raises:
      AlbertError: naming albert_config.json and the checkpoint, when they do not match.
    """
    try:
      report = tf1.load_tf1_checkpoint(model, self.path)
      _refuse_missing(report, self.path)
      extra = [n for n in report.unexpected
               if n.startswith((official_names.ENCODER_SCOPE,
                                tf1.HUB_SCOPE + official_names.ENCODER_SCOPE))]
      if extra:
        raise AlbertError(f"{self.path}: holds {len(extra)} encoder variables this config has "
                          f"no place for, e.g. {extra[0]}")
    except AlbertError as e:
      raise AlbertError(f"{self.config_file} does not match the checkpoint beside it: {e}"
                        ) from None
    return report

  @staticmethod
  def save(model, path, label_list=None):
    raise AlbertError(f"{path}: official tarball directories are read only; write the "
                      f"{TF1} format (a checkpoint prefix with {CONFIG_FILE} beside it)")


def _existing(path):
  return path if fileio.exists(path) else None


def first_existing(directory, names):
  """The first of `names` that exists in `directory`, as a path; None when none does."""
  return next((path for path in (os.path.join(directory, name) for name in names)
               if fileio.exists(path)), None)


def _refuse_missing(report, path):
  if report.missing:
    raise AlbertError(f"{path}: checkpoint lacks {len(report.missing)} variables of this "
                      f"config, e.g. {report.missing[0]} (does albert_config match?)")
