"""The heads of HF ALBERT directories: which kind (albert_tf.common.kinds) each architecture holds,
which a directory holds, and a classifier's class names (config.json `id2label`).

KIND_ARCHITECTURES is the one table of HF architecture names: what `save` writes for a kind and,
read backwards, what `kind()` finds in a directory's `architectures`.
"""

import os

from absl import logging

from albert_tf.common import kinds
from albert_tf.checkpoints import official_names
from albert_tf.checkpoints.hf.config import CONFIG_NAME, read_hf_config_json
from albert_tf.checkpoints.hf.tensors import read_hf_tensors
from albert_tf.errors import AlbertError

# The HF architecture of each kind. SQuAD v2.0's head has no HF ALBERT counterpart: its encoder
# is written as an AlbertModel (a warning names the head's variables), which reads back as the
# encoder; a one-row sequence classifier is a regression by problem_type.
KIND_ARCHITECTURES = {
    kinds.ENCODER: "AlbertModel",
    kinds.PRETRAINER: "AlbertForPreTraining",
    kinds.CLASSIFIER: "AlbertForSequenceClassification",
    kinds.REGRESSION: "AlbertForSequenceClassification",
    kinds.MULTIPLE_CHOICE: "AlbertForMultipleChoice",
    kinds.SQUAD_V1: "AlbertForQuestionAnswering",
    kinds.SQUAD_V2: "AlbertModel",
    kinds.TOKEN_CLASSIFIER: "AlbertForTokenClassification",
}
# Kinds whose architecture is written but reads back as another kind (the first one above).
_WRITTEN_ONLY = (kinds.REGRESSION, kinds.SQUAD_V2)
# config.json `architectures` -> the kind holding that model; AlbertForMaskedLM (read only) is
# the pretrainer without the sentence-order head.
ARCHITECTURE_TYPES = dict(
    {arch: kind for kind, arch in KIND_ARCHITECTURES.items() if kind not in _WRITTEN_ONLY},
    AlbertForMaskedLM=kinds.PRETRAINER)
# HF heads that the same tensor names hold in three architectures: a sequence-classification
# `classifier` must not load as a multiple-choice scorer or a token classifier, nor the reverse.
SHARED_HEAD_ARCHITECTURES = frozenset(
    KIND_ARCHITECTURES[kind]
    for kind in (kinds.CLASSIFIER, kinds.MULTIPLE_CHOICE, kinds.TOKEN_CLASSIFIER))
# The kinds whose models never read the pooler (a directory without one loads into them), and
# the HF architectures built without it (add_pooling_layer=False: it is not written for them).
NO_POOLER_KINDS = (kinds.SQUAD_V1, kinds.SQUAD_V2, kinds.TOKEN_CLASSIFIER)
NO_POOLER_ARCHITECTURES = frozenset(
    KIND_ARCHITECTURES[kind] for kind in (kinds.SQUAD_V1, kinds.TOKEN_CLASSIFIER))

_GENERIC_LABEL = "LABEL_{}"
PROBLEM_REGRESSION = "regression"  # transformers' problem_type of a regression head


def architecture(hf_config):
  """The first of config.json's `architectures`, or None when it names none."""
  architectures = hf_config.get("architectures") or [None]
  return architectures[0] if isinstance(architectures, list) else None


# ------------------------------------------------------------------------ labels
def label_names(hf_config, config_file):
  """config.json's id2label names in id order ([] when it has none)."""
  id2label = hf_config.get("id2label")
  if not id2label:
    return []
  try:
    by_id = {int(key): str(name) for key, name in id2label.items()}
  except (AttributeError, TypeError, ValueError):
    raise AlbertError(f"{config_file}: id2label must map the class ids 0..N-1 to names, got "
                      f"{str(id2label)[:80]}") from None
  if sorted(by_id) != list(range(len(by_id))):
    raise AlbertError(f"{config_file}: id2label ids {sorted(by_id)} are not 0..{len(by_id) - 1}")
  return [by_id[i] for i in range(len(by_id))]


