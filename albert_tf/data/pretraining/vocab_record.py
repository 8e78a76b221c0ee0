"""Which vocabulary made a set of pretraining records: a small JSON file beside them.

create_pretraining_data.py writes `<output_file>.vocab.json` beside each output file (one
`<prefix>.vocab.json` for `--output_shards`' `<prefix>-0000k-of-0000n`), so the records carry
their vocabulary wherever they are copied. run_pretraining.py reads it: the records' SentencePiece
model becomes the run's when --spm_model_file is not given (checked against --init_checkpoint
and copied into --output_dir), and a --spm_model_file or --init_checkpoint of other pieces stops
the run with one line.

The record (JSON object): kind ("sentencepiece" or "wordpiece"), path (the model or vocab file
as given, absolute when local), sha1 (of its bytes), pieces (how many), pieces_sha1 (SHA-1 of
the pieces in id order, one per line: equal for two files with the same pieces in the same
order, whatever else differs), do_lower_case.
"""

import hashlib
import re

from albert_tf.common import file_patterns
from albert_tf.common import fileio
from albert_tf.errors import AlbertError
from albert_tf.text import tokenization

_SHARD = re.compile(r"-\d{5}-of-\d{5}$")


def record_path(records_file):
  """The vocabulary record of one records file (a shard's is its prefix's)."""
  return _SHARD.sub("", records_file) + file_patterns.VOCAB_RECORD_SUFFIX


def pieces_sha1(tokenizer):
  """SHA-1 of the tokenizer's pieces in id order, one per line."""
  text = "\n".join(tokenizer.inv_vocab[i] for i in range(len(tokenizer.inv_vocab)))
  return hashlib.sha1(text.encode("utf-8")).hexdigest()


def describe(tokenizer):
  """The record of a tokenization.FullTokenizer's vocabulary (see the module docstring)."""
  source = tokenizer.spm_model_file or tokenizer.vocab_file
  return {"kind": "sentencepiece" if tokenizer.spm_model_file else "wordpiece",
          "path": fileio.abspath(source), "sha1": fileio.file_sha1(source),
          "pieces": len(tokenizer.vocab), "pieces_sha1": pieces_sha1(tokenizer),
          "do_lower_case": bool(tokenizer.do_lower_case)}


def write(output_files, spm_model_file=None, vocab_file=None, do_lower_case=True):
  """Writes the vocabulary record beside each output file (atomically); returns their paths."""
  tokenizer = tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case,
                                         spm_model_file=spm_model_file)
  record = describe(tokenizer)
  paths = list(dict.fromkeys(record_path(f) for f in output_files))
  for path in paths:
    fileio.write_json(path, record, indent=1, sort_keys=True)
  return paths


def read(records_files):
  """(record path, record) of the vocabulary that made `records_files`, or None when none of
  them has a record (records of the official tool, or of an older version).

  Raises:
    AlbertError: a record is not valid JSON, or two records name different vocabularies.
  """
  found = {}
  for path in dict.fromkeys(record_path(f) for f in records_files):
    if fileio.exists(path):
      try:
        record = fileio.read_json(path)
        found[path] = (record["pieces"], record["pieces_sha1"], record)
      except (ValueError, KeyError, TypeError) as e:
        raise AlbertError(f"{path}: not a vocabulary record of create_pretraining_data.py "
                          f"({type(e).__name__}: {e})") from None
  if not found:
    return None
  (first, (_, digest, record)), *others = found.items()
  for path, (_, other_digest, other) in others:
    if other_digest != digest:
      raise AlbertError(f"--input_file: the records mix vocabularies: {first} names "
                        f"{record['path']}, {path} names {other['path']} (other pieces): "
                        "train on records of one vocabulary")
  return first, record


def check_tokenizer(made_with, tokenizer, what):
  """Raises AlbertError when `tokenizer` (`what` names it, e.g. "--spm_model_file=x.model") has
  other pieces than the records' vocabulary `made_with` ((record path, record) as `read`
  returns)."""
  path, record = made_with
  if pieces_sha1(tokenizer) != record["pieces_sha1"]:
    raise AlbertError(f"{what}: not the vocabulary the records were made with ({path} names "
                      f"{record['path']}: {record['pieces']} pieces, here {len(tokenizer.vocab)}"
                      f" and other ones)")


def usable_model(made_with):
  """The records' SentencePiece model file when it is still where the record says, else None."""
  _, record = made_with
  if record.get("kind") == "sentencepiece" and fileio.exists(record["path"]):
    return record["path"]
  return None
