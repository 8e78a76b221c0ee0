"""Initialising a model from any ALBERT checkpoint: official TF1 or ours (TF2 object-based)."""

from absl import logging
import tensorflow as tf

from albert_tf.common import kinds
from albert_tf.checkpoints import formats
from albert_tf.checkpoints.hf.load import load_hf_checkpoint
from albert_tf.checkpoints import hub_module
from albert_tf.checkpoints import tf1
from albert_tf.checkpoints import tf2
from albert_tf.checkpoints import official_names
from albert_tf.errors import AlbertError, NotFiniteError
from albert_tf.text import tokenization

# Moved to tf2.py (our checkpoints' format); these paths stay.
restore_tf2_checkpoint = tf2.restore_tf2_checkpoint
checkpoint_global_step = tf2.checkpoint_global_step


def init_from_checkpoint(model, path, init_from_group0=False, label_list=None):
  """Loads `path` into a freshly built model: the encoder must load, heads load when present.

  `path`: an official TF1 checkpoint or one of ours (prefix or directory), an HF transformers
  directory, or a TF-Hub module directory (official TF1 format or export_savedmodel.py's).
  `label_list`: a classifier's labels in the task's order, for an HF directory's id2label
  (`load_hf_checkpoint`); an HF head of other classes is an error.
  Returns:
    A LoadReport, or None for our TF2 checkpoints (which fail loudly when incomplete).
  Raises:
    AlbertError: no checkpoint at path; encoder variables missing; shapes differ.
  """
  source = formats.detect(path, "--init_checkpoint")
  path = source.path
  is_module, is_hf, is_tf2 = (source.name == name
                              for name in (formats.HUB_MODULE, formats.HF, formats.TF2))
  if init_from_group0 and (is_module or is_hf or is_tf2):
    raise AlbertError(f"{path}: --init_from_group0 applies to TF1 (official) checkpoints only")
  if is_tf2:
    restore_tf2_checkpoint(model, path)
    logging.info("Initialised %s from %s (TF2 checkpoint)", model.name, path)
    return None
  if is_module:
    report = hub_module.load_hub_module_weights(model, path)  # refuses a partial encoder itself
  elif is_hf:
    report = load_hf_checkpoint(model, path, label_list=label_list)
  else:
    report = tf1.load_tf1_checkpoint(model, path, init_from_group0=init_from_group0)
  missing_encoder = [n for n in report.missing if n.startswith(official_names.ENCODER_SCOPE)]
  if missing_encoder:
    raise AlbertError(f"{path}: checkpoint lacks {len(missing_encoder)} encoder variables, e.g. "
                      f"{missing_encoder[0]} (does albert_config match the checkpoint?)")
  logging.info("%s", report)
  return report


# The pretraining heads by official scope: what a pretrainer may load or lack.
PRETRAINING_HEAD_SCOPES = {"mlm": "cls/predictions/", "sop": "cls/seq_relationship/"}


def init_pretrainer(pretrainer, path):
  """Loads a checkpoint into an AlbertPretrainer: the encoder must load, and says which of its
  heads ("mlm", "sop") the checkpoint held whole (the others stay at their initial values).

  Returns:
    (heads held: a tuple of PRETRAINING_HEAD_SCOPES' keys, HeldKind of the checkpoint).
  Raises:
    AlbertError: as init_from_checkpoint.
  """
  report = init_from_checkpoint(pretrainer, path)
  held = formats.detect(path, "--init_checkpoint").held_kind()
  if report is None:  # our TF2 checkpoints: a pretrainer's holds both heads, others neither
    heads = tuple(PRETRAINING_HEAD_SCOPES) if held.kinds == (kinds.PRETRAINER,) else ()
  else:
    heads = tuple(head for head, scope in PRETRAINING_HEAD_SCOPES.items()
                  if not any(name.startswith(scope) for name in report.missing))
  return heads, held


