"""Every document of the whole input, found by number: where NSP negatives take their B from.

The official create_pretraining_data held all documents in memory and drew the random B of a
next-sentence negative (`--random_next_sentence`) from any of them. The pipeline here streams the
input in ~1 MB chunks, so it keeps only an index: for document g of the input (numbered in input
order, as `creation.iter_chunks` cuts them), the file, the byte offset of its first line and its
number of lines, 12 bytes per document (about 1 % of the text). A worker that needs document g
seeks there and tokenizes only the lines B takes, so memory stays flat and the draw covers the
whole input, as in the official tool.
"""

import array
import bisect


class DocumentIndex:
  """Document number -> (file, byte offset, number of lines). Built once, before the workers
  start (forked workers share its arrays, which nobody writes after that)."""

  def __init__(self, files):
    self.files = list(files)
    self.file_starts = []  # number of the first document of each file (non-decreasing)
    self.offsets = array.array("q")  # byte offset of each document's first line in its file
    self.line_counts = array.array("I")  # lines of each document (blank lines excluded)
    self.total_bytes = 0

  def add_chunk(self, chunk):
    """Adds the documents of `chunk` (a creation.Chunk, taken in input order)."""
    while len(self.file_starts) <= chunk.file_number:
      self.file_starts.append(len(self.offsets))
    if len(self.offsets) != chunk.first_document:
      raise ValueError(f"chunk {chunk.index} starts at document {chunk.first_document}, the "
                       f"index holds {len(self.offsets)}")
    starts = list(chunk.doc_starts) + [len(chunk.lines)]
    for k, offset in enumerate(chunk.doc_offsets):
      self.offsets.append(offset)
      self.line_counts.append(starts[k + 1] - starts[k])
    self.total_bytes += chunk.num_bytes

  def __len__(self):
    return len(self.offsets)

  def locate(self, number):
    """(path, byte offset, number of lines) of document `number`."""
    file_number = bisect.bisect_right(self.file_starts, number) - 1
    return self.files[file_number], self.offsets[number], self.line_counts[number]


class IndexedDocuments:
  """The documents of a DocumentIndex as a random-document source for
  `instances.fetch_random_b` (len, sentence_count, sentences), read from the files.

  Each sentence is one input line, tokenized as the chunk pipeline does (`encoder`: a
  creation.DocumentEncoder). A line that is not UTF-8 or empty after preprocessing gives no
  tokens here (its own chunk stops on it or counts it). One per process: it keeps its files open.
  """

  def __init__(self, index, encoder, open_binary):
    self.index = index
    self.encoder = encoder
    self._open_binary = open_binary  # path -> binary file object (local or tf.io.gfile)
    self._files = {}

  def __len__(self):
    return len(self.index)

  def sentence_count(self, number):
    return self.index.line_counts[number]

  def sentences(self, number, start):
    """Yields the token ids of document `number`'s lines from line `start` on."""
    path, offset, count = self.index.locate(number)
    f = self._files.get(path)
    if f is None:
      f = self._files[path] = self._open_binary(path)
    f.seek(offset)
    for k in range(count):
      raw = f.readline()
      if not raw:
        return
      if k < start:
        continue
      try:
        text = raw.rstrip(b"\r\n").decode("utf-8")
      except UnicodeDecodeError:
        yield []
        continue
      text = self.encoder.preprocess(text)
      yield self.encoder.encode_preprocessed([text])[0] if text else []

  def close(self):
    for f in self._files.values():
      f.close()
    self._files = {}
