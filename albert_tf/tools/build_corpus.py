"""Builds an English corpus from the docstrings of the installed Python packages (no download).

  python -m albert_tf.tools.build_corpus --output_file=corpus.txt --max_mb=8
"""

from absl import app
from absl import flags

from albert_tf.data.corpus import build_docstring_corpus
from albert_tf.errors import AlbertError, run_main

flags.DEFINE_string("output_file", None, "Text file to write (one sentence per line, blank line "
                    "between documents).")
flags.DEFINE_float("max_mb", 8.0, "Stop at this many megabytes.")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  if not FLAGS.output_file:
    raise AlbertError("--output_file is required")
  written = build_docstring_corpus(FLAGS.output_file, max_bytes=int(FLAGS.max_mb * 1e6))
  print(f"wrote {written / 1e6:.1f} MB of docstring sentences to {FLAGS.output_file}")


if __name__ == "__main__":
  app.run(run_main(main))
