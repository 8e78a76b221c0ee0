"""Token-tagging files (NER): CoNLL columns or JSON Lines -> sentences of words and tags.

The formats, chosen by the file name (`.jsonl`/`.json`: JSON Lines, anything else: CoNLL):
  * CoNLL: one word per line, whitespace-separated columns, the word in the first column and
    the tag in the last (CoNLL-2003's `EU NNP B-NP B-ORG`, or just `EU B-ORG`); blank lines
    between sentences; `-DOCSTART-` lines (and the blank line after them) skipped. Every word
    line of a file has the same number of columns. A file whose lines have one column holds
    words only (input to prediction).
  * JSON Lines: one sentence per line, `{"tokens": [...], "tags": [...]}` (`tags` may be left
    out for prediction input).

Tag schemes (`--tag_scheme`), the tags written as PREFIX-TYPE (`B-PER`) or `O`:
  BIO    B- begins an entity, I- continues it. An `I-X` after `O` or after a tag of another type
         (IOB1, as the original CoNLL-2003 files write it) is REPAIRED to `B-X`: both mean "an
         entity starts here", so nothing is lost, and seqeval would read it so anyway.
  BIOES  B-/I-/E- for entities of two or more words, S- for one word. Broken BIOES (an `I-X` or
         `E-X` that does not continue a `B-X`/`I-X`, a `B-X` not followed by `I-X`/`E-X`) is
         REFUSED with file:line: no common writer produces it, so it is a mistake in the file.
  IO     I- for every word of an entity (adjacent entities of one type merge, as in IO itself).

Every problem is one AlbertError naming the file and line: a line with another number of
columns than the file's first word line, a tag outside the scheme, an empty file.
"""

import dataclasses
import json
from typing import List, Optional

from albert_tf.common import fileio, utf8
from albert_tf.errors import AlbertError

SCHEMES = ("BIO", "BIOES", "IO")
# The prefixes each scheme allows before -TYPE (every scheme has "O" too).
SCHEME_PREFIXES = {"BIO": ("B", "I"), "BIOES": ("B", "I", "E", "S"), "IO": ("I",)}
OUTSIDE = "O"
DOCSTART = "-DOCSTART-"
JSONL_SUFFIXES = (".jsonl", ".json")


@dataclasses.dataclass
class TaggedSentence:
  """One sentence of a tagging file.

  words: the words, in order.
  tags: one tag per word (after the BIO repair), or None (a words-only file).
  path: the file it came from; lines: each word's 1-based line in the file (JSON Lines: the
    sentence's line, for every word).
  raw_lines: CoNLL only: each word line as the file has it (trailing whitespace dropped), kept
    so that predictions are written back in the input's own layout ([] for JSON Lines).
  """
  words: List[str]
  tags: Optional[List[str]]
  path: str
  lines: List[int]
  raw_lines: List[str] = dataclasses.field(default_factory=list)


def is_jsonl(path):
  return path.lower().endswith(JSONL_SUFFIXES)


def check_scheme(scheme, name="--tag_scheme"):
  """Returns scheme upper-cased; AlbertError naming `name` unless it is one of SCHEMES."""
  if str(scheme).upper() not in SCHEMES:
    raise AlbertError(f"{name}={scheme!r} is invalid: expected one of {', '.join(SCHEMES)}")
  return str(scheme).upper()


def _split_tag(tag):
  """'B-PER' -> ('B', 'PER'); 'O' -> ('O', ''); anything else -> (None, None)."""
  if tag == OUTSIDE:
    return OUTSIDE, ""
  prefix, dash, entity_type = tag.partition("-")
  if not dash or not entity_type:
    return None, None
  return prefix, entity_type


def _scheme_error(path, line, tag, scheme, why):
  return AlbertError(f"{path}: line {line}: tag {tag!r} {why} (--tag_scheme={scheme}: tags are "
                     f"O or {'/'.join(p + '-TYPE' for p in SCHEME_PREFIXES[scheme])})")