def hf_label_names(path):
  """The class names of an HF classifier directory, in id order; None when config.json has none
  or only transformers' generic LABEL_0, LABEL_1, ..."""
  path = os.fspath(path)
  names = label_names(read_hf_config_json(path), os.path.join(path, CONFIG_NAME))
  return None if not names or is_generic_labels(names) else names


def is_generic_labels(names):
  """True for transformers' placeholder names LABEL_0, LABEL_1, ... in that order."""
  return all(name == _GENERIC_LABEL.format(i) for i, name in enumerate(names))


def head_row_order(names, label_list, where):
  """For each of the task's labels, the row of the HF head that scores it; None: keep the order.

  HF's generic LABEL_<i> keep their order, and so do any names for a task whose labels are the
  class ids themselves ("0", "1", ... as GLUE's binary tasks: HF's id i is label "i"). Otherwise
  the names must be the task's labels, in any order and case ("ENTAILMENT" is "entailment").

  Args:
    names: config.json's id2label names in id order (as many as the head has rows).
    label_list: the task's labels in its order (as many).
    where: config.json, for the error.
  Raises:
    AlbertError: names that are not the task's labels (both lists named).
  """
  ours = [str(label) for label in label_list]
  if names == ours or is_generic_labels(names):
    return None
  folded = {name.lower(): row for row, name in enumerate(names)}
  if len(folded) == len(names) and sorted(folded) == sorted(label.lower() for label in ours):
    return [folded[label.lower()] for label in ours]
  if ours == [str(i) for i in range(len(ours))]:
    logging.info("%s: id2label names %s are read as the class ids %s", where, names, ours)
    return None
  raise AlbertError(f"{where}: id2label names ({', '.join(names)}) are not the task's labels "
                    f"({', '.join(ours)})")


def is_regression_head(hf_config, rows):
  """transformers' rule: problem_type "regression", or one label and no problem_type."""
  problem_type = hf_config.get("problem_type")
  return problem_type == PROBLEM_REGRESSION or (problem_type is None and rows == 1)


# ------------------------------------------------------------------------ which kind
def _type_from_names(shapes, path):
  if official_names.HF_QA_OUTPUTS + ".weight" in shapes:
    return kinds.SQUAD_V1
  head = shapes.get(official_names.HF_CLASSIFIER + ".weight")
  if head is not None:
    if head[0] == 1:
      raise AlbertError(f"{path}: config.json names no architecture and its one-row classifier "
                        "is a regression classifier or a multiple-choice scorer: pass "
                        f"--model_type={kinds.REGRESSION} or "
                        f"--model_type={kinds.MULTIPLE_CHOICE}")
    return kinds.CLASSIFIER
  return kinds.PRETRAINER if "predictions.bias" in shapes else kinds.ENCODER


def hf_model_type(path, model_type=None):
  """(model type, number of classes or None) of an HF directory (see checkpoint_model_type):
  its config.json `architectures`, else its head's tensor names; a sequence classifier is a
  "regression" by transformers' problem_type rule."""
  path = os.fspath(path)
  hf_config = read_hf_config_json(path)
  shapes = read_hf_tensors(path, shapes_only=True)
  head = shapes.get(official_names.HF_CLASSIFIER + ".weight")
  rows = head[0] if head else None
  if model_type is None:
    found = architecture(hf_config)
    if found is not None and found not in ARCHITECTURE_TYPES:
      raise AlbertError(f"{os.path.join(path, CONFIG_NAME)}: architectures names "
                        f"{found}, which has no model here (known: "
                        f"{', '.join(ARCHITECTURE_TYPES)}); pass --model_type to read its "
                        "encoder")
    model_type = ARCHITECTURE_TYPES.get(found) or _type_from_names(shapes, path)
    if model_type == kinds.CLASSIFIER and is_regression_head(hf_config, rows):
      model_type = kinds.REGRESSION
  return model_type, rows if model_type in kinds.LABELED_KINDS else None


