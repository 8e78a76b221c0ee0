"""What a script prints: its own progress lines, results and errors, not TensorFlow's log noise.

`quiet_startup()` runs first thing in every script, before TensorFlow is imported (TensorFlow's
C++ logging level is read once, at import): it hides TensorFlow's C++ log lines (CUDA probing
on machines without GPUs, oneDNN and CPU-feature notices), Python warnings and matplotlib's
font-cache notice. `quiet_after_flags()` (called by `errors.run_main` once flags are parsed)
hides TensorFlow's Python logger (autograph, SavedModel and checkpoint notices) and prints the
script's own log lines plainly (`warning: ...` for warnings).

Everything comes back with `--verbosity=N` / `-v N` (absl's flag) or the environment variable
ALBERT_TF_VERBOSE=1; a TF_CPP_MIN_LOG_LEVEL set by the user is left alone.
"""

import logging
import os
import sys
import warnings

VERBOSE_ENV = "ALBERT_TF_VERBOSE"


def verbose_requested(argv=None):
  """True when the user asked for TensorFlow's logs (env var or absl's --verbosity / -v)."""
  if os.environ.get(VERBOSE_ENV, "").strip() not in ("", "0"):
    return True
  for arg in (sys.argv if argv is None else argv)[1:]:
    if arg.startswith(("--verbosity", "-v")) and not arg.startswith("--verbosity=0"):
      return True
  return False


def quiet_startup(argv=None):
  """Before TensorFlow is imported: silence its C++ logs and Python warnings (unless verbose)."""
  if verbose_requested(argv):
    return
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  warnings.filterwarnings("ignore")
  logging.getLogger("matplotlib").setLevel(logging.ERROR)


class _PlainFormatter(logging.Formatter):
  """`message` for info lines, `warning: message` / `error: message` above."""

  def format(self, record):
    message = record.getMessage()
    if record.levelno >= logging.WARNING:
      return f"{record.levelname.lower()}: {message}"
    return message


# Log records from files under this directory (the package and the scripts beside it) are ours.
_OUR_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class _OursOnly(logging.Filter):
  """Lets through our own records, and errors from anywhere (TensorFlow also logs via absl)."""

  def filter(self, record):
    return record.levelno >= logging.ERROR or os.path.abspath(
        record.pathname).startswith(_OUR_ROOT) and "site-packages" not in record.pathname


def quiet_after_flags():
  """After flag parsing: TensorFlow's Python logger to errors only; our lines printed plainly."""
  if verbose_requested():
    return
  logging.getLogger("tensorflow").setLevel(logging.ERROR)
  try:
    from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
    handler = absl_logging.get_absl_handler()
    handler.setFormatter(_PlainFormatter())
    handler.addFilter(_OursOnly())
  except ImportError:
    pass
  if "tensorflow" in sys.modules:
    sys.modules["tensorflow"].autograph.set_verbosity(0)
