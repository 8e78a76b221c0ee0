"""Converts ALBERT checkpoints between official TF1 (name-based), ours (TF2 object-based) and
Hugging Face transformers directories (`config.json` + `model.safetensors`).

  python -m albert_tf.cli.convert --albert_config_file=albert_base/albert_config.json \
      --input_checkpoint=albert_base/model.ckpt-best --output_checkpoint=albert_base_tf2/ckpt
  python -m albert_tf.cli.convert --input_checkpoint=hf_albert_dir \
      --output_checkpoint=albert_from_hf/model.ckpt
  python -m albert_tf.cli.convert --albert_config_file=albert_base/albert_config.json \
      --input_checkpoint=albert_base/model.ckpt-best --output_checkpoint=hf_albert_dir \
      --output_format=hf
  python -m albert_tf.cli.convert --albert_config_file=albert_base/albert_config.json \
      --input_checkpoint=mnli_out/model.ckpt-best --output_checkpoint=hf_albert_mnli \
      --output_format=hf --label_list=contradiction,entailment,neutral


The input's format is detected. The output format is --output_format, by default the other of
TF1 / TF2 for those inputs and TF1 (the official layout) for an HF directory; --direction (the
older flag) still says tf1_to_tf2 or tf2_to_tf1. --albert_config_file is needed only when the
input carries no config: an HF directory has its config.json, a tarball and the outputs of our
tools their albert_config.json (beside a TF1/TF2 checkpoint). Every output is self-describing:
`albert_config.json` beside a TF1 or TF2 output (an HF output has its config.json) and the
input's SentencePiece model, when it has one (`30k-clean.model`; `spiece.model` in an HF
directory). The input's model is converted whole, its head included: the pretraining heads
(`cls/...`; HF AlbertForPreTraining), a GLUE classifier or regression (`output_weights` [N, H];
HF AlbertForSequenceClassification with id2label), the RACE scorer (`output_weights` [1, H]; HF
AlbertForMultipleChoice), the SQuAD v1.1 head (`cls/squad/`; HF AlbertForQuestionAnswering), or
the encoder alone. The head says which (--model_type when it cannot: a one-row official head is
a regression or a multiple-choice scorer); --label_list gives a classifier's class names for an
HF output's id2label (an HF input's own are kept). Our TF2 checkpoints are
`tf.train.Checkpoint(model=...)` with the encoder at `model/encoder`, the layout every run_*
script reads with --init_checkpoint; for HF output, --output_checkpoint is the directory.

This module is the library (`convert`); the command, `python -m albert_tf.cli.convert`, is
albert_tf/cli/convert.py (its flags).
"""

import os

from absl import logging

from albert_tf.common import fileio
from albert_tf.checkpoints import formats
from albert_tf.checkpoints.hf.heads import hf_label_names
from albert_tf.checkpoints.hf.tensors import read_hf_tensors
from albert_tf.checkpoints import model_source
from albert_tf.checkpoints import official_names
from albert_tf.checkpoints import tf2
from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError

FORMATS = (formats.TF1, formats.TF2, formats.HF)  # the formats written
HF_TOKENIZER_CONFIG = "tokenizer_config.json"  # which tokenizer class HF's AutoTokenizer builds
_DEFAULT_OUTPUT = {"tf1": "tf2", "tf2": "tf1", "hf": "tf1", formats.TARBALL: "tf2"}


def input_format(path):
  """'hf', 'tf2' or 'tf1' for a checkpoint path; the path resolved to a prefix when TF."""
  source = formats.detect(path, hub_modules=False)
  return source.name, source.path


def _note_unused(report):
  logging.info("%s", report)
  if report.unexpected:
    print(f"note: {len(report.unexpected)} checkpoint variables were not used: "
          f"{', '.join(report.unexpected[:5])}{' ...' if len(report.unexpected) > 5 else ''}")


def read_model(config, fmt, input_path, model_type=None, label_list=None):
  """Builds the model the input holds and loads every weight of it.

  model_type: model_source.MODEL_TYPES, None to read it from the input (its head's names and
  shape, an HF config.json's architectures). label_list: a classifier's labels in the order
  wanted (an HF input's id2label rows are put in it).
  Returns:
    (model, model type).
  """
  model_type, num_labels = model_source.checkpoint_model_type(input_path, model_type)
  model = model_source.build_model(model_type, config, num_labels)
  report = formats.adapter_class(fmt)(input_path).load_into(model, label_list=label_list)
  if report is not None:  # (our TF2 checkpoints fail loudly instead)
    _note_unused(report)
  return model, model_type


def write_model(model, fmt, output, label_list=None):
  """Writes the model in format `fmt` at `output` (prefix, or directory for hf)."""
  formats.adapter_class(fmt).save(model, output, label_list=label_list)


def _notes_on_what_is_lost(fmt, input_path, output_format, model_type, labels):
  """What an HF input holds that a TF1 / TF2 output cannot, what HF lacks, and a TF2 input's
  early-exit classifiers, which no conversion carries (printed). (A TF1 input's unused
  variables, early exit's included, are named by `_note_unused`.)"""
  if fmt == "tf2":
    layers = sorted({name[len(tf2.EARLY_EXIT_PREFIX):].split("/")[0]
                     for name in tf2.early_exit_variables(input_path)})
    if layers:
      print(f"note: early exit's internal classifiers are left out ({len(layers)} layers: "
            f"{tf2.EARLY_EXIT_PREFIX}{{{','.join(layers)}}}/output_weights and output_bias): "
            f"the {output_format} output holds the ordinary classifier only")
  if fmt != "hf" or output_format == "hf":
    return
  if labels:
    print(f"note: {output_format} checkpoints keep no class names; pass "
          f"--label_list={','.join(labels)} when converting back to hf")
  if model_type in model_source.SQUAD_TYPES and official_names.HF_POOLER + ".weight" not in (
      read_hf_tensors(input_path, shapes_only=True)):
    print("note: HF AlbertForQuestionAnswering has no pooler: bert/pooler/dense is freshly "
          "initialised (SQuAD does not read it)")