def check_init_vocabulary(config, init_checkpoint=None, spm_model_file=None):
  """Before a run that starts from `init_checkpoint` on records made with `spm_model_file`: the
  three must agree on the vocabulary, or the records' token ids would select embedding rows
  the checkpoint learned for other pieces (a run that trains, but on nonsense).

  * config.vocab_size must equal the rows of the checkpoint's word embeddings (TF1, tarball and
    TF2 checkpoints; HF directories and hub modules carry their own config);
  * spm_model_file, when given, must fit config.vocab_size (tokenization.check_vocabulary_fits)
    and, from a checkpoint, have as many pieces as its embeddings have rows and the very pieces
    of the SentencePiece model that comes with it (`30k-clean.model` beside it), when one does.
  (The records' ids themselves are checked against config.vocab_size as they are read.)

  Raises:
    AlbertError: one line naming both files and both sizes (or the first differing piece).
  """
  tokenizer = None
  if spm_model_file:
    tokenizer = tokenization.FullTokenizer(spm_model_file=spm_model_file)
    tokenization.check_vocabulary_fits(tokenizer, config)
  if not init_checkpoint:
    return
  source = formats.detect(init_checkpoint, "--init_checkpoint")
  rows = source.vocab_rows()
  if rows is not None and rows != config.vocab_size:
    raise AlbertError(f"{source.path}: its word embeddings have {rows} rows (a vocabulary of "
                      f"{rows}) but {config.source or 'the albert config'} has vocab_size="
                      f"{config.vocab_size}: give the checkpoint's own albert_config.json")
  if tokenizer is None:
    return
  pieces = len(tokenizer.vocab)
  if rows is not None and pieces != rows:
    raise AlbertError(f"{spm_model_file}: has {pieces} pieces but the word embeddings of "
                      f"{source.path} have {rows} rows: make the records with the checkpoint's "
                      "own SentencePiece model")
  own = source.spm_model_file()
  if own:
    theirs = tokenization.FullTokenizer(spm_model_file=own).inv_vocab
    mine = tokenizer.inv_vocab
    differ = next((i for i in sorted(set(theirs) | set(mine)) if theirs.get(i) != mine.get(i)),
                  None)
    if differ is not None:
      raise AlbertError(f"{spm_model_file}: its pieces differ from those of {own}, the "
                        f"SentencePiece model of {source.path} (id {differ}: "
                        f"{mine.get(differ)!r} here, {theirs.get(differ)!r} there): make the "
                        f"records with {own}")


def init_checkpoint_step(path):
  """The global step `path` (an --init_checkpoint) records, for a run that continues its
  learning-rate schedule.

  Raises:
    AlbertError: the checkpoint records no global_step (an HF directory, a hub module, a TF1
      checkpoint written without one).
  """
  source = formats.detect(path, "--init_checkpoint")
  step = None
  if source.name in (formats.TF1, formats.TF2, formats.TARBALL):
    step = checkpoint_global_step(source.path)
  if step is None:
    raise AlbertError(f"{source.path}: records no global_step, so its schedule cannot be "
                      "continued: drop --init_checkpoint_schedule=continue (the schedule then "
                      "starts at step 0)")
  return step


def restore_model_weights(model, path, label_list=None):
  """Loads *every* weight of `model` (encoder and task head) from a checkpoint of that model.

  For evaluation, prediction and export: the checkpoint must be a fine-tuned checkpoint of this
  very task, either ours (the trainer's `ckpt-N`), official TF1 (`model.ckpt-N`,
  `model.ckpt-best` as the official run_classifier / run_race / run_squad write them: `bert/...`
  plus the head, e.g. `output_weights`, `output_bias`) or an HF transformers directory of the
  task's architecture (AlbertForSequenceClassification, AlbertForMultipleChoice,
  AlbertForQuestionAnswering). A checkpoint that lacks any variable the model needs is an error
  naming it: nothing is left at its random initial value.

  Args:
    model: the task model, built.
    path: the checkpoint prefix or directory, or the HF directory.
    label_list: a classifier's labels in the task's order: an HF directory's id2label names put
      its head's rows in that order (albert_tf/checkpoints/hf/heads.py). TF1 / TF2 checkpoints carry no names.
  Returns:
    the checkpoint's global step (None when it records none, as an HF directory).
  Raises:
    AlbertError: no checkpoint at path; a checkpoint of another kind of model (both kinds
      named) or with another number of classes; a variable missing; a shape differs.
    NotFiniteError: a weight holds NaN or inf (a diverged run's checkpoint).
  """
  step = _restore_every_weight(model, path, label_list)
  refuse_non_finite_weights(model, path)
  return step


