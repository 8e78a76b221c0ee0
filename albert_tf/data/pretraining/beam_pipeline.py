"""create_pretraining_data on Apache Beam: the local tool's bytes, from any runner and any
number of workers (DirectRunner here; Dataflow, Flink, Spark by their standard options).

Needs the optional extra (`pip install ".[beam]"`); only `create_pretraining_data.py --runner=...`
imports this module. The work is the local tool's (creation.py, instances.py), cut at the points
where it is keyed, so every engine makes the same records:

  files -> ScanFile (one file per worker, reading only: creation.iter_chunks' chunks, whose cuts
    depend on that file only; UTF-8 checked for --invalid_utf8=stop)
  -> Number (global chunk and document numbers: prefix sums of the per-file counts, a side input)
  -> Reshuffle -> ProcessChunk (tokenize; per pass, the pairs keyed by (seed, document, pass))
  -> SOP: pass records at once.  NSP: every negative's B document is a hash of its instance key,
     so it is requested by number and joined with that document (CoGroupByKey on the document
     number), then a second join brings the answers back to their (chunk, pass)
  -> records of (chunk, pass), shuffled by (seed, chunk, pass): creation.pass_records
  -> global record numbers (prefix sums of the (chunk, pass) counts, a side input), record r to
     shard r mod n as the local tool's round-robin -> GroupByKey(shard), sorted -> one file each.

Files are written under temporary names (fileio.temporary_name's mark with the launching
process's pid) and renamed by the launching process once the pipeline has succeeded; a failed
run leaves no output file, and a rerun writes the same bytes (every step is a function of its
input). A shard is sorted in one worker's memory (as tensorflow/datasets' BeamWriter does): pick
the shard count so a shard stays well below a worker's memory (about 1 GB).
"""

import dataclasses
import os
import re
import struct
import sys
import time

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
import crcmod.predefined

from albert_tf.common import file_patterns
from albert_tf.common import fileio
from albert_tf.data.pretraining import creation
from albert_tf.data.pretraining import instances as instances_lib
from albert_tf.errors import AlbertError

_NAMESPACE = "create_pretraining_data"
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
# Our one-line errors travel inside a runner's failure text (a worker's traceback); the launching
# process finds them between these marks.
_MARK = "<albert_tf error>"


def _fail(message):
  raise RuntimeError(f"{_MARK}{message}{_MARK}")


def _open(path):
  # As the local tool: bytes as stored (no decompression by the file name's extension).
  return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def _count(stats, counters=None):
  """Adds InstanceStats (and the bad-input counters) to the pipeline's metrics."""
  for name in instances_lib.InstanceStats.FIELDS:
    value = getattr(stats, name)
    if value:
      Metrics.counter(_NAMESPACE, name).inc(value)
  for kind in ("ngram_drawn", "ngram_masked"):
    for n, value in getattr(stats, kind).items():
      Metrics.counter(_NAMESPACE, f"{kind}_{n}").inc(value)
  for name, value in (counters or {}).items():
    if value and not name.startswith("peak_"):
      Metrics.counter(_NAMESPACE, name).inc(value)


# ----------------------------------------------------------------------------- reading


class _ScanFile(beam.DoFn):
  """(file number, path) -> its chunks (file-local numbers), and on the "files" output
  (file number, chunks, documents, bytes, first error or None)."""

  def __init__(self, chunk_bytes, invalid_utf8):
    self._chunk_bytes = chunk_bytes
    self._invalid_utf8 = invalid_utf8

  def process(self, element):
    file_number, path = element
    chunks = documents = num_bytes = 0
    error = None
    try:
      for chunk in creation.iter_chunks([path], self._chunk_bytes, open_binary=_open):
        error = self._first_invalid_line(chunk)
        if error:
          break
        yield dataclasses.replace(chunk, file_number=file_number)
        chunks += 1
        documents += len(chunk.doc_starts)
        num_bytes += chunk.num_bytes
    except AlbertError as e:
      error = str(e)
    except OSError as e:
      error = f"--input_file: cannot read {path}: {e}"
    yield beam.pvalue.TaggedOutput("files", (file_number, chunks, documents, num_bytes, error))

  def _first_invalid_line(self, chunk):
    """--invalid_utf8=stop: the local tool's error for the chunk's first line that is not UTF-8
    (found here, in input order, so every runner reports the same line)."""
    if self._invalid_utf8 != "stop":
      return None
    for raw, line_number in zip(chunk.lines, chunk.line_numbers):
      try:
        raw.decode("utf-8")
      except UnicodeDecodeError as e:
        return creation.invalid_utf8_message(chunk.path, line_number, raw, e)
    return None


