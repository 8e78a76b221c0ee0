"""Raw text -> pretraining TFRecords (the engine behind create_pretraining_data.py).

Pipeline, with memory bounded by the chunk size and not by the corpus size:
  reader (main process, a thread) -> chunks of whole documents (about `chunk_mb` of text)
  -> workers: tokenize, build SOP/NSP pairs and masked-LM predictions, serialize
  -> writer (main process): records in chunk order, round-robin over the output files.

The output is a function of the input, the flags and `random_seed` only: the pairs and masks of a
document derive from (seed, document, pass, instance) (instances.document_key), the order of
chunk k's pass d from "<seed>:<k>:<d>", and records are written in (chunk, pass) order, so any
`num_workers`, and the Beam pipeline (beam_pipeline.py), give byte-identical files. Instances
are shuffled within each (chunk, pass), not across the whole corpus as the official tool did (it
held everything in memory); readers shuffle records again anyway.

With --random_next_sentence the random B of an NSP negative comes from any document of the whole
input, as in the official tool: a first pass indexes where every document starts
(document_index.py) and workers read B's lines from the files.

Signals and crashes: a SIGTERM/SIGINT in the main process (the script's StopSignals raises
StopRequested) stops the workers and removes the temporary output files; workers ignore SIGINT,
die on SIGTERM and are killed by the kernel when the main process dies (PR_SET_PDEATHSIG); a
run removes the temporary outputs that dead runs left.

Input format: one sentence per line, a blank line between documents; a new file also starts a new
document. Output: the official feature format (albert_tf/data/pretraining/record_format.py).
"""

import ctypes
import dataclasses
import gc
import multiprocessing
import os
import queue
import random
import signal
import sys
import threading
import time

from albert_tf.common import file_patterns
from albert_tf.common import utf8
from albert_tf.common import fileio
from albert_tf.data.pretraining import document_index
from albert_tf.data.pretraining import instances as instances_lib
from albert_tf.errors import AlbertError, file_error_reason, file_errors
from albert_tf.text import tokenization

_PROGRESS_EVERY_SECONDS = 2.0
_QUEUE_DEPTH = 4  # results (one chunk pass each) buffered per worker


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
  """How workers build the tokenizer (a picklable description, not the tokenizer itself)."""
  spm_model_file: str = None
  vocab_file: str = None
  do_lower_case: bool = True


@dataclasses.dataclass
class Chunk:
  """Consecutive whole documents of one input file, as raw bytes lines."""
  index: int
  path: str
  lines: list  # bytes, without the newline; blank lines removed
  line_numbers: list  # 1-based line number of each entry of `lines`
  doc_starts: list  # doc i = lines[doc_starts[i]:doc_starts[i + 1]] (last runs to the end)
  num_bytes: int  # input bytes covered, for MB/s
  empty_documents: int = 0
  file_number: int = 0  # position of `path` in the input file list
  first_document: int = 0  # number of doc 0 among all documents of the input (in input order)
  doc_offsets: list = None  # byte offset in `path` of each document's first line


# ----------------------------------------------------------------------------- tokenizing


