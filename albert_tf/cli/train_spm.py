"""`python -m albert_tf.cli.train_spm`, the SentencePiece command: its flags (defined only when
it runs) and their conversion into one call of
albert_tf.text.sentencepiece_training.train_sentencepiece."""

if __name__ == "__main__":  # run as a command: quiet TensorFlow before anything imports it
  from albert_tf.common import console  # pylint: disable=g-import-not-at-top
  console.quiet_startup()

from absl import flags

from albert_tf.cli.command import PREFIX, output_flags, require_flags, run_command
from albert_tf.text.sentencepiece_training import train_sentencepiece

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_string("input_file", None, "Comma-separated text files, one sentence per line.")
  flags.DEFINE_string("model_prefix", None, "Writes <prefix>.model and <prefix>.vocab.")
  flags.DEFINE_integer("vocab_size", 30000, "Vocabulary size (30000 for the released models).")
  output_flags(model_prefix=PREFIX)


def _train_spm(argv):
  del argv
  require_flags(("input_file", "model_prefix"))
  path = train_sentencepiece(FLAGS.input_file.split(","), FLAGS.model_prefix,
                             vocab_size=FLAGS.vocab_size)
  print(f"wrote SentencePiece model {path}")


def main():
  """Defines the flags, parses the command line and runs (exit 2 on bad input)."""
  run_command(define_flags, _train_spm, stop_on_signals=True)


if __name__ == "__main__":
  main()
