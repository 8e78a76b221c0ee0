"""Converts ALBERT checkpoints: official TF1 (name-based) <-> ours (TF2 object-based).

  python -m albert_tf.convert_checkpoint --albert_config_file=albert_base/albert_config.json \
      --input_checkpoint=albert_base/model.ckpt-best --output_checkpoint=albert_base_tf2/ckpt

The direction follows from the input (TF1 in -> TF2 out, TF2 in -> TF1 out) unless --direction
says otherwise. Heads (`cls/...`) are converted when the input has them; otherwise only the encoder.
Our TF2 checkpoints are `tf.train.Checkpoint(model=...)` with the encoder at `model/encoder`, the
layout every run_* script reads with --init_checkpoint.
"""

import os

from absl import app
from absl import flags
from absl import logging
import tensorflow as tf

from albert_tf.checkpoints import tf1
from albert_tf.checkpoints.init import restore_tf2_checkpoint
from albert_tf.config import AlbertConfig
from albert_tf.errors import AlbertError, run_main
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.networks.encoder import AlbertEncoder

FLAGS = flags.FLAGS
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the checkpoint.")
flags.DEFINE_string("input_checkpoint", None, "Checkpoint prefix or directory to convert.")
flags.DEFINE_string("output_checkpoint", None, "Prefix of the checkpoint to write.")
flags.DEFINE_enum("direction", "auto", ["auto", "tf1_to_tf2", "tf2_to_tf1"],
                  "Conversion direction; auto detects the input's format.")


def _write_state(prefix):
  """Writes the `checkpoint` file so the output directory works with latest_checkpoint."""
  directory = os.path.dirname(prefix) or "."
  tf.compat.v1.train.update_checkpoint_state(directory, os.path.basename(prefix))


def tf1_to_tf2(config, input_path, output_prefix):
  """Official TF1 checkpoint -> TF2 object checkpoint. Returns the LoadReport."""
  reader = tf.train.load_checkpoint(input_path)
  has_heads = reader.has_tensor("cls/predictions/output_bias")
  model = AlbertPretrainer(config) if has_heads else AlbertEncoder(config)
  report = tf1.load_tf1_checkpoint(model, input_path)
  if report.missing:
    raise AlbertError(f"{input_path}: checkpoint lacks {len(report.missing)} variables of this "
                      f"config, e.g. {report.missing[0]} (does albert_config match?)")
  root = model if has_heads else tf.train.Checkpoint(encoder=model)
  tf.io.gfile.makedirs(os.path.dirname(output_prefix) or ".")
  written = tf.train.Checkpoint(model=root).write(output_prefix)
  _write_state(written)
  return report


def tf2_to_tf1(config, input_path, output_prefix):
  """TF2 object checkpoint of ours -> official TF1 layout. Returns the prefix written."""
  keys = tf.train.load_checkpoint(input_path).get_variable_to_shape_map()
  has_heads = any(k.startswith("model/masked_lm_head/") for k in keys)
  model = AlbertPretrainer(config) if has_heads else AlbertEncoder(config)
  restore_tf2_checkpoint(model, input_path)
  return tf1.save_tf1_checkpoint(model, output_prefix)


def convert(config_file, input_checkpoint, output_checkpoint, direction="auto"):
  """Library entry point of the command. Returns the direction used."""
  config = AlbertConfig.from_json_file(config_file)
  input_path = tf1.resolve_checkpoint_path(input_checkpoint)
  if direction == "auto":
    direction = "tf2_to_tf1" if tf1.is_tf2_checkpoint(input_path) else "tf1_to_tf2"
  if direction == "tf1_to_tf2":
    report = tf1_to_tf2(config, input_path, output_checkpoint)
    logging.info("%s", report)
    if report.unexpected:
      print(f"note: {len(report.unexpected)} checkpoint variables were not used: "
            f"{', '.join(report.unexpected[:5])}{' ...' if len(report.unexpected) > 5 else ''}")
  else:
    tf2_to_tf1(config, input_path, output_checkpoint)
  print(f"{direction}: {input_path} -> {output_checkpoint}")
  return direction


def main(argv):
  del argv
  for name in ("albert_config_file", "input_checkpoint", "output_checkpoint"):
    if not getattr(FLAGS, name):
      raise AlbertError(f"--{name} is required")
  convert(FLAGS.albert_config_file, FLAGS.input_checkpoint, FLAGS.output_checkpoint,
          FLAGS.direction)


if __name__ == "__main__":
  app.run(run_main(main))
