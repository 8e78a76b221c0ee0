"""How results are written: the official `key = value` lines of eval_results.txt.

The official scripts write every result as `key = str(value)`, sorted by key; floats here are
written by repr, so a value reads back exactly. (The console's shorter formatting of the same
values is `progress.format_value`.)
"""

import numpy as np

from albert_tf.common import fileio


def format_result(value):
  """A result value as eval_results.txt shows it: floats by repr, the rest as str."""
  if isinstance(value, (float, np.floating)):
    return repr(float(value))
  return str(value)


def result_lines(results):
  """`key = value` lines of a results dict, sorted by key."""
  return [f"{key} = {format_result(results[key])}" for key in sorted(results)]


def write_results_file(path, results):
  """eval_results.txt of one evaluation (`key = value` lines), written atomically."""
  fileio.write_text(path, "".join(line + "\n" for line in result_lines(results)))
