"""`python -m albert_tf.cli.make_pair_task`, the sentence-pair task command: its flags (defined
only when it runs) and their conversion into one call of albert_tf.tools.pair_task.write_mrpc_task."""

if __name__ == "__main__":  # run as a command: quiet TensorFlow before anything imports it
  from albert_tf.common import console  # pylint: disable=g-import-not-at-top
  console.quiet_startup()

from absl import flags

from albert_tf.cli.command import DIRECTORY, output_flags, require_flags, run_command
from albert_tf.tools.pair_task import PAIR_KINDS, write_mrpc_task

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_string("input_file", None, "Corpus: one sentence per line, blank line between "
                      "documents.")
  flags.DEFINE_string("output_dir", None, "Directory for train.tsv, dev.tsv and test.tsv.")
  flags.DEFINE_integer("num_train", 2000, "Training pairs.")
  flags.DEFINE_integer("num_dev", 400, "Development pairs.")
  flags.DEFINE_integer("num_test", 100, "Test pairs (unlabelled, as GLUE's).")
  flags.DEFINE_integer("random_seed", 12345, "Seed of the pair draw.")
  flags.DEFINE_enum("pair_kind", "next", sorted(PAIR_KINDS), "; ".join(
      f"{kind}: {meaning}" for kind, meaning in sorted(PAIR_KINDS.items())) + ".")
  flags.DEFINE_integer("span", 1, "Sentences a side: A is this many consecutive sentences, B "
                       "the next as many (or as many from another document).")
  flags.DEFINE_integer("num_heldout", 0, "Also write heldout.tsv with this many labelled pairs "
                       "that neither training nor evaluation reads (to query the exported model).")
  output_flags(output_dir=DIRECTORY)


def _make_pair_task(argv):
  del argv
  require_flags(("input_file", "output_dir"))
  counts = write_mrpc_task(FLAGS.input_file, FLAGS.output_dir, FLAGS.num_train, FLAGS.num_dev,
                           FLAGS.num_test, FLAGS.random_seed, FLAGS.pair_kind,
                           FLAGS.num_heldout, FLAGS.span)
  print(f"wrote {counts} sentence pairs (MRPC format, kind {FLAGS.pair_kind!r}) to "
        f"{FLAGS.output_dir}")


def main():
  """Defines the flags, parses the command line and runs (exit 2 on bad input)."""
  run_command(define_flags, _make_pair_task, stop_on_signals=True)


if __name__ == "__main__":
  main()
