"""The one error type users see, and the helper scripts use to print it on one line.

`run_main` also turns a full disk (ENOSPC, EFBIG, EDQUOT, from Python or from TensorFlow's file
system) anywhere in a script into one `error: ...` line with exit status 2.
"""

import errno
import io
import json
import os
import re
import sys

from albert_tf.common import console
from albert_tf.common import fileio

# The exit status of bad input (and of a full disk).
EXIT_BAD_INPUT = 2


class AlbertError(ValueError):
  """Bad input from a user: a file, a line, a flag or a config value.

  The message is a single line that names what was wrong and what was expected.
  Scripts catch it in `run_main` and print it without a traceback.
  """


# The exit status of a run stopped by SIGTERM/SIGINT after saving what it had done (the code
# TensorFlow's PreemptionCheckpointHandler uses for "restart me"): rerunning the same command
# resumes. Bad input exits with 2.
EXIT_STOPPED_BY_SIGNAL = 42


class NotFiniteError(AlbertError):
  """A checkpoint holds NaN/inf weights, or its evaluation gave a NaN/inf result: a diverged
  run's weights, never to be evaluated, predicted with or exported as if they were a model."""


class StopRequested(BaseException):
  """A SIGTERM/SIGINT stopped the run; its message says what was kept and how to resume.

  A BaseException (as KeyboardInterrupt), so no `except Exception` on the way swallows it.
  """

  # True when the message must be the process's last word: a worker of a cluster whose
  # peers are gone or going, where TensorFlow's gRPC would log connection errors while the
  # interpreter shuts down (see `end_with_last_line`).
  last_words = False

  def __init__(self, message, exit_code=EXIT_STOPPED_BY_SIGNAL):
    super().__init__(message)
    self.exit_code = exit_code


# ------------------------------------------------------------------------------ a full disk
_DISK_FULL = {
    errno.ENOSPC: ("No space left on device", "no space left on device"),
    errno.EFBIG: ("File too large", "file too large (a file size limit: `ulimit -f`, or the "
                  "file system's)"),
    errno.EDQUOT: ("Disk quota exceeded", "disk quota exceeded"),
}
# TensorFlow's file errors: "<path>; <strerror>" (a ResourceExhaustedError for ENOSPC and EDQUOT,
# an OutOfRangeError for EFBIG).
_TF_FILE_ERROR = re.compile(r"(?:^|\s)(\S+); (" + "|".join(
    re.escape(text) for text, _ in _DISK_FULL.values()) + ")")


def json_kind(value):
  """How an error message names a parsed JSON value's type ("an object", "a list", ...)."""
  return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
          type(None): "null"}.get(type(value), "a number")


def parse_json_object(text, where, expected):
  """`json.loads(text)`, required to be an object.

  Raises AlbertError "<where>: not JSON (line L, column C: reason)" or "<where>: found <kind>,
  expected <expected>" (`where` names the file, file:line or variable; `expected` describes the
  object).
  """
  try:
    value = json.loads(text)
  except json.JSONDecodeError as e:
    line = f"line {e.lineno}, " if "\n" in text.strip() else ""  # one-line texts: column only
    raise AlbertError(f"{where}: not JSON ({line}column {e.colno}: {e.msg})") from None
  if not isinstance(value, dict):
    raise AlbertError(f"{where}: found {json_kind(value)}, expected {expected}")
  return value


# ------------------------------------------------------------------------------ file errors
# What a failed read says when the filesystem gives no reason (ram:// raises NotFoundError with an
# empty message): the words a local disk's OSError would use, so a URL reads the same.
_TF_FILE_ERROR_WORDS = {"NotFoundError": "No such file or directory",
                        "PermissionDeniedError": "Permission denied"}


def file_errors():
  """The exceptions a read or write through albert_tf.common.fileio raises: OSError, and
  TensorFlow's OpError (tf.io.gfile's NotFoundError, ...) once TensorFlow is loaded (fileio loads
  it for any URL, so without it no URL was opened). For `except file_errors() as e:`."""
  tf = sys.modules.get("tensorflow")
  errors = getattr(tf, "errors", None)
  return (OSError, errors.OpError) if errors is not None else (OSError,)


def file_error_reason(error):
  """A few words for an error of `file_errors()`, as a local disk words it: e.g. "No such file
  or directory", for a local path and a URL alike."""
  if isinstance(error, OSError):
    return error.strerror or str(error) or type(error).__name__
  message = (getattr(error, "message", None) or "").strip()
  if "; " in message:  # "<path>; <strerror>"
    return message.rsplit("; ", 1)[1].splitlines()[0]
  return (_TF_FILE_ERROR_WORDS.get(type(error).__name__)
          or (message.splitlines()[0] if message else type(error).__name__))


