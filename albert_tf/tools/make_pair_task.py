"""Builds a sentence-pair task ("does B follow A?") from a corpus, in GLUE MRPC format.

  python -m albert_tf.tools.make_pair_task --input_file=corpus.txt --output_dir=glue/MRPC
  python run_classifier.py --task_name=MRPC --data_dir=glue ...
"""

from absl import app
from absl import flags

from albert_tf.data.sentence_pair_task import write_mrpc_task
from albert_tf.errors import AlbertError, run_main

flags.DEFINE_string("input_file", None, "Corpus: one sentence per line, blank line between "
                    "documents.")
flags.DEFINE_string("output_dir", None, "Directory for train.tsv, dev.tsv and test.tsv.")
flags.DEFINE_integer("num_train", 2000, "Training pairs.")
flags.DEFINE_integer("num_dev", 400, "Development pairs.")
flags.DEFINE_integer("num_test", 100, "Test pairs (unlabelled, as GLUE's).")
flags.DEFINE_integer("random_seed", 12345, "Seed of the pair draw.")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  if not FLAGS.input_file or not FLAGS.output_dir:
    raise AlbertError("--input_file and --output_dir are required")
  counts = write_mrpc_task(FLAGS.input_file, FLAGS.output_dir, FLAGS.num_train, FLAGS.num_dev,
                           FLAGS.num_test, FLAGS.random_seed)
  print(f"wrote {counts} sentence pairs (MRPC format) to {FLAGS.output_dir}")


if __name__ == "__main__":
  app.run(run_main(main))