class DocumentEncoder:
  """Decodes, preprocesses and tokenizes lines to ids exactly as `FullTokenizer.tokenize`.

  SentencePiece mode batches the lines through the C++ encoder and applies the digit-comma
  re-split by id (falling back to the piece-level code when <unk> occurs), which gives the same ids
  as `FullTokenizer(spm_model_file=...).tokenize` followed by `convert_tokens_to_ids`.
  """

  def __init__(self, spec, invalid_utf8="stop", encode_threads=-1):
    self._tokenization = tokenization
    self.invalid_utf8 = invalid_utf8
    # SentencePiece threads for batched encoding: all cores in-process, 1 per worker process.
    self.encode_threads = encode_threads
    self.tokenizer = tokenization.make_tokenizer(spec.spm_model_file, spec.vocab_file,
                                                 spec.do_lower_case)
    self.tokenizer.check_special_tokens()
    tok = self.tokenizer
    if tok.sp_model is not None:
      sp = tok.sp_model
      pieces = [sp.IdToPiece(i) for i in range(sp.GetPieceSize())]
      self._unk_id = sp.unk_id()
      self._split_ids = {}
      for i, piece in enumerate(pieces):
        split = tokenization.split_digit_comma(sp, piece)
        if split is not None and not sp.IsControl(i) and not sp.IsUnknown(i):
          self._split_ids[i] = [sp.PieceToId(p) for p in split]
      special = [i for i in range(len(pieces)) if sp.IsControl(i) or sp.IsUnknown(i)]
      self.vocab_info = instances_lib.VocabInfo.from_pieces(
          pieces, tok.cls_id, tok.sep_id, tok.mask_id, special_ids=special)
    else:
      pieces = [tok.inv_vocab[i] for i in range(len(tok.inv_vocab))]
      special = [tok.vocab[t] for t in ("[PAD]", "[UNK]") if t in tok.vocab]
      self.vocab_info = instances_lib.VocabInfo.from_pieces(
          pieces, tok.cls_id, tok.sep_id, tok.mask_id, special_ids=special, wordpiece=True)

  def _decode(self, raw, path, line_number, counters):
    try:
      return raw.decode("utf-8")
    except UnicodeDecodeError as e:
      if self.invalid_utf8 == "skip":
        counters["invalid_utf8_lines"] += 1
        return None
      raise AlbertError(invalid_utf8_message(path, line_number, raw, e))

  def _preprocess(self, text):
    if text.isascii():  # NFKD and accent removal do nothing to ASCII: skip the slow path
      text = " ".join(text.split())
      return text.lower() if self.tokenizer.do_lower_case else text
    return self._tokenization.preprocess_text(text, lower=self.tokenizer.do_lower_case)

  def preprocess(self, text):
    """The per-line text normalisation (SentencePiece: preprocess_text; WordPiece: strip)."""
    if self.tokenizer.sp_model is None:
      return text.strip()
    return self._preprocess(text)

  def encode_texts(self, texts):
    """Lines (str) -> list of id lists (a line may give an empty list)."""
    return self.encode_preprocessed([self.preprocess(t) for t in texts])

  def encode_preprocessed(self, processed):
    """Preprocessed lines -> list of id lists."""
    tok = self.tokenizer
    if tok.sp_model is None:
      return [tok.convert_tokens_to_ids(tok.tokenize(t)) for t in processed]
    batch = tok.sp_model.encode(processed, num_threads=self.encode_threads)
    split_ids, unk = self._split_ids, self._unk_id
    for k, ids in enumerate(batch):
      if unk in ids:  # <unk> surfaces can end in digit+",": use the piece-level code
        batch[k] = tok.convert_tokens_to_ids(
            self._tokenization.encode_pieces(tok.sp_model, processed[k]))
      elif not split_ids.keys().isdisjoint(ids):
        fixed = []
        for i in ids:
          fixed.extend(split_ids.get(i, (i,)))
        batch[k] = fixed
    return batch

  def encode_lines(self, chunk, counters):
    """(ids, blank): ids[j] the token ids of chunk.lines[j] (None: not UTF-8 and skipped);
    blank the set of j whose line is empty after preprocessing (ids [])."""
    texts, where, blank = [], [], set()
    ids = [[] for _ in chunk.lines]
    for j, raw in enumerate(chunk.lines):
      text = self._decode(raw, chunk.path, chunk.line_numbers[j], counters)
      if text is None:
        ids[j] = None
        continue
      text = self.preprocess(text)
      if text:
        texts.append(text)
        where.append(j)
      else:
        blank.add(j)
    for j, encoded in zip(where, self.encode_preprocessed(texts)):
      ids[j] = encoded
    return ids, blank

  def encode_chunk(self, chunk, counters, encoded_lines=None):
    """Chunk -> (documents, numbers): documents is a list of documents, each a list of
    sentences (lists of ids); numbers[i] is the input-order number of the chunk document that
    documents[i] comes from (Chunk.first_document + its position in the chunk).

    As in the official tool, a line that is empty after preprocessing (e.g. only Unicode
    whitespace) also separates documents. encoded_lines: encode_lines' result, if already made.
    """
    ids, blank = encoded_lines or self.encode_lines(chunk, counters)
    numbers = []  # input-order number of the chunk document each owner (document) is part of
    documents = []
    starts = set(chunk.doc_starts)
    number = chunk.first_document - 1
    for j, line_ids in enumerate(ids):
      if j in starts:
        number += 1
        numbers.append(number)
        documents.append([])
      if line_ids is None:
        continue
      if j in blank:  # a blank line after preprocessing: a document boundary
        numbers.append(numbers[-1])
        documents.append([])
      elif line_ids:
        documents[-1].append(line_ids)
    kept = [k for k, d in enumerate(documents) if d]
    counters["empty_documents"] += len(documents) - len(kept)
    return [documents[k] for k in kept], [numbers[k] for k in kept]


def invalid_utf8_message(path, line_number, raw, error):
  """The one-line error for a line that is not UTF-8 (--invalid_utf8=stop): common/utf8's
  wording, with the flag that skips such lines (the Beam runner reports the same line)."""
  return str(utf8.error(path, raw, error, line=line_number,
                        advice="fix the file or pass --invalid_utf8=skip to skip such lines"))


