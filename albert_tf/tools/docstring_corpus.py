"""Builds an English corpus from the docstrings of the installed Python packages (no download).

  python -m albert_tf.cli.build_corpus --output_file=corpus.txt --max_mb=8

The quickstart's corpus. Output format is the one `create_pretraining_data.py` and
`train_sentencepiece` read: one sentence per line, a blank line between documents. Each module,
class or function docstring is one document. Sources are read in a fixed order (the standard
library first, then site-packages, files sorted by path) and parsed with `ast` (nothing is
imported or executed), so the same Python installation always gives the same corpus.
"""

import ast
import os
import re
import sysconfig
import warnings

from albert_tf.common import fileio
from albert_tf.errors import AlbertError

# Sentence ends: ., ! or ? followed by whitespace and an upper-case letter, digit or quote.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
# Lines that are not prose: doctest prompts, reST directives/fields, section underlines, tables.
_NON_PROSE_LINE = re.compile(r"^\s*(>>>|\.\.\.|\.\. |:[\w ]+:|[-=~^*+#]{3,}|\+[-=+]+\+|\|)")
_MIN_SENTENCE_CHARS = 20
_MAX_SENTENCE_CHARS = 1000
_SKIP_DIRS = frozenset({"test", "tests", "__pycache__", "idle_test", "site-packages",
                        "dist-packages", "lib2to3", "ensurepip", "venv"})


def default_source_dirs():
  """The standard library directory, then the purelib/platlib site-packages directories."""
  paths = sysconfig.get_paths()
  dirs = []
  for key in ("stdlib", "purelib", "platlib"):
    path = paths.get(key)
    if path and fileio.isdir(path) and path not in dirs:
      dirs.append(path)
  return dirs


def _iter_python_files(root):
  """All .py files under root in sorted order, skipping test folders."""
  for dirpath, dirnames, filenames in os.walk(root):
    dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
    for name in sorted(filenames):
      if name.endswith(".py") and not name.startswith("test_"):
        yield os.path.join(dirpath, name)


def _iter_docstrings(source):
  """Docstrings of the module, classes and functions of one source file, in source order."""
  try:
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      tree = ast.parse(source)
  except (SyntaxError, ValueError, RecursionError):
    return
  nodes = [tree]
  while nodes:
    node = nodes.pop(0)
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
      doc = ast.get_docstring(node, clean=True)
      if doc:
        yield doc
      nodes.extend(n for n in node.body
                   if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)))


def docstring_to_sentences(doc):
  """Splits one docstring into prose sentences (code, tables and field lists are dropped)."""
  sentences = []
  for paragraph in re.split(r"\n\s*\n", doc):
    lines = paragraph.splitlines()
    # Indented blocks and non-prose lines are code or markup, not English sentences.
    if not lines or any(_NON_PROSE_LINE.match(line) for line in lines):
      continue
    if lines[0].startswith((" ", "\t")):
      continue
    text = " ".join(line.strip() for line in lines)
    if text.endswith(":") or "::" in text:
      continue
    for sentence in _SENTENCE_END.split(text):
      sentence = sentence.strip()
      letters = sum(c.isalpha() for c in sentence)
      if (_MIN_SENTENCE_CHARS <= len(sentence) <= _MAX_SENTENCE_CHARS and
          letters >= 0.6 * len(sentence) and " " in sentence):
        sentences.append(sentence)
  return sentences


def iter_docstring_documents(source_dirs=None, min_sentences=2):
  """Yields documents (lists of sentences) from the docstrings under source_dirs, in order."""
  seen = set()
  for root in source_dirs or default_source_dirs():
    for path in _iter_python_files(root):
      try:
        source = fileio.read_bytes(path)
      except OSError:
        continue
      for doc in _iter_docstrings(source):
        sentences = docstring_to_sentences(doc)
        if len(sentences) < min_sentences:
          continue
        key = hash(tuple(sentences))  # the same docstring often appears in several packages
        if key in seen:
          continue
        seen.add(key)
        yield sentences


def build_docstring_corpus(output_path, max_bytes=20_000_000, source_dirs=None, min_sentences=2):
  """Writes an English corpus from docstrings of installed packages; returns bytes written.

  Args:
    output_path: the text file to write (one sentence per line, blank line between documents).
      Written to a temporary name first and renamed, so a failure leaves no partial file.
    max_bytes: stop before the file grows past this many bytes (UTF-8).
    source_dirs: folders to read .py files from; default: the standard library, then
      site-packages (see `default_source_dirs`).
    min_sentences: documents with fewer sentences are left out (a pair needs two).

  Returns:
    The number of bytes written.

  Raises:
    AlbertError: nothing usable was found, or the output cannot be written.
  """
  output_path = os.fspath(output_path)
  written = 0
  num_docs = 0
  try:
    with fileio.atomic_path(output_path) as temp:
      with fileio.open_file(temp, "w") as f:
        for sentences in iter_docstring_documents(source_dirs, min_sentences):
          block = "\n".join(sentences) + "\n\n"
          size = len(block.encode("utf-8"))
          if written + size > max_bytes:
            break
          f.write(block)
          written += size
          num_docs += 1
      if num_docs == 0:  # raised inside the block, so that no empty file replaces the target
        raise AlbertError(f"build_docstring_corpus: no docstring documents found "
                          f"(max_bytes={max_bytes}, "
                          f"sources={source_dirs or default_source_dirs()})")
  except OSError as e:
    raise AlbertError(f"build_docstring_corpus: cannot write {output_path}: {e.strerror}")
  return written

