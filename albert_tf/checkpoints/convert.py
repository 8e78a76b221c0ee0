"""Converts ALBERT checkpoints between official TF1 (name-based), ours (TF2 object-based) and
Hugging Face transformers directories (`config.json` + `model.safetensors`).

  python -m albert_tf.checkpoints.convert --albert_config_file=albert_base/albert_config.json \
      --input_checkpoint=albert_base/model.ckpt-best --output_checkpoint=albert_base_tf2/ckpt
  python -m albert_tf.checkpoints.convert --input_checkpoint=hf_albert_dir \
      --output_checkpoint=albert_from_hf/model.ckpt
  python -m albert_tf.checkpoints.convert --albert_config_file=albert_base/albert_config.json \
      --input_checkpoint=albert_base/model.ckpt-best --output_checkpoint=hf_albert_dir \
      --output_format=hf

(`python -m albert_tf.convert_checkpoint`, the older path, runs the same command.)

The input's format is detected. The output format is --output_format, by default the other of
TF1 / TF2 for those inputs and TF1 (the official layout) for an HF directory; --direction (the
older flag) still says tf1_to_tf2 or tf2_to_tf1. An HF input needs no --albert_config_file: its
config.json gives the config, and the converter then writes `albert_config.json` beside a TF1 or
TF2 output. Heads (`cls/...`, HF `predictions.` + `sop_classifier.`) are converted when the
input has them; otherwise only the encoder. Our TF2 checkpoints are
`tf.train.Checkpoint(model=...)` with the encoder at `model/encoder`, the layout every run_*
script reads with --init_checkpoint; for HF output, --output_checkpoint is the directory.

Importing this module defines no flags; `run()` defines them and runs the command.
"""

import os

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf

from albert_tf import fileio
from albert_tf.checkpoints import hf
from albert_tf.checkpoints import official_names
from albert_tf.checkpoints import tf1
from albert_tf.checkpoints.init import restore_tf2_checkpoint
from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError, run_main
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.networks.encoder import AlbertEncoder

FORMATS = ("tf1", "tf2", "hf")
_DEFAULT_OUTPUT = {"tf1": "tf2", "tf2": "tf1", "hf": "tf1"}


def input_format(path):
  """'hf', 'tf2' or 'tf1' for a checkpoint path; the path resolved to a prefix when TF."""
  if hf.is_hf_directory(path):
    return "hf", os.fspath(path)
  resolved = tf1.resolve_checkpoint_path(path)
  return ("tf2" if tf1.is_tf2_checkpoint(resolved) else "tf1"), resolved


def _refuse_missing(report, input_path):
  if report.missing:
    raise AlbertError(f"{input_path}: checkpoint lacks {len(report.missing)} variables of this "
                      f"config, e.g. {report.missing[0]} (does albert_config match?)")


def _note_unused(report):
  logging.info("%s", report)
  if report.unexpected:
    print(f"note: {len(report.unexpected)} checkpoint variables were not used: "
          f"{', '.join(report.unexpected[:5])}{' ...' if len(report.unexpected) > 5 else ''}")


def read_model(config, fmt, input_path):
  """Builds the model the input holds (pretrainer with heads, else encoder) and loads it."""
  if fmt == "tf1":
    has_heads = tf.train.load_checkpoint(input_path).has_tensor(official_names.MLM_OUTPUT_BIAS)
  elif fmt == "tf2":
    keys = tf.train.load_checkpoint(input_path).get_variable_to_shape_map()
    has_heads = any(k.startswith("model/masked_lm_head/") for k in keys)
  else:
    names = hf.read_hf_tensors(input_path, names_only=True)
    has_heads = "predictions.bias" in names and "sop_classifier.classifier.weight" in names
  model = AlbertPretrainer(config) if has_heads else AlbertEncoder(config)
  if fmt == "tf2":
    restore_tf2_checkpoint(model, input_path)
    return model
  if fmt == "tf1":
    report = tf1.load_tf1_checkpoint(model, input_path)
  else:
    report = hf.load_hf_checkpoint(model, input_path)
  _refuse_missing(report, input_path)
  _note_unused(report)
  return model