def source_documents(chunk, encoded_lines):
  """[(number, sentences)] of every document of the chunk as a random B sees it (the view of
  document_index.IndexedDocuments): one entry per line, [] for a line that is not UTF-8 or
  empty after preprocessing. encoded_lines: DocumentEncoder.encode_lines' result."""
  ids, _ = encoded_lines
  bounds = list(chunk.doc_starts) + [len(chunk.lines)]
  return [(chunk.first_document + k, [line or [] for line in ids[bounds[k]:bounds[k + 1]]])
          for k in range(len(chunk.doc_starts))]


# ----------------------------------------------------------------------------- reading


def _open_binary(path):
  """A binary file object of a local path or URL (fileio loads TensorFlow for URLs only, so the
  workers of a local corpus stay TensorFlow-free)."""
  try:
    return fileio.open_file(path, "rb")
  except file_errors() as e:
    raise AlbertError(f"--input_file: cannot open {path}: {file_error_reason(e)}")


def iter_chunks(files, chunk_bytes, stop_event=None, open_binary=None):
  """Yields Chunks of whole documents (about chunk_bytes of text each), reading line by line.

  A document longer than chunk_bytes is cut at a line boundary (it would not fit in memory
  otherwise); every file starts a new document, and where a file's chunks end depends on that
  file only. Documents are numbered in input order (Chunk.first_document), the numbering of
  document_index.DocumentIndex. open_binary: path -> binary file (default: local or tf.io.gfile).
  """
  open_binary = open_binary or _open_binary
  index = 0
  first_document = 0
  for file_number, path in enumerate(files):
    lines, line_numbers, doc_starts, doc_offsets = [], [], [], []
    num_bytes = 0
    position = 0  # byte offset of the current line in the file
    empty = 0
    in_document = False

    def make_chunk():
      return Chunk(index, path, lines, line_numbers, doc_starts, num_bytes, empty, file_number,
                   first_document, doc_offsets)

    with open_binary(path) as f:
      for line_number, raw in enumerate(f, 1):
        if stop_event is not None and stop_event.is_set():
          return
        line_start = position
        position += len(raw)
        num_bytes += len(raw)
        text = raw.rstrip(b"\r\n")
        if not text.strip():
          if in_document:
            in_document = False
            if num_bytes >= chunk_bytes:
              yield make_chunk()
              index += 1
              first_document += len(doc_starts)
              lines, line_numbers, doc_starts, doc_offsets = [], [], [], []
              num_bytes, empty = 0, 0
          else:  # a blank line after a blank line (or at the start): an empty document
            empty += 1
          continue
        if not in_document or num_bytes >= 4 * chunk_bytes:
          if in_document:  # an oversized document: cut it here
            yield make_chunk()
            index += 1
            first_document += len(doc_starts)
            lines, line_numbers, doc_starts, doc_offsets = [], [], [], []
            num_bytes, empty = 0, 0
          doc_starts.append(len(lines))
          doc_offsets.append(line_start)
          in_document = True
        lines.append(text)
        line_numbers.append(line_number)
    if lines or num_bytes:
      yield make_chunk()
      index += 1
      first_document += len(doc_starts)


def index_documents(files, chunk_bytes, progress_stream=None):
  """The DocumentIndex of every document of `files`, as iter_chunks cuts them (one pass over
  the input, reading only)."""
  started = time.time()
  index = document_index.DocumentIndex(files)
  for chunk in iter_chunks(files, chunk_bytes):
    index.add_chunk(chunk)
  if progress_stream is not None:
    print(f"[create_pretraining_data] indexed {len(index):,} documents "
          f"({index.total_bytes / 1e6:.1f} MB) in {time.time() - started:.1f}s: NSP negatives "
          f"draw B from all of them", file=progress_stream, flush=True)
  return index


# ----------------------------------------------------------------------------- processing


def new_counters():
  """The bad-input counters a run adds up beside its InstanceStats."""
  return {"empty_documents": 0, "invalid_utf8_lines": 0}


def chunk_passes(chunk, encoder, options, random_seed, num_documents, stats, counters,
                 encoded_lines=None):
  """The one per-chunk loop of both runners: encodes the chunk's documents once, then yields
  (pass index, PairPlans) for each of the dupe_factor passes. An NSP negative's B is only named
  in its plan (RandomB): the caller fetches it (`instances.fetch_random_b`) before
  `pass_records`.

  num_documents: how many documents NSP negatives draw from (the whole input; 0 in SOP mode).
  stats, counters: an InstanceStats and `new_counters()` the chunk's counts are added to.
  encoded_lines: DocumentEncoder.encode_lines' result, if already made.
  """
  counters["empty_documents"] += chunk.empty_documents
  documents, numbers = encoder.encode_chunk(chunk, counters, encoded_lines)
  stats.documents += len(documents)
  stats.sentences += sum(len(d) for d in documents)
  for dupe in range(options.dupe_factor):
    pass_stats = instances_lib.InstanceStats()
    plans = pass_plans(documents, numbers, dupe, num_documents, options, random_seed, pass_stats)
    if dupe > 0:  # document-level counts once per chunk, instance counts every pass
      pass_stats.short_documents = 0
    stats.merge(pass_stats)
    yield dupe, plans