def refuse_non_finite_weights(model, path):
  """Raises NotFiniteError naming `path` and the first weight of `model` holding NaN/inf.
  (One pass over the weights: about 10 ms for ALBERT-base.)"""
  for weight in model.weights:
    if weight.dtype.is_floating and not bool(tf.reduce_all(tf.math.is_finite(weight))):
      raise NotFiniteError(f"{path}: holds non-finite weights (NaN/inf in {weight.name}): a "
                           f"diverged run's checkpoint; use an earlier checkpoint, or train "
                           f"again with a lower --learning_rate")


def _restore_every_weight(model, path, label_list):
  source = formats.detect(path, hub_modules=False)
  if source.name == formats.HF:  # (its architecture and id2label name its head: hf_heads)
    _refuse_unnamed(model, path, "an HF directory")
    report = load_hf_checkpoint(model, path, label_list=label_list, require_head=True)
    _refuse_incomplete(report, path)
    logging.info("%s", report)
    return None
  path = source.path
  refuse_other_kind(source, model)
  if source.name == formats.TF2:
    tf2.restore_tf2_model(model, path)
    return checkpoint_global_step(path)
  _refuse_unnamed(model, path, "a TF1 checkpoint")
  report = tf1.load_tf1_checkpoint(model, path)
  _refuse_incomplete(report, path)
  encoder_scopes = (official_names.ENCODER_SCOPE, tf1.HUB_SCOPE + official_names.ENCODER_SCOPE)
  extra = [n for n in report.unexpected if n.startswith(encoder_scopes)]
  if extra:
    raise AlbertError(f"{path}: checkpoint holds encoder variable {extra[0]} that the config has "
                      f"no place for (does albert_config match the checkpoint?)")
  logging.info("%s", report)
  return checkpoint_global_step(path)


def refuse_other_kind(source, model):
  """Raises unless the TF1 / TF2 checkpoint `source` (a formats adapter) holds a model of
  `model`'s kind with its number of classes: one line naming the kind the checkpoint holds (from
  its variable names) and the kind wanted. An encoder takes the encoder of any checkpoint. (HF
  directories name their head by architecture and id2label: hf_heads checks those.)

  Raises:
    AlbertError: e.g. "out/mrpc/model.ckpt-best: holds a classifier checkpoint (...), but this
      command needs a multiple_choice model (...)".
  """
  want = kinds.kind_of(model)
  if want == kinds.ENCODER:
    return
  held = source.held_kind()
  if want not in held.kinds:
    raise AlbertError(f"{source.path}: holds {held.describe()}, but this command needs a "
                      f"{want} model ({kinds.DESCRIPTIONS[want]}): give it a {want} checkpoint")
  classes = getattr(model, "num_classes", None)
  if (want in (kinds.CLASSIFIER, kinds.TOKEN_CLASSIFIER) and held.rows is not None
      and held.rows != classes):
    raise AlbertError(f"{source.path}: holds a {want} with {held.rows} classes (its "
                      f"{held.evidence}), but this task's classifier has {classes}: give it a "
                      "checkpoint fine-tuned on this task")


def _refuse_unnamed(model, path, what):
  """Name-based checkpoints fill only variables with an official name: refuse any other."""
  unnamed = official_names.unnamed_variables(model)
  if unnamed:
    raise AlbertError(f"{path}: {what} cannot fill {unnamed[0].name} of "
                      f"{type(model).__name__} (no official name)")


def _refuse_incomplete(report, path):
  if report.missing:
    raise AlbertError(f"{path}: checkpoint lacks {len(report.missing)} variables of this model, "
                      f"e.g. {report.missing[0]} (a pretraining checkpoint, or another task's?)")