def write_model(model, fmt, output):
  """Writes the model in format `fmt` at `output` (prefix, or directory for hf)."""
  if fmt == "tf1":
    tf1.save_tf1_checkpoint(model, output)
  elif fmt == "tf2":
    root = model if isinstance(model, AlbertPretrainer) else tf.train.Checkpoint(encoder=model)
    tf.io.gfile.makedirs(os.path.dirname(output) or ".")
    tf1.write_checkpoint_state(tf.train.Checkpoint(model=root).write(output))
  else:
    hf.save_hf_checkpoint(model, output)


def tf1_to_tf2(config, input_path, output_prefix):
  """Official TF1 checkpoint -> TF2 object checkpoint."""
  write_model(read_model(config, "tf1", input_path), "tf2", output_prefix)


def tf2_to_tf1(config, input_path, output_prefix):
  """TF2 object checkpoint of ours -> official TF1 layout. Returns the prefix written."""
  write_model(read_model(config, "tf2", input_path), "tf1", output_prefix)
  return output_prefix


def _write_config_beside(config, output_checkpoint):
  """albert_config.json next to a TF1/TF2 output; refuses to replace a different one."""
  path = os.path.join(os.path.dirname(os.fspath(output_checkpoint)) or ".", "albert_config.json")
  text = config.to_json_string()
  if os.path.exists(path):
    with open(path, "r", encoding="utf-8") as f:
      if f.read() == text:
        return path
    raise AlbertError(f"{path}: exists with another config; remove it or choose another "
                      "--output_checkpoint")
  return fileio.write_text(path, text)


def convert(config_file, input_checkpoint, output_checkpoint, direction="auto",
            output_format=None):
  """Library entry point of the command. Returns the conversion done, e.g. "hf_to_tf1"."""
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
  if config_file:
    config = AlbertConfig.from_json_file(config_file)
  elif fmt == "hf":
    config = hf.config_from_hf(input_path)
  else:
    raise AlbertError("--albert_config_file is required for a TF1 or TF2 input")
  model = read_model(config, fmt, input_path)
  write_model(model, output_format, output_checkpoint)
  if fmt == "hf" and not config_file and output_format != "hf":
    _write_config_beside(config, output_checkpoint)
  done = f"{fmt}_to_{output_format}"
  print(f"{done}: {input_path} -> {output_checkpoint}")
  return done


def _define_flags():
  """The command's flags, defined only when it runs (importing the library defines none)."""
  flags.DEFINE_string("albert_config_file", None, "albert_config.json (an HF input has its own).")
  flags.DEFINE_string("input_checkpoint", None, "TF1/TF2 prefix or directory, or HF directory.")
  flags.DEFINE_string("output_checkpoint", None, "Prefix to write (a directory for hf).")
  flags.DEFINE_enum("direction", "auto", ["auto", "tf1_to_tf2", "tf2_to_tf1"],
                    "Older flag; auto detects the input.")
  flags.DEFINE_enum("output_format", None, list(FORMATS),
                    "tf1 (official), tf2 (ours) or hf; default tf2 for TF1 input, else tf1.")


def main(argv):
  del argv
  options = flags.FLAGS
  for name in ("input_checkpoint", "output_checkpoint"):
    if not getattr(options, name):
      raise AlbertError(f"--{name} is required")
  convert(options.albert_config_file, options.input_checkpoint, options.output_checkpoint,
          options.direction, options.output_format)


def run():
  """`python -m albert_tf.checkpoints.convert` (and the albert_tf.convert_checkpoint shim)."""
  _define_flags()
  app.run(run_main(main))


if __name__ == "__main__":
  run()