def process_chunk(chunk, encoder, serializer, options, random_seed, random_documents=None):
  """Yields (pass index, list of serialized examples) for every pass, then a final
  ("done", InstanceStats, counters): `chunk_passes` with B fetched at once.

  random_documents: the source NSP negatives draw B from (document_index.IndexedDocuments: the
  whole input); None in SOP mode.
  """
  stats, counters = instances_lib.InstanceStats(), new_counters()
  num_documents = len(random_documents) if random_documents is not None else 0
  for dupe, plans in chunk_passes(chunk, encoder, options, random_seed, num_documents, stats,
                                  counters):
    for plan in plans:
      if plan.random_b is not None:
        plan.tokens_b = instances_lib.fetch_random_b(random_documents, plan.random_b)
    yield dupe, pass_records(plans, chunk.index, dupe, options, encoder.vocab_info, serializer,
                             random_seed, stats)
  yield "done", stats, counters


def pass_plans(documents, numbers, dupe, num_documents, options, random_seed, stats):
  """The PairPlans of pass `dupe` over a chunk's documents (numbers: their input-order numbers,
  as encode_chunk gives them), keyed by (seed, document, pass): see instances.document_key."""
  keys = [instances_lib.document_key(random_seed, number, part, dupe)
          for number, part in zip(numbers, instances_lib.document_parts(numbers))]
  return instances_lib.plan_pass(documents, keys, numbers, num_documents, options, stats)


def pass_records(plans, chunk_index, dupe, options, vocab_info, serializer, random_seed, stats):
  """The serialized records of a chunk's pass from its resolved plans, in output order (shuffled
  within the chunk's pass by its key (seed, chunk, pass))."""
  instances = instances_lib.finish_pass(plans, options, vocab_info,
                                        f"{random_seed}:{chunk_index}:{dupe}", stats)
  return [serializer.serialize(inst) for inst in instances]


def private_memory_mb():
  """Memory private to this process (Private_Clean + Private_Dirty), in MB; 0 if unknown.

  For forked workers this excludes the pages shared with the parent (TensorFlow's libraries),
  which RSS would count in every worker.
  """
  try:
    with open("/proc/self/smaps_rollup") as f:
      kb = sum(int(line.split()[1]) for line in f if line.startswith(("Private_Clean",
                                                                       "Private_Dirty")))
    return kb / 1024
  except (OSError, ValueError, IndexError):
    return 0.0


@dataclasses.dataclass(frozen=True)
class _Job:
  """What every chunk's processing needs (given to the workers when they start)."""
  spec: TokenizerSpec
  invalid_utf8: str
  options: instances_lib.InstanceOptions
  random_seed: int
  index: document_index.DocumentIndex = None  # NSP: every document of the input


def _chunk_messages(job, encode_threads=-1):
  """A function chunk -> the ("records", ...) and ("done", ...) messages of that chunk."""
  encoder = DocumentEncoder(job.spec, job.invalid_utf8, encode_threads=encode_threads)
  serializer = instances_lib.ExampleSerializer(job.options.max_seq_length,
                                               job.options.max_predictions_per_seq,
                                               encoder.vocab_info.vocab_size)
  random_documents = (None if job.index is None else
                      document_index.IndexedDocuments(job.index, encoder, _open_binary))

  def messages(chunk):
    for item in process_chunk(chunk, encoder, serializer, job.options, job.random_seed,
                              random_documents):
      if item[0] == "done":
        yield ("done", chunk.index, chunk.num_bytes, item[1], item[2])
      else:
        yield ("records", chunk.index, item[1])

  return messages


