"""`python -m albert_tf.cli.download_data`, the public data command (for machines with internet):
its flags (defined only when it runs) and their conversion into one call of
albert_tf.tools.public_data.download."""

if __name__ == "__main__":  # run as a command: quiet TensorFlow before anything imports it
  from albert_tf.common import console  # pylint: disable=g-import-not-at-top
  console.quiet_startup()

from absl import flags

from albert_tf.cli.command import DIRECTORY, output_flags, require_flags, run_command
from albert_tf.tools import public_data

FLAGS = flags.FLAGS


def define_flags():
  flags.DEFINE_string("data_dir", None, "Where each data set's directory goes (GLUE: the "
                      "--data_dir of run_classifier.py; IMDB: aclImdb/; WNUT17: wnut17/, the "
                      "--data_dir of run_ner.py).")
  flags.DEFINE_string("tasks", None, "Comma-separated data sets: " + ", ".join(
      f"{d.name} ({d.description})" for d in public_data.DATA_SETS.values())
      + "; glue = every GLUE task.")
  flags.DEFINE_string("base_url", None, "A mirror holding the files under their own names "
                      "(an http(s):// or file:// URL, or a local directory) instead of their "
                      "public URLs.")
  flags.DEFINE_bool("keep_archives", False, "Keep the downloaded files in "
                    "<data_dir>/.downloads (default: deleted once unpacked).")
  output_flags(data_dir=DIRECTORY)


def _download_data(argv):
  del argv
  require_flags(("data_dir", "tasks"))
  done = public_data.download(FLAGS.tasks, FLAGS.data_dir, base_url=FLAGS.base_url,
                              keep_archives=FLAGS.keep_archives)
  print(f"done: {', '.join(f'{name} in {path}' for name, path in done.items())}")


def main():
  """Defines the flags, parses the command line and runs (exit 2 on bad input)."""
  run_command(define_flags, _download_data, stop_on_signals=True)


if __name__ == "__main__":
  main()
