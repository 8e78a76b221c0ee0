"""Builds a sentence-pair task ("does B follow A?") from a corpus, in GLUE MRPC format.

  python -m albert_tf.tools.make_pair_task --input_file=corpus.txt --output_dir=glue/MRPC
  python run_classifier.py --task_name=MRPC --data_dir=glue ...
  (the command's flags: albert_tf/cli/make_pair_task.py)

The quickstart fine-tunes on it, so the whole pipeline runs with no download: label 1 when the
second sentence is the one that follows the first in its document, 0 when it comes from another
document. The files are exactly MRPC's (train.tsv / dev.tsv with a "Quality" header, test.tsv with
an "index" header), so `run_classifier.py --task_name=MRPC` reads them unchanged.
"""

import os
import random

from albert_tf import fileio
from albert_tf.errors import AlbertError

_TRAIN_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
_TEST_HEADER = "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n"


def read_documents(corpus_path):
  """Reads a corpus (one sentence per line, blank line between documents) into lists of lines."""
  if not os.path.isfile(corpus_path):
    raise AlbertError(f"{corpus_path}: corpus file does not exist")
  documents, current = [], []
  with open(corpus_path, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if line:
        # The TSV format has no quoting: a tab inside a sentence would shift the columns.
        current.append(line.replace("\t", " "))
      elif current:
        documents.append(current)
        current = []
  if current:
    documents.append(current)
  return documents


def make_sentence_pairs(documents, num_pairs, seed=12345):
  """Returns `num_pairs` (label, sentence_a, sentence_b), half consecutive (1), half not (0).

  Raises:
    AlbertError: fewer than two documents with at least two sentences.
  """
  usable = [d for d in documents if len(d) >= 2]
  if len(usable) < 2:
    raise AlbertError("corpus has fewer than two documents with two or more sentences: "
                      "cannot build sentence pairs")
  rng = random.Random(seed)
  pairs = []
  for i in range(num_pairs):
    doc_index = rng.randrange(len(usable))
    doc = usable[doc_index]
    j = rng.randrange(len(doc) - 1)
    if i % 2 == 0:
      pairs.append((1, doc[j], doc[j + 1]))
    else:
      other = rng.randrange(len(usable) - 1)
      other += other >= doc_index  # any document but this one
      pairs.append((0, doc[j], rng.choice(usable[other])))
  rng.shuffle(pairs)
  return pairs


def write_mrpc_task(corpus_path, output_dir, num_train=2000, num_dev=400, num_test=100,
                    seed=12345):
  """Writes train.tsv, dev.tsv and test.tsv in MRPC format. Returns {split: rows written}."""
  pairs = make_sentence_pairs(read_documents(corpus_path), num_train + num_dev + num_test, seed)
  splits = {"train": pairs[:num_train], "dev": pairs[num_train:num_train + num_dev],
            "test": pairs[num_train + num_dev:]}
  for split, rows in splits.items():
    lines = [_TEST_HEADER if split == "test" else _TRAIN_HEADER]
    for n, (label, a, b) in enumerate(rows):
      first = str(n) if split == "test" else str(label)
      lines.append(f"{first}\t{2 * n}\t{2 * n + 1}\t{a}\t{b}\n")
    fileio.write_text(os.path.join(output_dir, f"{split}.tsv"), "".join(lines))
  return {split: len(rows) for split, rows in splits.items()}