def _write_new(path, data, what):
  """Writes bytes `data` at `path` unless it holds them already; refuses to replace others."""
  if fileio.exists(path):
    if fileio.read_bytes(path) == data:
      return path
    raise AlbertError(f"{path}: exists with another {what}; remove it or choose another "
                      "--output_checkpoint")
  return fileio.write_bytes(path, data)


def write_beside(output_checkpoint, output_format, config, spm_model_file=None,
                 vocab_file=None):
  """Makes the output self-describing: albert_config.json beside a TF1/TF2 output (an HF output
  has its config.json) and the input's SentencePiece model, when it has one, as the format names
  it (30k-clean.model; an HF directory's spiece.model), so that from_pretrained,
  --init_checkpoint and this converter read the output with no other flag. A WordPiece model's
  vocabulary (vocab_file, when there is no SentencePiece model) keeps its name beside a TF1/TF2
  output (vocab_chinese.txt) and becomes vocab.txt in an HF directory, with a
  tokenizer_config.json naming BertTokenizer (as HF's Chinese ALBERTs: AlbertTokenizer needs a
  SentencePiece model).

  Returns:
    the files written (or found already there, identical).
  Raises:
    AlbertError: a different file of that name is already there.
  """
  if output_format == formats.HF:
    directory, spm_name, written = os.fspath(output_checkpoint), formats.HF_SPM_FILE, []
  else:
    directory = os.path.dirname(os.fspath(output_checkpoint)) or "."
    spm_name = formats.SPM_FILE
    written = [_write_new(os.path.join(directory, formats.CONFIG_FILE),
                          config.to_json_string().encode("utf-8"), "config")]
  if spm_model_file:
    written.append(_write_new(os.path.join(directory, spm_name),
                              fileio.read_bytes(spm_model_file), "SentencePiece model"))
  elif vocab_file:
    hf = output_format == formats.HF
    name = formats.WORDPIECE_FILES[-1] if hf else os.path.basename(vocab_file)
    written.append(_write_new(os.path.join(directory, name), fileio.read_bytes(vocab_file),
                              "vocabulary"))
    tokenizer_config = os.path.join(directory, HF_TOKENIZER_CONFIG)
    if hf and not fileio.exists(tokenizer_config):
      written.append(fileio.write_json(tokenizer_config, {"tokenizer_class": "BertTokenizer"}))
  return written


def convert(config_file, input_checkpoint, output_checkpoint, direction="auto",
            output_format=None, model_type=None, label_list=None):
  """Converts `input_checkpoint` (format detected) to `output_checkpoint`.

  config_file: albert_config.json, or None: the input's own (an HF config.json, a tarball's or
    the albert_config.json beside a TF1/TF2 checkpoint). The config is written beside a TF1/TF2
    output as albert_config.json, with the input's SentencePiece model when it has one
    (`write_beside`).
  direction: "auto", or the older "tf1_to_tf2" / "tf2_to_tf1" (checked against the input).
  output_format: "tf1", "tf2" or "hf"; None: tf2 for a TF1 input, else tf1.
  model_type: which model the input holds (model_source.MODEL_TYPES); None: read from the input
    (a one-row head, regression or multiple choice, must be named).
  label_list: a classifier's class names in order: an HF output's id2label (default: an HF
    input's own), and the order an HF input's rows are put in.

  Returns:
    The conversion done, e.g. "hf_to_tf1" (also printed, with the paths).
  """
  fmt, input_path = input_format(input_checkpoint)
  if direction != "auto":
    want_in, want_out = direction.split("_to_")
    if fmt != want_in:
      raise AlbertError(f"{input_path}: --direction={direction} but the input is a {fmt} "
                        "checkpoint")
    if output_format not in (None, want_out):
      raise AlbertError(f"--direction={direction} contradicts --output_format={output_format}")
    output_format = want_out
  output_format = output_format or _DEFAULT_OUTPUT[fmt]
  if output_format not in FORMATS:
    raise AlbertError(f"--output_format={output_format!r} is invalid: expected one of "
                      f"{', '.join(FORMATS)}")
  source = formats.adapter_class(fmt)(input_path)
  # The input's own config (an HF config.json, a tarball's, or the one beside a checkpoint).
  config = AlbertConfig.from_json_file(config_file) if config_file else source.config()
  own_labels = hf_label_names(input_path) if fmt == "hf" else None  # id2label's names
  model, model_type = read_model(config, fmt, input_path, model_type, label_list or own_labels)
  if model_type not in ("classifier", "token_classifier"):
    if label_list:
      raise AlbertError(f"--label_list names a classifier's classes, but {input_path} holds a "
                        f"{model_type} model")
    own_labels = None
  write_model(model, output_format, output_checkpoint, label_list=label_list or own_labels)
  write_beside(output_checkpoint, output_format, config, source.spm_model_file(),
               source.vocab_file())
  _notes_on_what_is_lost(fmt, input_path, output_format, model_type, own_labels)
  done = f"{fmt}_to_{output_format}"
  print(f"{done}: {input_path} -> {output_checkpoint} ({model_type})")
  return done