def _become_worker(parent_pid):
  """First thing in a forked worker: signals are the parent's business, and the worker dies
  with the parent.

  The parent blocks SIGTERM/SIGINT while it forks (see _start_workers), so none arrives here
  before this has run. SIGINT (Ctrl-C reaches the whole process group) is ignored: the parent
  stops the workers. SIGTERM is the default again (instant death, no traceback): the parent's
  terminate(). The wakeup fd inherited from the parent's signal handling (a pipe of
  preemption.StopSignals) is dropped. PR_SET_PDEATHSIG makes the kernel SIGKILL this worker when
  the parent dies (SIGKILL included); elsewhere a thread polls the parent pid.
  """
  if hasattr(signal, "set_wakeup_fd"):
    signal.set_wakeup_fd(-1)
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  signal.signal(signal.SIGTERM, signal.SIG_DFL)
  if not _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL)):
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()
  _prctl(_PR_SET_NAME, WORKER_NAME.encode())  # what ps and top show for the worker
  if os.getppid() != parent_pid:  # the parent died before the above
    os._exit(1)  # pylint: disable=protected-access
  if hasattr(signal, "pthread_sigmask"):
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_PR_SET_PDEATHSIG, _PR_SET_NAME = 1, 15  # linux/prctl.h
WORKER_NAME = "cpd-worker"  # the workers' process name (/proc/<pid>/comm, at most 15 bytes)


def _prctl(option, argument):
  """Linux prctl(option, argument); False where it is unavailable or fails."""
  if not sys.platform.startswith("linux"):
    return False
  try:
    return ctypes.CDLL(None, use_errno=True).prctl(option, argument, 0, 0, 0) == 0
  except (OSError, AttributeError):
    return False


def _exit_when_orphaned(parent_pid):
  while os.getppid() == parent_pid:
    time.sleep(1.0)
  os._exit(1)  # pylint: disable=protected-access


def _worker_main(worker_index, job, parent_pid, in_queue, out_queue):
  """Worker process: chunks from in_queue -> messages on out_queue (see _run_parallel)."""
  _become_worker(parent_pid)
  try:
    messages = _chunk_messages(job, encode_threads=1)
    while True:
      chunk = in_queue.get()
      if chunk is None:
        out_queue.put(("end",))
        return
      for msg in messages(chunk):
        if msg[0] == "done":
          msg[4]["peak_worker_private_mb"] = private_memory_mb()
        out_queue.put(msg)
  except AlbertError as e:
    out_queue.put(("error", str(e)))
  except Exception as e:  # pylint: disable=broad-except
    out_queue.put(("error", f"worker {worker_index} failed: {type(e).__name__}: {e}"))


# ----------------------------------------------------------------------------- writing


class _ShardedWriter:
  """Round-robin TFRecord writer over the output files; temp names until `commit`."""

  def __init__(self, output_files):
    import tensorflow as tf  # lazy: create_pretraining_data's workers stay TensorFlow-free
    self.output_files = output_files
    self.tmp_files = [fileio.temporary_name(path) for path in output_files]
    self.counts = [0] * len(output_files)
    self._writers = []
    self._next = 0
    try:
      for path in self.tmp_files:
        parent = os.path.dirname(path)
        if parent:  # on a bucket too: a directory nobody made is not listed there (ram://)
          fileio.makedirs(parent)
        self._writers.append(tf.io.TFRecordWriter(path))
    except (OSError, tf.errors.OpError) as e:
      self.abort()
      raise AlbertError(f"--output_file: cannot write {path}: {getattr(e, 'strerror', None) or e}")
    except BaseException:  # a signal's StopRequested between two files
      self.abort()
      raise

  def write(self, record):
    self._writers[self._next].write(record)
    self.counts[self._next] += 1
    self._next = (self._next + 1) % len(self._writers)

  def commit(self):
    for w in self._writers:
      w.close()
    self._writers = []
    for tmp, final in zip(self.tmp_files, self.output_files):
      fileio.replace(tmp, final)

  def abort(self):
    for w in self._writers:
      try:
        w.close()
      except Exception:  # pylint: disable=broad-except
        pass
    self._writers = []
    for tmp in self.tmp_files:
      try:
        fileio.remove(tmp)
      except Exception:  # pylint: disable=broad-except
        pass


# ----------------------------------------------------------------------------- orchestration


class _Progress:
  """Prints a progress line every few seconds: bytes, documents, instances, MB/s, ETA."""

  def __init__(self, total_bytes, stream, enabled=True):
    self.total_bytes = max(total_bytes, 1)
    self.stream = stream
    self.enabled = enabled
    self.start = time.time()
    self._last = self.start
    self.bytes_done = 0
    self.documents = 0
    self.instances = 0

  def update(self, force=False):
    now = time.time()
    if not self.enabled or (not force and now - self._last < _PROGRESS_EVERY_SECONDS):
      return
    self._last = now
    elapsed = max(now - self.start, 1e-9)
    rate = self.bytes_done / elapsed
    eta = (f"{(self.total_bytes - self.bytes_done) / rate:.0f}s" if rate > 0 else "?")
    print(f"[create_pretraining_data] {self.bytes_done / 1e6:.1f}/{self.total_bytes / 1e6:.1f} MB "
          f"({100 * self.bytes_done / self.total_bytes:.0f}%), {self.documents:,} documents, "
          f"{self.instances:,} instances, {rate / 1e6:.2f} MB/s, "
          f"{self.instances / elapsed:,.0f} instances/s, ETA {eta}",
          file=self.stream, flush=True)