def check_tags(tags, scheme, path, lines):
  """The tags of one sentence checked against `scheme`; returns them with BIO's I-after-O
  repair applied (see the module docstring).

  Args:
    tags: one tag per word.
    scheme: one of SCHEMES.
    path, lines: the file and each tag's line, for the error.
  Raises:
    AlbertError: a tag outside the scheme, or broken BIOES, naming file and line.
  """
  split = []
  for tag, line in zip(tags, lines):
    prefix, entity_type = _split_tag(tag)
    if prefix != OUTSIDE and prefix not in SCHEME_PREFIXES[scheme]:
      raise _scheme_error(path, line, tag, scheme, "is outside the scheme")
    split.append((prefix, entity_type))
  if scheme == "BIO":
    repaired = list(tags)
    for i, (prefix, entity_type) in enumerate(split):
      if prefix == "I" and (i == 0 or split[i - 1][1] != entity_type):
        repaired[i] = "B-" + entity_type
    return repaired
  if scheme == "BIOES":
    for i, (prefix, entity_type) in enumerate(split):
      before = split[i - 1] if i > 0 else (OUTSIDE, "")
      after = split[i + 1] if i + 1 < len(split) else (OUTSIDE, "")
      if prefix in ("I", "E") and (before[0] not in ("B", "I") or before[1] != entity_type):
        raise _scheme_error(path, lines[i], tags[i], scheme,
                            f"does not continue a B-{entity_type} or I-{entity_type}")
      if prefix in ("B", "I") and (after[0] not in ("I", "E") or after[1] != entity_type):
        raise _scheme_error(path, lines[i], tags[i], scheme,
                            f"is not followed by I-{entity_type} or E-{entity_type}")
  return list(tags)


def _conll_sentences(path, text):
  """[(words, tags or None, lines, raw lines)] of a CoNLL text; checks the column count."""
  sentences, current = [], []
  width, width_line = None, None
  for number, raw in enumerate(text.split("\n"), start=1):
    columns = raw.split()
    if not columns:
      if current:
        sentences.append(current)
      current = []
      continue
    if columns[0] == DOCSTART:
      continue
    if width is None:
      width, width_line = len(columns), number
    elif len(columns) != width:
      raise AlbertError(f"{path}: line {number}: {len(columns)} columns, expected {width} as on "
                        f"line {width_line} (CoNLL: the word first, the tag last, "
                        "whitespace-separated)")
    current.append((number, columns, raw.rstrip()))
  if current:
    sentences.append(current)
  result = []
  for sentence in sentences:
    lines = [number for number, _, _ in sentence]
    words = [columns[0] for _, columns, _ in sentence]
    tags = [columns[-1] for _, columns, _ in sentence] if width > 1 else None
    result.append((words, tags, lines, [raw for _, _, raw in sentence]))
  return result


def _jsonl_sentences(path, text):
  result = []
  for number, raw in enumerate(text.split("\n"), start=1):
    if not raw.strip():
      continue
    try:
      record = json.loads(raw)
    except json.JSONDecodeError as e:
      raise AlbertError(f"{path}: line {number}: not JSON ({e.msg})") from None
    words = record.get("tokens") if isinstance(record, dict) else None
    if not isinstance(words, list) or not words or not all(
        isinstance(w, str) and w.strip() for w in words):
      raise AlbertError(f'{path}: line {number}: expected {{"tokens": [non-empty strings], '
                        '"tags": [strings]}')
    tags = record.get("tags")
    if tags is not None and (not isinstance(tags, list) or len(tags) != len(words)
                             or not all(isinstance(t, str) for t in tags)):
      raise AlbertError(f'{path}: line {number}: "tags" must be a list of {len(words)} strings, '
                        'one per token')
    result.append((words, tags, [number] * len(words), []))
  return result