def _file_table(files):
  """{file number: (first chunk, first document)} and the number of documents, from the
  ScanFile summaries; raises the first error in input order."""
  table, chunk, document = {}, 0, 0
  for file_number, chunks, documents, _, error in sorted(files):
    if error:
      _fail(error)
    table[file_number] = (chunk, document)
    chunk += chunks
    document += documents
  return table, document


class _Number(beam.DoFn):
  """A file's chunk -> the chunk numbered as the local tool numbers it (global chunk index and
  first document)."""

  def __init__(self):
    self._table = None

  def process(self, chunk, files):
    if self._table is None:  # the side input is the same for every element
      self._table = _file_table(files)[0]
    first_chunk, first_document = self._table[chunk.file_number]
    yield dataclasses.replace(chunk, index=first_chunk + chunk.index,
                              first_document=first_document + chunk.first_document)


# ----------------------------------------------------------------------------- processing


class _Worker(beam.DoFn):
  """What every processing step builds once per worker: the encoder and the serializer."""

  def __init__(self, spec, invalid_utf8, options, random_seed):
    self._spec = spec
    self._invalid_utf8 = invalid_utf8
    self._options = options
    self._seed = random_seed
    self._encoder = self._serializer = None

  def setup(self):
    self._encoder = creation.DocumentEncoder(self._spec, self._invalid_utf8, encode_threads=1)
    self._serializer = instances_lib.ExampleSerializer(
        self._options.max_seq_length, self._options.max_predictions_per_seq,
        self._encoder.vocab_info.vocab_size)

  def _records(self, plans, batch):
    stats = instances_lib.InstanceStats()
    records = creation.pass_records(plans, batch[0], batch[1], self._options,
                                    self._encoder.vocab_info, self._serializer, self._seed, stats)
    _count(stats)
    return records


class _ProcessChunk(_Worker):
  """Chunk -> ((chunk, pass), records) in SOP mode; in NSP mode ((chunk, pass), plans) on
  "plans", (B's document, ((chunk, pass), plan position, RandomB)) on "requests" and
  (document, sentences) on "sources"."""

  def process(self, chunk, num_documents):
    options = self._options
    stats, counters = instances_lib.InstanceStats(), creation.new_counters()
    try:
      encoded = self._encoder.encode_lines(chunk, counters)
    except AlbertError as e:  # (ScanFile found --invalid_utf8=stop's errors already)
      _fail(str(e))
    if options.random_next_sentence:
      for source in creation.source_documents(chunk, encoded):
        yield beam.pvalue.TaggedOutput("sources", source)
    for dupe, plans in creation.chunk_passes(chunk, self._encoder, options, self._seed,
                                             num_documents, stats, counters, encoded):
      batch = (chunk.index, dupe)
      if not options.random_next_sentence:
        yield batch, self._records(plans, batch)
        continue
      yield beam.pvalue.TaggedOutput("plans", (batch, plans))
      for position, plan in enumerate(plans):
        if plan.random_b is not None:
          yield beam.pvalue.TaggedOutput(
              "requests", (plan.random_b.document, (batch, position, plan.random_b)))
    _count(stats, counters)
    Metrics.counter(_NAMESPACE, "input_bytes").inc(chunk.num_bytes)


def _answer(joined):
  """(document, {"sources": [sentences], "requests": [...]}) -> ((chunk, pass), (position,
  B's tokens)) for every request of that document."""
  number, groups = joined
  sources = list(groups["sources"])
  documents = instances_lib.ListDocuments({number: sources[0] if sources else []})
  for batch, position, random_b in groups["requests"]:
    yield batch, (position, instances_lib.fetch_random_b(documents, random_b))


class _FinishPass(_Worker):
  """((chunk, pass), {"plans": [plans], "answers": [(position, B)]}) -> ((chunk, pass),
  records)."""

  def process(self, joined):
    batch, groups = joined
    (plans,) = list(groups["plans"])
    for position, tokens_b in groups["answers"]:
      plans[position].tokens_b = tokens_b
    yield batch, self._records(plans, batch)


# ----------------------------------------------------------------------------- writing