def _run_serial(chunks, job):
  messages = _chunk_messages(job)
  for chunk in chunks:
    yield from messages(chunk)


def _start_workers(ctx, num_workers, job, in_queues, out_queues):
  """Forks the workers with SIGTERM/SIGINT blocked (each unblocks them once it has its own
  signal handling); a signal meanwhile is handled here right after. Returns the processes."""
  workers = [ctx.Process(target=_worker_main, daemon=True,
                         args=(w, job, os.getpid(), in_queues[w], out_queues[w]))
             for w in range(num_workers)]
  blocked = (hasattr(signal, "pthread_sigmask")
             and threading.current_thread() is threading.main_thread())
  if blocked:
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
  # Freeze the objects inherited by the forked workers: their garbage collector then never
  # touches (and copies) the parent's pages, which keeps the workers' private memory small.
  gc.freeze()
  try:
    for w in workers:
      w.start()
  except BaseException:
    _stop_workers(workers)
    raise
  finally:
    gc.unfreeze()
    if blocked:
      signal.pthread_sigmask(signal.SIG_SETMASK, previous)  # a pending signal is handled now
  return workers


def _stop_workers(workers):
  """Ends the worker processes (SIGTERM, then SIGKILL for any still there after 5 s)."""
  for w in workers:
    if w.pid is not None and w.is_alive():
      w.terminate()
  for w in workers:
    if w.pid is not None:
      w.join(timeout=5)
      if w.is_alive():
        w.kill()
        w.join(timeout=5)


def _run_parallel(chunks, num_workers, job):
  """Starts the workers now; returns (generator of their results in chunk order, shutdown).

  Chunk k goes to worker k % num_workers. Workers are forked before anything else (the output
  writer, the reader thread) exists in this process. shutdown() ends every worker.
  """
  ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
  in_queues = [ctx.Queue(maxsize=2) for _ in range(num_workers)]
  out_queues = [ctx.Queue(maxsize=_QUEUE_DEPTH) for _ in range(num_workers)]
  workers = _start_workers(ctx, num_workers, job, in_queues, out_queues)
  stop = threading.Event()
  feeder_error = []

  def put(q, item):
    while not stop.is_set():
      try:
        q.put(item, timeout=0.5)
        return True
      except queue.Full:
        continue
    return False

  def feed():
    try:
      for chunk in chunks:
        if not put(in_queues[chunk.index % num_workers], chunk):
          return
    except BaseException as e:  # pylint: disable=broad-except
      feeder_error.append(e)
    finally:
      for q in in_queues:
        put(q, None)

  feeder = threading.Thread(target=feed, daemon=True)
  feeder.start()

  def shutdown():
    stop.set()
    for q in in_queues:
      # Chunks still in a queue's pipe would keep this process from exiting (multiprocessing
      # flushes queues at exit) once no worker reads them.
      q.cancel_join_thread()
    _stop_workers(workers)
    feeder.join(timeout=5)

  return _ordered_results(num_workers, workers, out_queues, feeder_error, shutdown), shutdown


def _ordered_results(num_workers, workers, out_queues, feeder_error, shutdown):
  """Yields worker messages in chunk order; shuts the workers down when done or closed."""
  try:
    index = 0
    while True:
      w = index % num_workers
      msg = _get(out_queues[w], workers[w])
      if msg[0] == "error":
        raise AlbertError(msg[1])
      if msg[0] == "end":
        break
      yield msg
      if msg[0] == "done":
        index += 1
    if feeder_error:
      raise feeder_error[0]
  finally:
    shutdown()


def _get(q, worker):
  while True:
    try:
      return q.get(timeout=1.0)
    except queue.Empty:
      if not worker.is_alive():
        raise AlbertError(f"a data worker died unexpectedly (exit code {worker.exitcode}); "
                          f"out of memory? try a smaller --chunk_mb")


