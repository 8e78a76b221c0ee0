"""`python -m albert_tf.cli.build_corpus`, the docstring corpus command: its flags (defined only
when it runs) and their conversion into one call of
albert_tf.tools.docstring_corpus.build_docstring_corpus."""

if __name__ == "__main__":  # run as a command: quiet TensorFlow before anything imports it
  from albert_tf.common import console  # pylint: disable=g-import-not-at-top
  console.quiet_startup()

from absl import flags

from albert_tf.cli.command import FILE, output_flags, require_flags, run_command
from albert_tf.tools.docstring_corpus import build_docstring_corpus

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_string("output_file", None, "Text file to write (one sentence per line, blank "
                      "line between documents).")
  flags.DEFINE_float("max_mb", 8.0, "Stop at this many megabytes.")
  output_flags(output_file=FILE)


def _build_corpus(argv):
  del argv
  require_flags(("output_file",))
  written = build_docstring_corpus(FLAGS.output_file, max_bytes=int(FLAGS.max_mb * 1e6))
  print(f"wrote {written / 1e6:.1f} MB of docstring sentences to {FLAGS.output_file}")


def main():
  """Defines the flags, parses the command line and runs (exit 2 on bad input)."""
  run_command(define_flags, _build_corpus, stop_on_signals=True)


if __name__ == "__main__":
  main()
