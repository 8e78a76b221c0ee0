"""One loader for ALBERT weights in any of their forms: `albert_tf.from_pretrained(path)`.

  pretrained = albert_tf.from_pretrained("albert_base")          # an official tarball directory
  pretrained = albert_tf.from_pretrained("out/mnli/model.ckpt-best", task_name="MNLI")
  pretrained = albert_tf.from_pretrained("albert-base-v2-sst2")   # an HF transformers directory
  pretrained.model, pretrained.config, pretrained.tokenizer
  pretrained.predict(["a fine film"])   # classifiers: {"labels": [...], "probabilities": [N, C]}

What `path` may be, and where the config, the vocabulary and the model's kind come from:

  * an official tarball directory (`albert_config.json`, `30k-clean.model`, `model.ckpt-best`):
    those files; the kind from the checkpoint's variables; the Chinese ones (`albert_*_zh`) hold
    the WordPiece `vocab_chinese.txt` instead of the .model (a WordPiece tokenizer then);
  * a TF1 (official) or TF2 (ours) checkpoint prefix, or a directory of them:
    `albert_config.json` / `30k-clean.model` beside it, else `albert_config_file=` /
    `spm_model_file=`; the kind from the checkpoint's variables (in the output dir of a
    run_classifier.py on your own data, the class names from its `label_list.json`);
  * an HF transformers directory (`config.json`, `model.safetensors`): `config.json`,
    `spiece.model` (HF Chinese ALBERTs: a BertTokenizer's `vocab.txt`, WordPiece); the kind from
    `architectures`, the class names from `id2label`;
  * a TF-Hub module directory (official TF1 format or `export_savedmodel.py`'s): the module's
    own config and vocabulary; the encoder with the pretraining heads.

The model kind follows the weights (a GLUE head `output_weights` [N, H], SQuAD `cls/squad/` or the
v2 `start_logits/` layers, the MLM/SOP heads) unless `model_type` says it; a one-row head is a
regression classifier or a multiple-choice scorer, which the weights cannot tell apart
(`model_type` decides; a label list implies a classifier). Every weight of the model must be in
the checkpoint (a pretraining checkpoint gives the pretrainer, never a classifier with a random
head).
"""

import dataclasses
import os
from typing import List, Optional

import numpy as np

from albert_tf.common import fileio, kinds, output_layout, task_labels
from albert_tf.checkpoints import formats, model_source, tf1
from albert_tf.checkpoints.hf.config import config_from_hf
from albert_tf.checkpoints.hf.heads import hf_label_names
from albert_tf.checkpoints.init import init_from_checkpoint, restore_model_weights
from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.text.packing import encode_text_pair
from albert_tf.text.tokenization import make_tokenizer

_CONFIG_FILE = output_layout.ALBERT_CONFIG
_SPM_FILE = output_layout.SPM_MODEL
_HF_SPM_FILE = "spiece.model"
_BEST = output_layout.BEST_CHECKPOINT


@dataclasses.dataclass
class PretrainedAlbert:
  """A loaded model with what it needs to be used.

  Attributes:
    model: the tf_keras model (AlbertPretrainer, AlbertClassifier, AlbertMultipleChoice or
      AlbertSquadModel), every weight loaded.
    config: its AlbertConfig.
    tokenizer: the FullTokenizer of its vocabulary, or None when none was found or given.
    model_type: one of albert_tf.common.kinds.KINDS.
    label_list: the class names of a classifier or token classifier (None otherwise).
    source: the path loaded.
    checkpoint: what the weights were read from: the checkpoint prefix (a directory's
      model.ckpt-best, or its newest), the HF or the TF-Hub module directory.
  """
  model: object
  config: AlbertConfig
  tokenizer: object
  model_type: str
  label_list: Optional[List[str]]
  source: str
  checkpoint: Optional[str] = None

  def predict(self, text_a, text_b=None, max_seq_length=None, batch_size=32):
    """Classifies raw texts as the exported SavedModel's `serving_default` signature does.

    Args:
      text_a: a list of strings (or one string).
      text_b: the second sentences of sentence-pair tasks, or None.
      max_seq_length: pieces per input; default 128, or the config's max_position_embeddings
        when that is smaller.
    Returns:
      {"labels": [label names (regression: the scores)], "probabilities": float32 [N, C]}.
    """
    if self.model_type not in ("classifier", "regression"):
      raise AlbertError(f"predict() classifies text; {self.source} is a {self.model_type}")
    if self.tokenizer is None:
      raise AlbertError(f"{self.source}: no vocabulary found; pass spm_model_file=")
    positions = self.config.max_position_embeddings
    if max_seq_length is None:
      max_seq_length = min(128, positions)
    elif max_seq_length > positions:
      raise AlbertError(f"predict(max_seq_length={max_seq_length}): the model has "
                        f"{positions} positions (max_position_embeddings)")
    features = _classifier_features(self.tokenizer, _as_list(text_a),
                                    None if text_b is None else _as_list(text_b), max_seq_length)
    probabilities = []
    for start in range(0, len(features["input_ids"]), batch_size):
      batch = {k: v[start:start + batch_size] for k, v in features.items()}
      probabilities.append(np.asarray(self.model(batch, training=False)["probabilities"]))
    probabilities = (np.concatenate(probabilities) if probabilities
                     else np.zeros([0, len(self.label_list or [1])], np.float32))
    if self.model_type == "regression":
      return {"labels": [float(p[0]) for p in probabilities], "probabilities": probabilities}
    names = self.label_list or [str(i) for i in range(probabilities.shape[-1])]
    return {"labels": [names[i] for i in np.argmax(probabilities, axis=-1)],
            "probabilities": probabilities}