# ------------------------------------------------------------------------ a classifier's head
def _describe_classes(count, names, regression):
  if regression:
    return "1 regression output"
  return f"{count} labels" + (f" ({', '.join(names)})" if names else "")


def fit_classifier_head(model, path, hf_config, tensors, label_list, strict):
  """An HF sequence-classification head checked against our classifier, rows in task order.

  Returns the tensors, the head's rows reordered to label_list's order when id2label names them
  in another. Raises AlbertError: another number of classes; names that are not the task's, or
  real names and no label_list to order them by; a multi-label (sigmoid) head read for
  evaluation by a softmax classifier.
  """
  config_file = os.path.join(path, CONFIG_NAME)
  weight, bias = (f"{official_names.HF_CLASSIFIER}.{leaf}" for leaf in ("weight", "bias"))
  if weight not in tensors:
    return tensors
  rows = tensors[weight].shape[0]
  names = label_names(hf_config, config_file)
  if names and len(names) != rows:
    raise AlbertError(f"{config_file}: id2label has {len(names)} labels but {weight} has "
                      f"{rows} rows")
  labels = [str(label) for label in label_list] if label_list else None
  if rows != model.num_classes or is_regression_head(hf_config, rows) != model.is_regression:
    theirs = _describe_classes(rows, names, is_regression_head(hf_config, rows))
    ours = _describe_classes(model.num_classes, labels, model.is_regression)
    raise AlbertError(f"{path}: the HF head has {theirs} but the task has {ours}")
  if (strict and hf_config.get("problem_type") == "multi_label_classification"
      and not getattr(model, "is_multi_label", False)):
    raise AlbertError(f"{config_file}: problem_type multi_label_classification (a sigmoid per "
                      "label) but this task is single-label (softmax over the labels)")
  if model.is_regression or not names or is_generic_labels(names):
    return tensors
  if labels is None:
    # Without the task's labels the rows' order would be a guess: never silently.
    raise AlbertError(f"{config_file}: id2label names the classes ({', '.join(names)}): give "
                      "the task's label list to put the head's rows in its order")
  order = head_row_order(names, labels, config_file)
  if order is None:
    return tensors
  logging.info("%s: head rows %s (id2label %s) put in the task's label order %s", path, order,
               names, labels)
  tensors = dict(tensors)
  for name in (weight, bias):
    if name in tensors:
      tensors[name] = tensors[name][order]
  return tensors


def hf_head_config(model, label_list=None):
  """The config.json fields of the model's head: a classifier's id2label / label2id (from
  label_list, else LABEL_<i>) and problem_type; the dropout before a classifier or scorer.

  Raises:
    AlbertError: label_list is not one distinct name per class.
  """
  kind = kinds.kind_of(model)
  if kind == kinds.MULTIPLE_CHOICE:
    return {"classifier_dropout_prob": model.dropout_rate}
  if kind not in kinds.LABELED_KINDS:
    return {}
  count = model.num_classes
  names = [str(label) for label in label_list] if label_list and kind != kinds.REGRESSION else [
      _GENERIC_LABEL.format(i) for i in range(count)]
  if len(names) != count or len(set(names)) != count:
    raise AlbertError(f"label list ({', '.join(names)}) must name each of the {count} classes "
                      "once")
  fields = {"id2label": {str(i): name for i, name in enumerate(names)},
            "label2id": {name: i for i, name in enumerate(names)},
            "classifier_dropout_prob": model.dropout_rate}
  if kind in kinds.CLASSIFIER_KINDS:  # (transformers' token classifier has no problem_type)
    fields["problem_type"] = (PROBLEM_REGRESSION if kind == kinds.REGRESSION
                              else "single_label_classification")
  return fields