class _ToShards(beam.DoFn):
  """((chunk, pass), records) -> (shard, (first global record number, its records there)): record
  r of the whole output (in (chunk, pass) order) goes to shard r mod num_shards, as the local
  tool's round-robin writer puts it."""

  def __init__(self, num_shards):
    self._num_shards = num_shards
    self._offsets = None

  def process(self, element, counts):
    if self._offsets is None:  # the side input is the same for every element
      self._offsets, total = {}, 0
      for batch, count in sorted(counts):
        self._offsets[batch] = total
        total += count
    batch, records = element
    offset, n = self._offsets[batch], self._num_shards
    for shard in range(n):
      first = (shard - offset) % n  # the first record of this batch that lands in `shard`
      if first < len(records):
        yield shard, (offset + first, records[first::n])


_crc32c = crcmod.predefined.mkPredefinedCrcFun("crc-32c")


def _masked_crc(data):
  crc = _crc32c(data)
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord_frame(record):
  """The bytes TFRecordWriter writes for one record (length, CRCs: the TFRecord format)."""
  length = struct.pack("<Q", len(record))
  return (length + struct.pack("<I", _masked_crc(length)) + record
          + struct.pack("<I", _masked_crc(record)))


class _WriteShard(beam.DoFn):
  """(shard, [(first record number, records)]) -> the shard's file under its temporary name;
  yields (shard, number of records)."""

  def __init__(self, temporary_files):
    self._temporary_files = temporary_files

  def process(self, element):
    shard, pieces = element
    count = 0
    with FileSystems.create(self._temporary_files[shard],
                            compression_type=CompressionTypes.UNCOMPRESSED) as f:
      for _, records in sorted(pieces, key=lambda piece: piece[0]):
        for record in records:
          f.write(tfrecord_frame(record))
        count += len(records)
    yield shard, count


# ----------------------------------------------------------------------------- the pipeline


def beam_options(args):
  """PipelineOptions of the arguments the script's flags did not take (e.g. --runner,
  --direct_num_workers, --project); an argument Beam does not know either is a one-line error."""
  options = PipelineOptions(args)
  unknown = sorted(set(options.get_all_options(retain_unknown_options=True))
                   - set(options.get_all_options()))
  if unknown:
    raise AlbertError(f"unknown flag --{unknown[0]}: neither a flag of "
                      f"create_pretraining_data.py nor an Apache Beam pipeline option")
  return options


def build(pipeline, files, temporary_files, spec, options, random_seed, chunk_bytes,
          invalid_utf8):
  """Adds the whole job to `pipeline` (see the module docstring)."""
  scanned = (pipeline
             | "Files" >> beam.Create(list(enumerate(files)))
             | "Scan" >> beam.ParDo(_ScanFile(chunk_bytes, invalid_utf8)).with_outputs(
                 "files", main="chunks"))
  files_view = beam.pvalue.AsList(scanned.files)
  # (the first bad input in input order, if any, fails the pipeline here)
  num_documents = beam.pvalue.AsSingleton(
      scanned.files | "All files" >> beam.combiners.ToList()
      | "Count documents" >> beam.Map(lambda files: _file_table(files)[1]))
  chunks = (scanned.chunks
            | "Number" >> beam.ParDo(_Number(), files_view)
            | "Spread chunks" >> beam.Reshuffle())
  processed = chunks | "Process" >> beam.ParDo(
      _ProcessChunk(spec, invalid_utf8, options, random_seed), num_documents).with_outputs(
          "plans", "requests", "sources", main="records")
  batches = processed.records
  if options.random_next_sentence:
    answers = ({"sources": processed.sources, "requests": processed.requests}
               | "Join B documents" >> beam.CoGroupByKey()
               | "Answer" >> beam.FlatMap(_answer))
    batches = ({"plans": processed.plans, "answers": answers}
               | "Join answers" >> beam.CoGroupByKey()
               | "Finish" >> beam.ParDo(_FinishPass(spec, invalid_utf8, options, random_seed)))
  counts = beam.pvalue.AsList(batches | "Count records" >> beam.Map(
      lambda b: (b[0], len(b[1]))))
  num_shards = len(temporary_files)
  every_shard = pipeline | "Shards" >> beam.Create([(s, (-1, [])) for s in range(num_shards)])
  return ((batches | "To shards" >> beam.ParDo(_ToShards(num_shards), counts), every_shard)
          | "All shards" >> beam.Flatten()
          | "Group shards" >> beam.GroupByKey()
          | "Write" >> beam.ParDo(_WriteShard(temporary_files)))


def _remove(paths):
  for path in paths:
    try:
      if FileSystems.exists(path):
        FileSystems.delete([path])
    except Exception:  # pylint: disable=broad-except
      pass