def create_pretraining_data(input_file,
                            output_file,
                            spm_model_file=None,
                            vocab_file=None,
                            do_lower_case=True,
                            options=instances_lib.InstanceOptions(),
                            random_seed=12345,
                            num_workers=1,
                            chunk_mb=1.0,
                            invalid_utf8="stop",
                            progress_stream=sys.stderr,
                            show_progress=True,
                            output_shards=0):
  """Writes pretraining TFRecords from raw text; returns the statistics report (a dict).

  Args:
    input_file: comma-separated files or globs, by `common.file_patterns`' rule (one sentence
      per line, blank line between documents).
    output_file: comma-separated output files; records are written round-robin (with
      output_shards > 0: the prefix of that many shards, see `output_paths`).
    spm_model_file / vocab_file: the tokenizer (SentencePiece model, else WordPiece vocabulary).
    do_lower_case: lower-case the text before tokenizing.
    options: InstanceOptions (the official flags shaping instances).
    random_seed: the output is fully determined by the inputs, flags and this seed.
    num_workers: worker processes (1 = in-process). Output is identical for any value.
    chunk_mb: documents are processed in chunks of about this many MB of text: memory grows
      with it (and dupe_factor), not with the corpus.
    invalid_utf8: "stop" (error naming file and line) or "skip" (skip the line, count it).
    progress_stream / show_progress: where and whether to print progress lines.

  Raises:
    AlbertError: bad flags or input; no output file is left behind.
  """
  validate(options, num_workers, chunk_mb, invalid_utf8)
  files = file_patterns.expand(input_file)
  output_files = output_paths(output_file, output_shards)
  spec = TokenizerSpec(spm_model_file or None, vocab_file or None, do_lower_case)
  encoder = DocumentEncoder(spec, invalid_utf8)  # validates the vocabulary before any work
  del encoder
  for path in output_files:  # what runs killed half-way (SIGKILL, power loss) left
    for removed in fileio.remove_temporaries(os.path.dirname(path), [os.path.basename(path)]):
      print(f"note: removed {removed}, left by an interrupted run", file=progress_stream,
            flush=True)
  total_bytes = sum(fileio.getsize(f) for f in files)
  chunk_bytes = int(chunk_mb * 1e6)
  index = None
  if options.random_next_sentence:  # NSP negatives draw B from the whole input
    index = index_documents(files, chunk_bytes, progress_stream if show_progress else None)
  job = _Job(spec, invalid_utf8, options, random_seed, index)
  chunks = iter_chunks(files, chunk_bytes)
  progress = _Progress(total_bytes, progress_stream, show_progress)

  stats = instances_lib.InstanceStats()
  counters = new_counters()
  messages = shutdown = writer = None
  try:
    if num_workers <= 1:
      messages = _run_serial(chunks, job)
    else:
      messages, shutdown = _run_parallel(chunks, num_workers, job)
    writer = _ShardedWriter(output_files)
    _consume(messages, writer, progress, stats, counters)
    if stats.instances == 0:
      raise AlbertError(no_instances_message(input_file, stats.documents,
                                             stats.short_documents, counters["empty_documents"]))
    writer.commit()
  except BaseException:  # an error, or a signal's StopRequested: no output, no temporary file
    if writer is not None:
      writer.abort()
    raise
  finally:
    if messages is not None:
      messages.close()
    if shutdown is not None:
      shutdown()
  progress.update(force=True)
  return run_report(stats, counters, len(files), progress.bytes_done,
                    time.time() - progress.start, dict(zip(output_files, writer.counts)))


def run_report(stats, counters, num_input_files, input_bytes, seconds, output_counts):
  """A run's statistics, the dict both runners return (`format_report` prints it).

  stats: the run's InstanceStats; counters: `new_counters()`'s, added up; output_counts:
  {output file: records}.
  """
  report = stats.to_dict()
  report.update(counters)
  report.update({
      "input_files": num_input_files,
      "input_bytes": input_bytes,
      "seconds": seconds,
      "mb_per_second": input_bytes / 1e6 / max(seconds, 1e-9),
      "instances_per_second": stats.instances / max(seconds, 1e-9),
      "output_files": output_counts,
      "mean_masked_fraction": stats.masked / max(stats.tokens, 1),
      "swapped_fraction": stats.swapped / max(stats.instances, 1),
  })
  return report


def _consume(messages, writer, progress, stats, counters):
  """Writes the records of the chunk messages in order and merges their statistics.

  messages: ("records", chunk index, [serialized records]) and ("done", chunk index, bytes
  read, InstanceStats, counters) tuples, from the serial or the parallel producer.
  """
  for msg in messages:
    if msg[0] == "records":
      for record in msg[2]:
        writer.write(record)
      progress.instances += len(msg[2])
    else:
      _, _, num_bytes, chunk_stats, chunk_counters = msg
      stats.merge(chunk_stats)
      for k, v in chunk_counters.items():
        if k.startswith("peak_"):
          counters[k] = max(counters.get(k, 0.0), v)
        else:
          counters[k] += v
      progress.bytes_done += num_bytes
      progress.documents += chunk_stats.documents
    progress.update()


