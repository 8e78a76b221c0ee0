"""`python -m albert_tf.cli.train_spm`, the SentencePiece command: its flags (defined only when
it runs) and their conversion into one call of
albert_tf.text.sentencepiece_training.train_sentencepiece."""

if __name__ == "__main__":  # run as a command: quiet TensorFlow before anything imports it
  from albert_tf.common import console  # pylint: disable=g-import-not-at-top
  console.quiet_startup()

import sys

from absl import flags

from albert_tf.cli.command import PREFIX, output_flags, require_flags, run_command
from albert_tf.common import file_patterns
from albert_tf.errors import AlbertError
from albert_tf.text.sentencepiece_training import (pieces_of, records_normalisation,
                                                   train_sentencepiece)

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_string("input_file", None, "Comma-separated text files or globs, one sentence "
                      "per line.")
  flags.DEFINE_string("model_prefix", None, "Writes <prefix>.model and <prefix>.vocab.")
  flags.DEFINE_integer("vocab_size", 30000, "Vocabulary size (30000 for the released models). "
                       "A corpus too small for it gives fewer pieces, with a warning; the "
                       "model config's vocab_size must then be the model's piece count.")
  flags.DEFINE_bool("preprocess_text", False, "Train on the text as create_pretraining_data.py "
                    "reads it: every line through the records' normalisation (whitespace "
                    "collapsed, accents stripped), lower-cased unless --nodo_lower_case.")
  flags.DEFINE_bool("do_lower_case", True, "With --preprocess_text: lower-case, as "
                    "create_pretraining_data.py --do_lower_case (give the same value to both).")
  output_flags(model_prefix=PREFIX)


def _train_spm(argv):
  del argv
  require_flags(("input_file", "model_prefix"))
  if FLAGS["do_lower_case"].present and not FLAGS.preprocess_text:
    raise AlbertError("--do_lower_case acts only with --preprocess_text (SentencePiece itself "
                      "keeps case): add --preprocess_text")
  preprocess = (records_normalisation(FLAGS.do_lower_case) if FLAGS.preprocess_text else None)
  path = train_sentencepiece(file_patterns.expand(FLAGS.input_file), FLAGS.model_prefix,
                             vocab_size=FLAGS.vocab_size, preprocess=preprocess)
  pieces = pieces_of(path)
  if pieces < FLAGS.vocab_size:
    print(f"warning: the corpus gave {pieces} pieces, fewer than --vocab_size="
          f"{FLAGS.vocab_size}: set vocab_size={pieces} in the model config (or give more text)",
          file=sys.stderr)
  print(f"wrote SentencePiece model {path} ({pieces} pieces)")


def main():
  """Defines the flags, parses the command line and runs (exit 2 on bad input)."""
  run_command(define_flags, _train_spm, stop_on_signals=True)


if __name__ == "__main__":
  main()
