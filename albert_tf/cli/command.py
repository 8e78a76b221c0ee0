"""How every command runs, whatever its flags: parsing, the output-path checks, one-line errors.

The top-level scripts and the `python -m albert_tf.<...>` commands all start through `run` (or
`run_command`, for a command whose flags live in albert_tf/cli/). Their flag groups and flags ->
typed configs are in the family modules beside this one: training_flags.py (what both training
families share), pretraining_flags.py, finetuning_flags.py, and a module per tool command.
Only albert_tf/cli/ and the top-level scripts define or read absl flags
(tests/cli/test_no_flags_below_cli.py).
"""

import os
import sys

from absl import app
from absl import flags

from albert_tf.common import fileio
from albert_tf.errors import AlbertError, run_main
from albert_tf.training import preemption

FLAGS = flags.FLAGS


def list_in_help(names):
  """Lists flags defined in albert_tf/cli/ in the running command's --help, which absl limits to
  the flags of the main module (the script, or the module run with -m)."""
  for name in names:
    FLAGS.register_key_flag_for_module(sys.argv[0], FLAGS[name])


def define_once(define, name, *args, **kwargs):
  """Defines a flag of a shared group unless the script already has it (the groups may
  overlap), listed in the script's --help."""
  if name not in FLAGS:
    define(name, *args, **kwargs)
    list_in_help([name])


def parse_flags(argv, pass_unknown_flags=False):
  """absl's flag parsing, with a bad value or an unknown flag reported as every bad input is:
  one `error:` line and exit status 2 (absl's own: a FATAL line and status 1).

  pass_unknown_flags: unknown flags are not an error but handed to main in argv[1:] (e.g.
  Apache Beam's pipeline options), which decides."""
  try:
    return FLAGS(argv, known_only=pass_unknown_flags)
  except flags.Error as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)


# What a command writes at a path flag: fileio's kinds, and a comma-separated list of files.
DIRECTORY, FILE, PREFIX = fileio.DIRECTORY, fileio.FILE, fileio.PREFIX
FILE_LIST = "file list"

# The flags naming paths the running command writes: name -> (kind, or a function of the parsed
# flags returning one; written only when missing). Declared with `output_flags`, checked by
# `check_output_flags` before the command's main runs.
_OUTPUT_FLAGS = {}


def output_flags(written_if_missing=False, **kinds):
  """Declares flags of the running command as paths it writes, e.g.
  `output_flags(output_dir=DIRECTORY)`; a kind may be a function of the parsed flags (the
  converter's --output_checkpoint is a directory for hf). `written_if_missing`: caches, only
  read when they exist."""
  for name, kind in kinds.items():
    _OUTPUT_FLAGS[name] = (kind, written_if_missing)


def _declared_outputs(f=FLAGS):
  """(flag name, path, kind, written_if_missing) of every path the declared flags name."""
  for name, (kind, written_if_missing) in _OUTPUT_FLAGS.items():
    if name not in f or not f[name].value:
      continue
    kind = kind(f) if callable(kind) else kind
    paths = f[name].value.split(",") if kind == FILE_LIST else [f[name].value]
    for path in paths:
      yield name, path.strip(), FILE if kind == FILE_LIST else kind, written_if_missing


def check_output_flags(f=FLAGS):
  """One-line error for the first declared output path the command could not write: a file
  where a directory is expected or the reverse, a path under a regular file, a directory that
  is not writable (see fileio.output_path_problem)."""
  for name, path, kind, written_if_missing in _declared_outputs(f):
    problem = fileio.output_path_problem(path, kind, written_if_missing)
    if problem:
      raise AlbertError(f"--{name}={path}: {problem}")


def output_locations(f=FLAGS):
  """[(directory, names)] where the declared output flags write, for StopCommand: a directory
  output itself (any name), else the file's directory (names starting with its name, and a
  checkpoint prefix's `checkpoint` state file)."""
  locations = []
  for _, path, kind, _ in _declared_outputs(f):
    if kind == DIRECTORY:
      locations.append((path, None))
    else:
      names = [os.path.basename(path)] + (["checkpoint"] if kind == PREFIX else [])
      locations.append((os.path.dirname(path) or ".", names))
  return locations


def run(main, pass_unknown_flags=False):
  """Runs a script's `main(argv)`: flags parsed by `parse_flags`, the output paths checked
  (`check_output_flags`), errors by `run_main`."""

  def checked_main(argv):
    check_output_flags()
    return main(argv)

  app.run(run_main(checked_main),
          flags_parser=lambda argv: parse_flags(argv, pass_unknown_flags))


def run_command(define_flags, main, stop_on_signals=False):
  """Runs a command whose flags live in albert_tf/cli/: defines them (listed in its --help),
  parses the command line and calls `main` (bad input: one `error:` line, exit status 2).

  stop_on_signals: SIGTERM/SIGINT end the command with one line and exit status 42, leaving
    none of its temporaries beside its declared outputs, where those that killed runs left
    are removed first (preemption.StopCommand)."""
  before = set(FLAGS)
  define_flags()
  list_in_help(sorted(set(FLAGS) - before))
  if not stop_on_signals:
    run(main)
    return

  def stoppable_main(argv):
    with preemption.StopCommand(output_locations()) as stop:
      try:
        return main(argv)
      except Exception:  # pylint: disable=broad-except
        if stop.requested:
          # The handler's StopRequested, raised inside C code (a checkpoint read), can come out
          # of it as another error, which our code may even report as bad input (seen in CI:
          # "unreadable (pybind11 ... REPLACED BY StopRequested)", exit 2): it is the stop.
          raise stop.stop_requested() from None
        raise

  run(stoppable_main)


def require_flags(names, f=FLAGS):
  """One-line error naming the first of the flags `names` that is not set."""
  for name in names:
    if not getattr(f, name):
      raise AlbertError(f"--{name} is required")


def require_action(actions, f=FLAGS):
  """One-line error unless one of the script's action flags (e.g. do_train, export_dir) is set."""
  if not any(getattr(f, name) for name in actions):
    names = [f"--{name}" for name in actions]
    raise AlbertError(f"at least one of {', '.join(names[:-1])} or {names[-1]} must be set")