def read_tagged_file(path, scheme, needs_tags=True):
  """The sentences of a CoNLL or JSON Lines file (see the module docstring).

  Args:
    path: the file (local or gs://), UTF-8.
    scheme: one of SCHEMES; the tags are checked (and BIO repaired) against it.
    needs_tags: refuse a file without tags (training and evaluation need them).
  Returns:
    A list of TaggedSentence.
  Raises:
    AlbertError: unreadable or not UTF-8, empty, a wrong column count, a tag outside the scheme,
      a missing tag column; each naming the file (and line).
  """
  text = utf8.read_file(path, "a CoNLL or JSON Lines tagging file")
  parse = _jsonl_sentences if is_jsonl(path) else _conll_sentences
  parsed = parse(path, text)
  if not parsed:
    raise AlbertError(f"{path}: no sentences (an empty file? expected "
                      f"{'JSON Lines' if is_jsonl(path) else 'CoNLL: one word per line'})")
  sentences = []
  for words, tags, lines, raw_lines in parsed:
    if tags is None and needs_tags:
      raise AlbertError(f"{path}: line {lines[0]}: no tag (expected the tag in the last column, "
                        'or "tags" in JSON Lines)')
    if tags is not None:
      tags = check_tags(tags, scheme, path, lines)
    sentences.append(TaggedSentence(words, tags, path, lines, raw_lines))
  return sentences


def label_list_of(sentences):
  """The labels the sentences use: "O" first, then the others sorted (a fixed order, so a label
  list made from the same training file is the same on every run)."""
  labels = {tag for sentence in sentences for tag in (sentence.tags or [])}
  return [OUTSIDE] + sorted(labels - {OUTSIDE})


def parse_labels(value, scheme, name="--labels"):
  """--labels: comma-separated tags, or a file with one tag per line; checked against scheme."""
  if fileio.exists(value) and not fileio.isdir(value):
    labels = [line.strip() for line in utf8.read_file(value, "a label file").splitlines()
              if line.strip()]
  else:
    labels = [label.strip() for label in value.split(",") if label.strip()]
  for label in labels:
    prefix, _ = _split_tag(label)
    if prefix != OUTSIDE and prefix not in SCHEME_PREFIXES[scheme]:
      raise AlbertError(f"{name}: label {label!r} is outside --tag_scheme={scheme}")
  if OUTSIDE not in labels:
    raise AlbertError(f"{name}: the labels must include {OUTSIDE!r} (got {', '.join(labels)})")
  if len(set(labels)) != len(labels):
    raise AlbertError(f"{name}: a label is listed twice ({', '.join(labels)})")
  return labels


def check_known_labels(sentences, label_list):
  """AlbertError naming file and line of the first tag outside label_list."""
  known = set(label_list)
  for sentence in sentences:
    for tag, line in zip(sentence.tags or [], sentence.lines):
      if tag not in known:
        raise AlbertError(f"{sentence.path}: line {line}: tag {tag!r} is not one of the labels "
                          f"({', '.join(label_list)}; give --labels to name them all)")


def format_predictions(sentences, predicted_tags, path):
  """The input's own format with a predicted tag per word.

  CoNLL: each word line as it was plus the predicted tag as a last column (after a tab when the
  line separates its columns by tabs, else a space), sentences separated by blank lines.
  JSON Lines: each sentence's object with "predicted_tags" added.
  """
  if is_jsonl(path):
    rows = []
    for sentence, tags in zip(sentences, predicted_tags):
      record = {"tokens": sentence.words}
      if sentence.tags is not None:
        record["tags"] = sentence.tags
      record["predicted_tags"] = list(tags)
      rows.append(json.dumps(record, ensure_ascii=False))
    return "\n".join(rows) + "\n"
  blocks = []
  for sentence, tags in zip(sentences, predicted_tags):
    blocks.append("\n".join(raw + ("\t" if "\t" in raw else " ") + tag
                            for raw, tag in zip(sentence.raw_lines, tags)))
  return "\n\n".join(blocks) + "\n"