def _our_error(error):
  """The one-line message a worker's failure carries, or None."""
  found = re.search(re.escape(_MARK) + "(.*?)" + re.escape(_MARK), str(error), re.S)
  return found.group(1) if found else None


def _metrics(result):
  """{counter name: value} of the run (None where the runner cannot say)."""
  try:
    query = result.metrics().query(MetricsFilter().with_namespace(_NAMESPACE))
  except Exception:  # pylint: disable=broad-except
    return None
  values = {}
  for counter in query["counters"]:
    value = counter.committed if counter.committed is not None else counter.attempted
    values[counter.key.metric.name] = values.get(counter.key.metric.name, 0) + (value or 0)
  return values


def _report(metrics, input_file_count, seconds, output_counts):
  """The local tool's report dict (creation.run_report) from the run's metrics."""
  stats = instances_lib.InstanceStats()
  for name in stats.FIELDS:
    setattr(stats, name, metrics.get(name, 0))
  for kind in ("ngram_drawn", "ngram_masked"):
    for key, value in metrics.items():
      if key.startswith(kind + "_"):
        getattr(stats, kind)[int(key[len(kind) + 1:])] = value
  counters = {name: metrics.get(name, 0) for name in creation.new_counters()}
  return creation.run_report(stats, counters, input_file_count, metrics.get("input_bytes", 0),
                             seconds, output_counts)


def create_pretraining_data(input_file, output_file, beam_args=(), spm_model_file=None,
                            vocab_file=None, do_lower_case=True,
                            options=instances_lib.InstanceOptions(), random_seed=12345,
                            chunk_mb=1.0, invalid_utf8="stop", progress_stream=sys.stderr,
                            output_shards=0):
  """creation.create_pretraining_data's job on Apache Beam; the same arguments (but the worker
  count, which is the runner's business) and the same bytes. Returns the report dict.

  beam_args: Beam pipeline options as command-line arguments (["--runner=DirectRunner", ...]).
  Raises:
    AlbertError: bad flags or input, including what a worker found; no output file is left.
  """
  creation.validate(options, 1, chunk_mb, invalid_utf8)
  beam_args = list(beam_args)
  if not any(a.startswith("--default_sdk_harness_log_level") for a in beam_args):
    beam_args.append("--default_sdk_harness_log_level=WARNING")  # workers: no INFO lines
  pipeline_options = beam_options(beam_args)
  files = file_patterns.expand(input_file)
  output_files = creation.output_paths(output_file, output_shards)
  spec = creation.TokenizerSpec(spm_model_file or None, vocab_file or None, do_lower_case)
  creation.DocumentEncoder(spec, invalid_utf8)  # validates the vocabulary before any work
  for path in output_files:  # what runs killed half-way (SIGKILL, power loss) left
    for removed in fileio.remove_temporaries(os.path.dirname(path), [os.path.basename(path)]):
      print(f"note: removed {removed}, left by an interrupted run", file=progress_stream,
            flush=True)
    parent = os.path.dirname(path)
    if parent and fileio.is_local(path):
      fileio.makedirs(parent)
  temporary_files = [fileio.temporary_name(path) for path in output_files]
  # The DirectRunner's multi_processing workers are new Python processes: they find albert_tf
  # where this process did (remote runners get the package by --setup_file / --extra_package).
  os.environ["PYTHONPATH"] = os.pathsep.join(
      [_PACKAGE_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
  started = time.time()
  pipeline = beam.Pipeline(options=pipeline_options)
  build(pipeline, files, temporary_files, spec, options, random_seed, int(chunk_mb * 1e6),
        invalid_utf8)
  try:
    result = pipeline.run()
    result.wait_until_finish()
  except BaseException as e:  # a worker's error or a signal: no output, no temporary file
    _remove(temporary_files)
    message = _our_error(e)
    if message:
      raise AlbertError(message) from None
    raise
  metrics = _metrics(result)
  if metrics is not None and not metrics.get("instances"):
    _remove(temporary_files)
    raise AlbertError(creation.no_instances_message(
        input_file, metrics.get("documents", 0), metrics.get("short_documents", 0),
        metrics.get("empty_documents", 0)))
  for temporary, final in zip(temporary_files, output_files):
    if fileio.is_local(final):
      fileio.replace(temporary, final)
    else:
      _remove([final])
      FileSystems.rename([temporary], [final])
  counts, metrics = {}, metrics or {}
  if metrics:
    total = metrics.get("instances", 0)
    counts = {path: total // len(output_files) + (k < total % len(output_files))
              for k, path in enumerate(output_files)}
  return _report(metrics, len(files), time.time() - started, counts)
