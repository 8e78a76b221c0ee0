"""A flag's comma-separated file patterns (--input_file) -> the files, by one rule for every
command: create_pretraining_data.py reads them as text, run_pretraining.py as TFRecords.

The rule is the official scripts' (tf.io.gfile.glob on each comma-separated pattern), with
its failures named before any work:
  - the value splits at commas; blanks around a pattern and empty patterns are dropped;
  - each pattern is a glob (a plain path matches itself): local ones by Python's glob, `~`
    expanded and, as in a shell, no `*` or `?` matching a name's leading dot (so a hidden
    temporary or .DS_Store is never read as data); gs:// and other scheme:// ones by
    tf.io.gfile.glob (`fileio.glob_paths`);
  - a glob never matches a vocabulary record (`*.vocab.json`, which create_pretraining_data.py
    writes beside its records), so `out/*` reads the records alone;
  - each pattern matches at least one file (a local directory is not one);
  - a pattern's matches are sorted, the patterns keep their order, and a file that several
    patterns match is read once, at its first place;
  - every local file is readable.
A broken rule is one line (AlbertError) naming the flag and the pattern or file.
"""

import os

from albert_tf.common import fileio
from albert_tf.errors import AlbertError

# The vocabulary record beside pretraining records (albert_tf/data/pretraining/vocab_record.py).
VOCAB_RECORD_SUFFIX = ".vocab.json"


def expand(value, flag="--input_file"):
  """The files the comma-separated patterns `value` of `flag` name (see the module's rule)."""
  patterns = [p.strip() for p in str(value or "").split(",") if p.strip()]
  if not patterns:
    raise AlbertError(f"{flag} is empty: expected one or more comma-separated files or globs")
  files = {}  # (insertion-ordered: a file matched again keeps its first place)
  for pattern in patterns:
    matches = [path for path in fileio.glob_paths(pattern) if fileio.isfile(path)
               and (path == pattern or not path.endswith(VOCAB_RECORD_SUFFIX))]
    if not matches:
      raise AlbertError(f"{flag}: no file matches {pattern!r}")
    files.update(dict.fromkeys(matches))
  for path in files:
    if fileio.is_local(path) and not os.access(path, os.R_OK):
      raise AlbertError(f"{flag}: {path} is not readable (permission denied)")
  return list(files)
