"""Builds a sentence-pair task ("does B follow A?") from a corpus, in GLUE MRPC format.

  python -m albert_tf.cli.make_pair_task --input_file=corpus.txt --output_dir=glue/MRPC
  python run_classifier.py --task_name=MRPC --data_dir=glue ...

The quickstart fine-tunes on it, so the whole pipeline runs with no download. Two kinds
(`PAIR_KINDS`): "next" (label 1 when the second sentence is the one that follows the first in its
document, 0 when it comes from another document) and "order" (1 for two consecutive sentences in
their order, 0 for the same two swapped). The files are exactly MRPC's (train.tsv / dev.tsv with a "Quality" header, test.tsv with
an "index" header), so `run_classifier.py --task_name=MRPC` reads them unchanged.
"""

import os
import random

from albert_tf.common import fileio
from albert_tf.common import utf8
from albert_tf.errors import AlbertError

MRPC_TRAIN_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
MRPC_TEST_HEADER = "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n"


def read_documents(corpus_path):
  """Reads a corpus (one sentence per line, blank line between documents) into lists of lines."""
  if not fileio.isfile(corpus_path):
    raise AlbertError(f"{corpus_path}: corpus file does not exist")
  documents, current = [], []
  for line in utf8.read_file(corpus_path, "a corpus").split("\n"):
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


# The tasks `make_sentence_pairs` builds: what label 1 and label 0 mean.
PAIR_KINDS = {
    "next": "1: B is the sentence that follows A in its document; 0: B comes from another "
            "document",
    "order": "1: A and B are two consecutive sentences in their order; 0: the same two, "
             "swapped",
}


def make_sentence_pairs(documents, num_pairs, seed=12345, kind="next", span=1):
  """Returns `num_pairs` (label, text_a, text_b), half label 1, half label 0.

  kind: one of PAIR_KINDS. "next" needs the topic and flow of a document (is B A's
    continuation or text from elsewhere?), "order" the direction of its flow.
  span: sentences on each side: A is `span` consecutive sentences of a document, B the `span`
    that follow them (or, for a "next" negative, `span` consecutive sentences of another
    document), each side joined by a space.

  Raises:
    AlbertError: an unknown kind, a span below 1, or too few documents of 2 * span sentences.
  """
  if kind not in PAIR_KINDS:
    raise AlbertError(f"unknown pair task kind {kind!r}: expected one of "
                      f"{', '.join(sorted(PAIR_KINDS))}")
  if span < 1:
    raise AlbertError(f"span={span} is invalid: expected >= 1 sentences a side")
  usable = [d for d in documents if len(d) >= 2 * span]
  if len(usable) < 2:
    raise AlbertError(f"corpus has fewer than two documents with {2 * span} or more sentences: "
                      "cannot build sentence pairs")
  # Every pair starts from its own (document, sentence) position, so that no pair is drawn twice
  # (a dev pair that is also a train pair would measure memory, not the task).
  positions = [(d, j) for d, doc in enumerate(usable) for j in range(len(doc) - 2 * span + 1)]
  if num_pairs > len(positions):
    raise AlbertError(f"corpus has {len(positions)} consecutive sentence pairs: cannot build "
                      f"{num_pairs} distinct pairs (use a larger corpus or fewer pairs)")
  rng = random.Random(seed)
  join = " ".join
  pairs = []
  for i, (doc_index, j) in enumerate(rng.sample(positions, num_pairs)):
    doc = usable[doc_index]
    first, second = join(doc[j:j + span]), join(doc[j + span:j + 2 * span])
    if i % 2 == 0:
      pairs.append((1, first, second))
    elif kind == "order":
      pairs.append((0, second, first))
    else:
      other = rng.randrange(len(usable) - 1)
      other += other >= doc_index  # any document but this one
      other_doc = usable[other]
      k = rng.randrange(len(other_doc) - span + 1)
      pairs.append((0, first, join(other_doc[k:k + span])))
  rng.shuffle(pairs)
  return pairs


def _rows(split, rows):
  """The lines of one MRPC-format file: test.tsv unlabelled (an index), the others labelled."""
  lines = [MRPC_TEST_HEADER if split == "test" else MRPC_TRAIN_HEADER]
  for n, (label, a, b) in enumerate(rows):
    first = str(n) if split == "test" else str(label)
    lines.append(f"{first}\t{2 * n}\t{2 * n + 1}\t{a}\t{b}\n")
  return "".join(lines)


def write_mrpc_task(corpus_path, output_dir, num_train=2000, num_dev=400, num_test=100,
                    seed=12345, kind="next", num_heldout=0, span=1):
  """Writes train.tsv, dev.tsv and test.tsv in MRPC format. Returns {split: rows written}.

  kind, span: as make_sentence_pairs. num_heldout > 0 also writes heldout.tsv: labelled pairs (train.tsv's
  format) that neither training nor the dev evaluation sees (run_classifier.py reads only
  train/dev/test.tsv), for querying the exported model as a client would.
  """
  splits = {"train": num_train, "dev": num_dev, "test": num_test}
  if num_heldout > 0:
    splits["heldout"] = num_heldout
  for split, count in splits.items():
    if count < 0:
      raise AlbertError(f"--num_{split}={count} is invalid: expected >= 0")
  pairs = make_sentence_pairs(read_documents(corpus_path), sum(splits.values()), seed, kind,
                              span)
  written, start = {}, 0
  for split, count in splits.items():
    rows = pairs[start:start + count]
    start += count
    fileio.write_text(os.path.join(output_dir, f"{split}.tsv"), _rows(split, rows))
    written[split] = len(rows)
  return written
