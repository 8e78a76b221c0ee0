"""`python -m albert_tf.tools.build_corpus`: the docstring corpus command (its flags:
albert_tf/cli/build_corpus.py). The library is albert_tf/tools/docstring_corpus.py; its names stay
importable from this older path."""

if __name__ == "__main__":  # run as a command: quiet TensorFlow before anything imports it
  from albert_tf.common import console  # pylint: disable=g-import-not-at-top
  console.quiet_startup()

from albert_tf.tools.docstring_corpus import (  # pylint: disable=unused-import
    build_docstring_corpus, default_source_dirs, docstring_to_sentences, iter_docstring_documents)

if __name__ == "__main__":
  from albert_tf.cli.build_corpus import main  # pylint: disable=g-import-not-at-top
  main()
