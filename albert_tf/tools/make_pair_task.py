"""`python -m albert_tf.tools.make_pair_task`: the sentence-pair task command (its flags:
albert_tf/cli/make_pair_task.py). The library is albert_tf/tools/pair_task.py; its names stay
importable from this older path."""

if __name__ == "__main__":  # run as a command: quiet TensorFlow before anything imports it
  from albert_tf.common import console  # pylint: disable=g-import-not-at-top
  console.quiet_startup()

from albert_tf.tools.pair_task import make_sentence_pairs, read_documents, write_mrpc_task  # pylint: disable=unused-import

if __name__ == "__main__":
  from albert_tf.cli.make_pair_task import main  # pylint: disable=g-import-not-at-top
  main()