def _file_being_written(traceback):
  """The name of the innermost writable file object in `traceback`'s frames, else None (an
  OSError from a write() on an open file carries no file name)."""
  frames = []
  while traceback is not None:
    frames.append(traceback.tb_frame)
    traceback = traceback.tb_next
  for frame in reversed(frames):
    for value in list(frame.f_locals.values()):
      # tempfile's wrappers hold the file object in `.file`.
      stream = value.file if type(value).__name__.startswith("_TemporaryFile") else value
      if isinstance(stream, io.IOBase) and isinstance(getattr(stream, "name", None), str):
        try:
          if stream.writable():
            return stream.name
        except ValueError:  # closed
          return stream.name
  return None


def _disk_full(error):
  """(what, path or None) when `error` (or what caused it) is a full disk, else None.

  The exceptions `error` was raised while handling count too: a full disk often surfaces as
  another error (autograph, which cannot write the module it generates, fails the conversion).
  """
  tf = sys.modules.get("tensorflow")
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    if isinstance(error, OSError) and error.errno in _DISK_FULL:
      path = error.filename or _file_being_written(error.__traceback__)
      return _DISK_FULL[error.errno][1], path
    if tf is not None and isinstance(error, tf.errors.OpError):
      match = _TF_FILE_ERROR.search(error.message or "")
      if match:
        what = next(what for text, what in _DISK_FULL.values() if text == match.group(2))
        return what, match.group(1)
    error = error.__cause__ or error.__context__
  return None


def _final_name(path):
  """What a temporary file of `fileio.atomic_path` (or a file inside one) will be called."""
  suffix = fileio.temporary_name("")  # ".tmp-<pid>": ours, since this process wrote it
  path = os.fspath(path).replace(suffix + "/", "/")
  return path[:-len(suffix)] if path.endswith(suffix) else path


def disk_full_message(error):
  """The one-line message for a full disk, or None when `error` is something else.

  Every file albert_tf writes is written whole or not at all (albert_tf/common/fileio.py), and a
  training run resumes from its last checkpoint, so what was done before is kept.
  """
  found = _disk_full(error)
  if found is None:
    return None
  what, path = found
  where = f" writing {_final_name(path)}" if path else ""
  return (f"{what}{where}: the files written before are intact (each file is written whole or "
          f"not at all); free some space and run the same command again")


def exit_at_once(message):
  """Prints `error: <message>` and ends the process now with exit status 2.

  For a wait inside TensorFlow's C++ code that neither an exception nor a signal interrupts
  (called from a watchdog thread); only for set-up, when nothing is being written.
  """
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (AttributeError, OSError, ValueError):
      pass
  os.write(2, f"error: {message}\n".encode("utf-8", "replace"))
  console.finish_filter()  # os._exit skips atexit
  os._exit(EXIT_BAD_INPUT)  # pylint: disable=protected-access


def end_with_last_line(message, exit_code):
  """Prints `message` as the process's last line on stderr and ends it with `exit_code`.

  Whatever would be written to stderr after it (a multi-worker run's gRPC connection errors
  while TensorFlow shuts down, which depend on when the peers exit) goes nowhere. Only for a
  run that has finished writing: everything is flushed, then os._exit.
  """
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (AttributeError, OSError, ValueError):
      pass
  stderr = os.dup(2)
  devnull = os.open(os.devnull, os.O_WRONLY)
  os.dup2(devnull, 2)  # from here on, nobody else writes to stderr
  os.write(stderr, f"{message}\n".encode("utf-8", "replace"))
  os.close(stderr)
  console.finish_filter(restore=False)  # the filter (if any) writes the line out
  os._exit(exit_code)  # pylint: disable=protected-access


# ------------------------------------------------------------------------------ scripts
def run_main(main_fn):
  """Wraps an absl `main(argv)` so that AlbertError and a full disk end the process with one
  line (exit status 2), and StopRequested with its message (EXIT_STOPPED_BY_SIGNAL).

  Returns a function suitable for `absl.app.run`.
  """

  def wrapped(argv):
    console.quiet_after_flags()
    try:
      return main_fn(argv)
    except AlbertError as e:
      print(f"error: {e}", file=sys.stderr)
      sys.exit(EXIT_BAD_INPUT)
    except StopRequested as e:
      if e.last_words:
        end_with_last_line(str(e), e.exit_code)
      print(str(e), file=sys.stderr, flush=True)
      sys.exit(e.exit_code)
    except Exception as e:  # pylint: disable=broad-except
      message = disk_full_message(e)
      if message is None:
        raise
      print(f"error: {message}", file=sys.stderr)
      sys.exit(EXIT_BAD_INPUT)

  return wrapped
