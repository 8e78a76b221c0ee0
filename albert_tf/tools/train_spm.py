"""Trains a SentencePiece model with the official ALBERT settings.

  python -m albert_tf.tools.train_spm --input_file=corpus.txt --model_prefix=spm/30k-clean \
      --vocab_size=30000

Unigram, <pad>=0, <unk>=1, no BOS/EOS, control symbols [CLS]=2, [SEP]=3, [MASK]=4.
"""

from absl import app
from absl import flags

from albert_tf.errors import AlbertError, run_main
from albert_tf.text import train_sentencepiece

flags.DEFINE_string("input_file", None, "Comma-separated text files, one sentence per line.")
flags.DEFINE_string("model_prefix", None, "Writes <prefix>.model and <prefix>.vocab.")
flags.DEFINE_integer("vocab_size", 30000, "Vocabulary size (30000 for the released models).")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  if not FLAGS.input_file or not FLAGS.model_prefix:
    raise AlbertError("--input_file and --model_prefix are required")
  path = train_sentencepiece(FLAGS.input_file.split(","), FLAGS.model_prefix,
                             vocab_size=FLAGS.vocab_size)
  print(f"wrote SentencePiece model {path}")


if __name__ == "__main__":
  app.run(run_main(main))