def from_pretrained(path, model_type=None, task_name=None, label_list=None,
                    albert_config_file=None, spm_model_file=None, do_lower_case=None,
                    vocab_file=None):
  """Loads ALBERT weights from any of their forms (see the module docstring).

  Args:
    path: an official tarball directory, a TF1 or TF2 checkpoint (prefix or directory), an HF
      transformers directory or a TF-Hub module directory.
    model_type: one of albert_tf.common.kinds.KINDS: the model wanted (the weights must hold
      all of it: `model_type="classifier"` on a pretraining checkpoint fails naming the missing
      head), or the kind the weights cannot tell (a one-row head); None: the weights' kind.
    task_name: a GLUE task name: its label list names the classes.
    label_list: the class names (wins over task_name and an HF id2label).
    albert_config_file, spm_model_file: when they are not beside the checkpoint.
    vocab_file: a WordPiece vocabulary when there is no SentencePiece model (default: the
      vocab_chinese.txt or vocab.txt beside the checkpoint).
    do_lower_case: lower-case the text (default: True, or the HF / hub module's own setting).
  Returns:
    A PretrainedAlbert.
  Raises:
    AlbertError: nothing loadable at path; a weight of the model missing; an unknown type.
  """
  path = os.fspath(path)
  if model_type is not None and model_type not in kinds.KINDS:
    raise AlbertError(f"model_type={model_type!r}: expected one of {', '.join(kinds.KINDS)}")
  if task_name and label_list is None:
    label_list = _task_labels(task_name)
  found = _locate(path, albert_config_file, spm_model_file, do_lower_case)
  if not found.spm_model_file and found.located_directory:
    found.vocab_file = vocab_file or formats.first_existing(found.located_directory,
                                                            formats.WORDPIECE_FILES)
  labels = label_list or found.label_list
  if found.model_type == "pretrainer":  # a TF-Hub module: an encoder with pretraining heads
    kind, rows = model_type or "pretrainer", None
  else:
    wanted = model_type or found.model_type
    if wanted is None and labels and formats.detect(
        found.checkpoint, hub_modules=False).held_kind().kinds != (kinds.TOKEN_CLASSIFIER,):
      wanted = kinds.CLASSIFIER  # class names for weights that cannot say (a one-row head)
    kind, rows = model_source.checkpoint_model_type(found.checkpoint, wanted)
  labeled = kind in (kinds.CLASSIFIER, kinds.TOKEN_CLASSIFIER)
  if labeled and not labels:
    if rows is None:
      raise AlbertError("a classifier needs its class names: pass task_name= or label_list=")
    labels = [str(i) for i in range(rows)]
  model = model_source.build_model(kind, found.config, num_labels=len(labels or []))
  _load(model, kind, found.checkpoint, labels)
  tokenizer = None
  if found.spm_model_file or found.vocab_file:
    tokenizer = make_tokenizer(found.spm_model_file, found.vocab_file,
                               do_lower_case=found.do_lower_case, albert_config=found.config)
  return PretrainedAlbert(model=model, config=found.config, tokenizer=tokenizer,
                          model_type=kind,
                          label_list=labels if labeled else None, source=path,
                          checkpoint=found.checkpoint)


