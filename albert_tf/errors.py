"""The one error type users see, and the helper scripts use to print it on one line."""

import sys


class AlbertError(ValueError):
  """Bad input from a user: a file, a line, a flag or a config value.

  The message is a single line that names what was wrong and what was expected.
  Scripts catch it in `run_main` and print it without a traceback.
  """


def run_main(main_fn):
  """Wraps an absl `main(argv)` so that AlbertError ends the process with one line.

  Returns a function suitable for `absl.app.run`.
  """

  def wrapped(argv):
    from albert_tf import console  # pylint: disable=g-import-not-at-top
    console.quiet_after_flags()
    try:
      return main_fn(argv)
    except AlbertError as e:
      print(f"error: {e}", file=sys.stderr)
      sys.exit(2)

  return wrapped