def output_paths(output_file, output_shards=0):
  """The output files: --output_file's comma-separated list, or with output_shards = n > 0 the
  n shards `<output_file>-00000-of-0000n` ... (so `<output_file>-*` reads them all)."""
  if output_shards < 0:
    raise AlbertError(f"--output_shards={output_shards}: expected >= 0")
  if output_shards:
    prefix = output_file.strip()
    if not prefix or "," in prefix:
      raise AlbertError(f"--output_file={output_file}: with --output_shards, expected one "
                        f"path prefix")
    return [f"{prefix}-{k:05d}-of-{output_shards:05d}" for k in range(output_shards)]
  paths = [p.strip() for p in output_file.split(",") if p.strip()]
  if not paths:
    raise AlbertError("--output_file is empty; expected comma-separated output paths")
  return paths


def no_instances_message(input_file, documents, short_documents, empty_documents):
  """The error when the input gives no instance at all."""
  return (f"no instances created from --input_file={input_file}: {documents} usable "
          f"documents, {short_documents} with fewer than 2 sentences, "
          f"{empty_documents} empty; documents need at least two sentences "
          f"(one per line, blank line between documents)")


def validate(options, num_workers, chunk_mb, invalid_utf8):
  """One-line errors for flag values out of range."""
  o = options
  if o.max_seq_length < 5:
    raise AlbertError(f"--max_seq_length={o.max_seq_length}: expected at least 5")
  if o.max_predictions_per_seq < 0:
    raise AlbertError(f"--max_predictions_per_seq={o.max_predictions_per_seq}: expected >= 0")
  if not 0.0 <= o.masked_lm_prob <= 1.0:
    raise AlbertError(f"--masked_lm_prob={o.masked_lm_prob}: expected a value in [0, 1]")
  if not 0.0 <= o.short_seq_prob <= 1.0:
    raise AlbertError(f"--short_seq_prob={o.short_seq_prob}: expected a value in [0, 1]")
  if o.ngram < 1:
    raise AlbertError(f"--ngram={o.ngram}: expected at least 1")
  if o.dupe_factor < 1:
    raise AlbertError(f"--dupe_factor={o.dupe_factor}: expected at least 1")
  if num_workers < 1:
    raise AlbertError(f"--num_workers={num_workers}: expected at least 1")
  if chunk_mb <= 0:
    raise AlbertError(f"--chunk_mb={chunk_mb}: expected a positive size")
  if invalid_utf8 not in ("stop", "skip"):
    raise AlbertError(f"--invalid_utf8={invalid_utf8}: expected 'stop' or 'skip'")


def format_report(report):
  """The final statistics report as printable lines."""
  inst = report["instances"]
  masked = max(report["masked"], 1)
  ngram_total = max(sum(report["ngram_masked"].values()), 1)
  hist = ", ".join(f"{n}: {c / ngram_total:.3f}" for n, c in report["ngram_masked"].items())
  drawn_total = max(sum(report["ngram_drawn"].values()), 1)
  drawn = ", ".join(f"{n}: {c / drawn_total:.3f}" for n, c in report["ngram_drawn"].items())
  lines = [
      f"instances: {inst:,} ({report['instances_per_second']:,.0f}/s) from "
      f"{report['input_bytes'] / 1e6:.2f} MB in {report['seconds']:.1f}s "
      f"({report['mb_per_second']:.2f} MB/s), {report['documents']:,} documents",
      f"mean masked fraction: {report['mean_masked_fraction']:.4f} "
      f"([MASK] {report['mask_token'] / masked:.3f}, random {report['random_token'] / masked:.3f}, "
      f"unchanged {report['kept_token'] / masked:.3f})",
      f"n-gram length histogram (masked n-grams): {hist}",
      f"n-gram lengths drawn (p(n) before fitting the budget): {drawn}",
      f"swapped pairs (label 1): {report['swapped_fraction']:.4f}",
  ]
  skipped = []
  if report["short_documents"]:
    skipped.append(f"{report['short_documents']:,} documents with fewer than 2 sentences skipped")
  if report["empty_documents"]:
    skipped.append(f"{report['empty_documents']:,} empty documents skipped")
  if report["invalid_utf8_lines"]:
    skipped.append(f"{report['invalid_utf8_lines']:,} lines that are not UTF-8 skipped")
  if report["unsplittable_segments"]:
    skipped.append(f"{report['unsplittable_segments']:,} one-token leftover segments skipped")
  if skipped:
    lines.append("warnings: " + "; ".join(skipped))
  for path, count in report["output_files"].items():
    lines.append(f"wrote {count:,} instances to {path}")
  return lines