def _task_labels(task_name):
  """A GLUE task's class names (None for the regression task STS-B)."""
  return task_labels.glue_labels(task_name)


# ------------------------------------------------------------------------ where things are
@dataclasses.dataclass
class _Located:
  config: AlbertConfig
  checkpoint: str  # what the loaders read: a checkpoint prefix, an HF or a module directory
  spm_model_file: Optional[str]
  do_lower_case: bool
  model_type: Optional[str] = None  # when the source says it (HF architectures, hub modules)
  label_list: Optional[List[str]] = None
  located_directory: Optional[str] = None  # where a WordPiece vocabulary may lie (not modules)
  vocab_file: Optional[str] = None


def _beside(directory, name, given):
  if given:
    return given
  candidate = os.path.join(directory, name)
  return candidate if fileio.exists(candidate) else None


def _locate(path, albert_config_file, spm_model_file, do_lower_case):
  lower = True if do_lower_case is None else do_lower_case
  found = formats.directory_format(path)
  if found == formats.HUB_MODULE:
    source = model_source.resolve_model_source(hub_module_handle=path)
    return _Located(source.config, path, spm_model_file or source.spm_model_file,
                    source.do_lower_case if do_lower_case is None else do_lower_case,
                    model_type="pretrainer")
  if found == formats.HF:
    return _Located(config_from_hf(path), path, _beside(path, _HF_SPM_FILE, spm_model_file),
                    _hf_lower_case(path, lower) if do_lower_case is None else lower,
                    label_list=hf_label_names(path), located_directory=path)
  directory = path if fileio.isdir(path) else os.path.dirname(path) or "."
  checkpoint = path
  if fileio.isdir(path):
    best = os.path.join(path, _BEST)
    checkpoint = best if fileio.exists(best + ".index") else path
  checkpoint = tf1.resolve_checkpoint_path(checkpoint)
  config_file = _beside(directory, _CONFIG_FILE, albert_config_file)
  if not config_file:
    raise AlbertError(f"{path}: no {_CONFIG_FILE} beside the checkpoint; pass "
                      f"albert_config_file=")
  located = _Located(AlbertConfig.from_json_file(config_file), checkpoint,
                     _beside(directory, _SPM_FILE, spm_model_file), lower,
                     located_directory=directory)
  recorded = _beside(directory, output_layout.LABEL_LIST, None)
  if recorded:  # the output dir of a run_classifier.py on your own data
    problem_type, labels = task_labels.read_label_list(recorded)
    located.model_type = ("regression" if problem_type == task_labels.REGRESSION
                          else "classifier")
    located.label_list = list(labels) or None
  tags = _beside(directory, output_layout.TAG_LIST, None)
  if tags:  # the output dir of a run_ner.py: the tags in the head's order
    located.model_type = kinds.TOKEN_CLASSIFIER
    located.label_list = list(fileio.read_json(tags)["labels"])
  return located


def _hf_lower_case(path, default):
  tokenizer_config = os.path.join(path, "tokenizer_config.json")
  if fileio.exists(tokenizer_config):
    return bool(fileio.read_json(tokenizer_config).get("do_lower_case", default))
  return default


# ------------------------------------------------------------------------ which model
def _load(model, kind, checkpoint, label_list):
  """Every weight of the model from the checkpoint (the pretrainer and the encoder: the encoder
  at least, the pretraining heads when present); a classifier's rows in label_list's order."""
  if kind in ("pretrainer", "encoder"):
    init_from_checkpoint(model, checkpoint)
  else:
    restore_model_weights(model, checkpoint, label_list=label_list)


# ------------------------------------------------------------------------ text -> features
def _as_list(texts):
  return [texts] if isinstance(texts, str) else list(texts)


def _classifier_features(tokenizer, texts_a, texts_b, max_seq_length):
  """int32 [N, max_seq_length] input_ids / input_mask / segment_ids, packed as the official
  feature writer and the serving signature pack them."""
  if texts_b is not None and len(texts_b) != len(texts_a):
    raise AlbertError(f"predict(): {len(texts_a)} text_a but {len(texts_b)} text_b")
  rows = [encode_text_pair(a, None if texts_b is None else texts_b[i], max_seq_length, tokenizer)
          for i, a in enumerate(texts_a)]
  return {name: np.array([row[name] for row in rows], np.int32).reshape(-1, max_seq_length)
          for name in ("input_ids", "input_mask", "segment_ids")}

