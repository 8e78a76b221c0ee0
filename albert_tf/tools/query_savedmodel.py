"""`python -m albert_tf.tools.query_savedmodel`: queries an exported classifier SavedModel with
raw sentences (its flags: albert_tf/cli/query_savedmodel.py). The library is
albert_tf/tools/savedmodel_query.py; its names stay importable from this older path."""

if __name__ == "__main__":  # run as a command: quiet TensorFlow before anything imports it
  from albert_tf.common import console  # pylint: disable=g-import-not-at-top
  console.quiet_startup()

from albert_tf.tools.savedmodel_query import query, read_pairs  # pylint: disable=unused-import

if __name__ == "__main__":
  from albert_tf.cli.query_savedmodel import main  # pylint: disable=g-import-not-at-top
  main()
