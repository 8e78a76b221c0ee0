"""Fetching public data sets, for users who have internet: the GLUE tasks, IMDB reviews and the
WNUT 2017 named entities.

  python -m albert_tf.cli.download_data --data_dir=glue_data --tasks=SST-2,MRPC
  python -m albert_tf.cli.download_data --data_dir=data --tasks=IMDB
  python -m albert_tf.cli.download_data --data_dir=data --tasks=WNUT17

The official release pointed to `download_glue_data.py` for GLUE; this lays the tasks out as that
script did, i.e. as run_classifier.py's --data_dir reads them (`<data_dir>/SST-2/train.tsv`, ...,
the diagnostic set as `diagnostic/diagnostic.tsv`). MRPC is not in a GLUE zip (its licence):
as download_glue_data.py, the train and test files come from SentEval's copy of the corpus and
the GLUE dev split is cut out of the training file by GLUE's list of dev pair ids, giving
MRPC/train.tsv, dev.tsv (label, ids, two strings, with the corpus's header) and test.tsv (index,
ids, two strings). IMDB is Maas et al.'s aclImdb_v1.tar.gz, unpacked as `<data_dir>/aclImdb`
(train/{pos,neg,unsup}, test/{pos,neg}). WNUT17 is the WNUT 2017 emerging-entities corpus's
three CoNLL files (word, tab, BIO tag), as `<data_dir>/wnut17/{train,dev,test}.txt`: run_ner.py's
--data_dir.

Nothing is left looking complete when it is not:
  * a file downloads to `<data_dir>/.downloads/<name>.part`; a run stopped half-way (or a
    dropped connection) resumes it with an HTTP range request, and it gets its final name only
    once whole (the Content-Length received, the published SHA-256 matched where there is one;
    otherwise the SHA-256 obtained is printed to compare);
  * an archive is read whole before anything is unpacked, and unpacks into a temporary
    directory (fileio.atomic_path) renamed to `<data_dir>/<task directory>` at the end: the task
    directory exists only complete. An existing one is kept (delete it to fetch again);
  * a corrupt or truncated archive, a checksum that differs, an unknown task name and a machine
    without internet are one-line errors (AlbertError), never a quiet partial result.

Standard library only (urllib, zipfile, tarfile, hashlib). The tests and CI never download: they
fetch from local files through `base_url` (a mirror holding the files under their own names).
"""

import dataclasses
import gzip
import hashlib
import http.client
import os
import pathlib
import shutil
import tarfile
import urllib.error
import urllib.request
import zipfile
import zlib
from typing import Callable, Tuple

from albert_tf.common import fileio
from albert_tf.common import utf8
from albert_tf.errors import AlbertError
from albert_tf.tools.pair_task import MRPC_TEST_HEADER, MRPC_TRAIN_HEADER

GLUE_URL = "https://dl.fbaipublicfiles.com/glue/data/"
SENTEVAL_URL = "https://dl.fbaipublicfiles.com/senteval/senteval_data/"
IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/"
WNUT17_URL = "https://raw.githubusercontent.com/leondz/emerging_entities_17/master/"
ALBERT_MODELS_URL = "https://storage.googleapis.com/albert_models/"  # the official release
CLUE_URL = "https://storage.googleapis.com/cluebenchmark/tasks/"  # the CLUE benchmark's files
DOWNLOADS = ".downloads"  # below data_dir: the files being (or waiting to be) unpacked
PARTIAL = ".part"  # the suffix of a download not yet whole
# Published SHA-256 checksums (the ones the data sets' users publish and agree on); the GLUE
# files have none that we know of, so their SHA-256 is printed instead.
PUBLISHED_SHA256 = {
    "aclImdb_v1.tar.gz": "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe",
}
CHUNK = 1 << 20
TIMEOUT_S = 60  # per network operation (connect, each read)


@dataclasses.dataclass(frozen=True)
class DataSet:
  """One data set: the files to fetch and how they become `<data_dir>/<directory>`."""
  name: str  # as users name it (--tasks), e.g. "SST-2"
  directory: str  # what it leaves in data_dir
  urls: Tuple[str, ...]
  # (downloaded paths in the order of urls, the temporary task directory to fill) -> None
  unpack: Callable[[Tuple[str, ...], str], None]
  description: str = ""


# ------------------------------------------------------------------------------- unpacking
def _safe_member(name, archive):
  """Refuses a member that would land outside the target directory."""
  parts = pathlib.PurePosixPath(name.replace("\\", "/")).parts
  if name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
    raise AlbertError(f"{archive}: member {name!r} points outside the directory it unpacks to: "
                      "refused")


def _archive_prefix(file_names, inner):
  """The prefix the wanted files share: `inner/`; with inner None, the archive's one top-level
  directory when every file is below it, else "" (files at the top: unpacked as they are)."""
  if inner is not None:
    return inner + "/"
  tops = {name.split("/", 1)[0] for name in file_names}
  if len(tops) == 1 and all("/" in name for name in file_names):
    return tops.pop() + "/"
  return ""


def _unpack_zip(path, target, inner):
  """Unpacks the zip at `path` whose files sit in `inner/` (None: see _archive_prefix) into
  `target`."""
  try:
    with zipfile.ZipFile(path) as archive:
      bad = archive.testzip()  # reads every member whole: CRC errors, truncation
      if bad is not None:
        raise zipfile.BadZipFile(f"member {bad} is corrupt")
      members = archive.namelist()
      for name in members:
        _safe_member(name, path)
      prefix = _archive_prefix([i.filename for i in archive.infolist() if not i.is_dir()],
                               inner)
      if not any(name.startswith(prefix) for name in members):
        raise _refused(path, f"holds no {prefix} (found "
                       f"{', '.join(members[:3]) or 'nothing'}): not the expected archive")
      for info in archive.infolist():
        if not info.filename.startswith(prefix) or info.is_dir():
          continue
        out = os.path.join(target, *info.filename[len(prefix):].split("/"))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with archive.open(info) as source, open(out, "wb") as sink:
          shutil.copyfileobj(source, sink, CHUNK)
  except (zipfile.BadZipFile, EOFError, zlib.error) as e:
    raise _corrupt(path, "zip", e) from None


def _unpack_tar_gz(path, target, inner):
  """Unpacks the .tar.gz at `path` whose files sit in `inner/` (None: see _archive_prefix) into
  `target`."""
  try:
    with tarfile.open(path, "r:gz") as archive:
      members = archive.getmembers()  # reads the whole archive: truncation shows here
      for member in members:
        _safe_member(member.name, path)
        if not (member.isfile() or member.isdir()):
          raise AlbertError(f"{path}: member {member.name!r} is a link or device: refused")
      prefix = _archive_prefix([m.name for m in members if m.isfile()], inner)
      wanted = [m for m in members if m.name.startswith(prefix) and m.isfile()]
      if not wanted:
        raise _refused(path, f"holds no {prefix} (found "
                       f"{', '.join(m.name for m in members[:3]) or 'nothing'}): not the "
                       "expected archive")
      for member in wanted:
        out = os.path.join(target, *member.name[len(prefix):].split("/"))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with archive.extractfile(member) as source, open(out, "wb") as sink:
          shutil.copyfileobj(source, sink, CHUNK)
  except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as e:
    raise _corrupt(path, "tar.gz", e) from None


def _refused(path, why):
  """The error for a downloaded file that cannot be used, which is deleted: a rerun fetches it
  anew instead of trusting it again."""
  fileio.remove(path)
  return AlbertError(f"{path}: {why}: deleted; run the command again to fetch it anew")


def _corrupt(path, kind, error):
  return _refused(path, f"not a readable {kind} archive ({error or type(error).__name__})")


def _copy_files_as(*names):
  """Copies the downloaded files, in order, under `names` (AX's one file; WNUT17's train/dev/test
  for run_ner.py)."""
  def unpack(paths, target):
    os.makedirs(target, exist_ok=True)
    for path, name in zip(paths, names, strict=True):
      shutil.copyfile(path, os.path.join(target, name))
  return unpack


def _read_rows(path, columns=5):
  """A tab-separated file with a header -> its rows (lists of `columns` fields)."""
  lines = utf8.read_file(path, "a tab-separated MRPC file").splitlines()
  rows = []
  for number, line in enumerate(lines[1:], start=2):
    if not line.strip():
      continue
    fields = line.split("\t")
    if len(fields) != columns:
      raise AlbertError(f"{path}:{number}: {len(fields)} tab-separated fields, expected "
                        f"{columns} (label, #1 ID, #2 ID, #1 String, #2 String)")
    rows.append(fields)
  if not rows:
    raise AlbertError(f"{path}: no rows below the header")
  return rows


def _format_mrpc(paths, target):
  """SentEval's msr_paraphrase_{train,test}.txt + GLUE's dev ids -> train/dev/test.tsv."""
  train_file, test_file, dev_ids_file = paths
  dev_ids = set()
  for line in utf8.read_file(dev_ids_file, "MRPC's dev id list").splitlines():
    ids = line.strip().split("\t")
    if len(ids) == 2:
      dev_ids.add(tuple(ids))
  train, dev = [MRPC_TRAIN_HEADER], [MRPC_TRAIN_HEADER]
  for row in _read_rows(train_file):
    (dev if (row[1], row[2]) in dev_ids else train).append("\t".join(row) + "\n")
  if len(dev) == 1:
    raise AlbertError(f"{dev_ids_file}: none of its pair ids is in {train_file}: no dev split")
  test = [MRPC_TEST_HEADER] + [f"{index}\t" + "\t".join(row[1:]) + "\n"
                               for index, row in enumerate(_read_rows(test_file))]
  os.makedirs(target, exist_ok=True)
  for name, lines in (("train.tsv", train), ("dev.tsv", dev), ("test.tsv", test)):
    with open(os.path.join(target, name), "w", encoding="utf-8") as f:
      f.writelines(lines)


def _glue_zip(name, file_name=None, description=""):
  """A GLUE task in its zip, whose files sit in `<name>/` (QQP-clean.zip and QNLIv2.zip too:
  QQP/ and QNLI/)."""
  return DataSet(name, name, (GLUE_URL + (file_name or name + ".zip"),),
                 lambda paths, target: _unpack_zip(paths[0], target, name), description)


DATA_SETS = {
    data_set.name.lower(): data_set for data_set in (
        _glue_zip("CoLA", description="GLUE: grammatical acceptability"),
        _glue_zip("SST-2", description="GLUE: movie-review sentiment (Stanford Sentiment "
                  "Treebank)"),
        DataSet("MRPC", "MRPC", (SENTEVAL_URL + "msr_paraphrase_train.txt",
                                 SENTEVAL_URL + "msr_paraphrase_test.txt",
                                 GLUE_URL + "mrpc_dev_ids.tsv"), _format_mrpc,
                "GLUE: paraphrase pairs (SentEval's copy, GLUE's dev split)"),
        _glue_zip("QQP", "QQP-clean.zip", description="GLUE: duplicate Quora questions"),
        _glue_zip("STS-B", description="GLUE: sentence similarity (regression)"),
        _glue_zip("MNLI", description="GLUE: natural language inference, matched and "
                  "mismatched"),
        _glue_zip("QNLI", "QNLIv2.zip", description="GLUE: question-answer entailment"),
        _glue_zip("RTE", description="GLUE: textual entailment"),
        _glue_zip("WNLI", description="GLUE: Winograd NLI"),
        DataSet("AX", "diagnostic", (GLUE_URL + "AX.tsv",), _copy_files_as("diagnostic.tsv"),
                "GLUE: the diagnostic set (test only, predicted with an MNLI model)"),
        DataSet("IMDB", "aclImdb", (IMDB_URL + "aclImdb_v1.tar.gz",),
                lambda paths, target: _unpack_tar_gz(paths[0], target, "aclImdb"),
                "50,000 labelled and 50,000 unlabelled movie reviews (Maas et al. 2011)"),
        DataSet("WNUT17", "wnut17", tuple(WNUT17_URL + name for name in (
            "wnut17train.conll", "emerging.dev.conll", "emerging.test.annotated")),
                _copy_files_as("train.txt", "dev.txt", "test.txt"),
                "NER: WNUT 2017 emerging entities, CoNLL columns, BIO tags of 6 types "
                "(CC-BY 4.0; run_ner.py --data_dir)"),
        DataSet("albert_base_zh", "albert_base_zh", (ALBERT_MODELS_URL + "albert_base_zh.tar.gz",),
                lambda paths, target: _unpack_tar_gz(paths[0], target, None),
                "the official Chinese ALBERT-base: albert_config.json, model.ckpt-best, "
                "vocab_chinese.txt (WordPiece; docs/chinese_and_wordpiece.md)"),
        DataSet("AFQMC", "afqmc_public", (CLUE_URL + "afqmc_public.zip",),
                lambda paths, target: _unpack_zip(paths[0], target, None),
                "CLUE: Chinese question pairs, same meaning or not (train/dev/test.json, JSON "
                "Lines)"),
    )
}
GLUE_TASKS = tuple(name for name in DATA_SETS
                   if name not in ("imdb", "wnut17", "albert_base_zh", "afqmc"))
ALIASES = {"glue": GLUE_TASKS, "sst2": ("sst-2",), "stsb": ("sts-b",),
           "diagnostic": ("ax",)}


def data_sets(names):
  """The DataSets `names` (comma-separated, case-insensitive; "glue" = every GLUE task) name.

  Raises:
    AlbertError: an unknown name (the known ones listed), or none at all.
  """
  chosen = []
  for name in (n.strip() for n in names.split(",")):
    if not name:
      continue
    keys = ALIASES.get(name.lower(), (name.lower(),))
    for key in keys:
      if key not in DATA_SETS:
        raise AlbertError(f"--tasks: unknown data set {name!r}: expected names among "
                          f"{', '.join(d.name for d in DATA_SETS.values())}, or glue (all of "
                          "GLUE)")
      if DATA_SETS[key] not in chosen:
        chosen.append(DATA_SETS[key])
  if not chosen:
    raise AlbertError("--tasks: no data set named")
  return chosen


# ------------------------------------------------------------------------------- downloading
def source_url(url, base_url=None):
  """Where a file is fetched from: its URL, or `base_url` + its file name (a mirror; a local
  directory path is taken as a file:// URL)."""
  if not base_url:
    return url
  if "://" not in base_url:
    base_url = pathlib.Path(base_url).resolve().as_uri()
  return base_url.rstrip("/") + "/" + url.rsplit("/", 1)[1]


def _sha256(path):
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(CHUNK), b""):
      digest.update(block)
  return digest.hexdigest()


def _open(url, offset):
  request = urllib.request.Request(url, headers={"User-Agent": "albert_tf-download_data"})
  if offset:
    request.add_header("Range", f"bytes={offset}-")
  try:
    return urllib.request.urlopen(request, timeout=TIMEOUT_S)  # pylint: disable=consider-using-with
  except urllib.error.HTTPError as e:
    if e.code == 416 and offset:  # the range starts at the end: the partial file is whole
      return None
    raise AlbertError(f"cannot fetch {url}: HTTP {e.code} {e.reason}") from None
  except (urllib.error.URLError, OSError) as e:
    reason = getattr(e, "reason", None) or e
    raise AlbertError(f"cannot fetch {url}: {reason} (offline? with no internet, fetch the "
                      "files elsewhere and pass their directory as --base_url)") from None


def fetch(url, path, sha256=None, log=print):
  """Downloads `url` to `path`, resuming `path.part` when an earlier run left one.

  The file gets its name only when whole: as many bytes as the server announced and, when
  `sha256` is given, that checksum (else the one obtained is printed).
  Raises:
    AlbertError: offline or the server refuses (one line, naming the URL); the transfer ends
      short (the partial file is kept for the next run to resume); the checksum differs (the
      file is deleted).
  """
  partial = path + PARTIAL
  os.makedirs(os.path.dirname(path), exist_ok=True)
  offset = os.path.getsize(partial) if os.path.exists(partial) else 0
  response = _open(url, offset)
  if response is not None:
    with response:
      resumed = offset and getattr(response, "status", None) == 206
      if offset and not resumed:
        offset = 0  # the server sends the whole file: start over
      length = response.headers.get("Content-Length")
      expected = offset + int(length) if length and length.isdigit() else None
      log(f"fetching {url}" + (f" (resuming at byte {offset})" if offset else "")
          + (f": {expected} bytes" if expected else ""))
      received = offset
      # (A full disk is no network error: errors.run_main reports it.)
      try:
        with open(partial, "ab" if offset else "wb") as f:
          for block in iter(lambda: response.read(CHUNK), b""):
            f.write(block)
            received += len(block)
      except (ConnectionError, TimeoutError, http.client.HTTPException,
              urllib.error.URLError) as e:
        raise AlbertError(f"cannot fetch {url}: the transfer stopped at byte {received} ({e}); "
                          "run the command again to resume") from None
    if expected is not None and received != expected:
      raise AlbertError(f"cannot fetch {url}: the transfer ended at byte {received} of "
                        f"{expected}; run the command again to resume")
  got = _sha256(partial)
  if sha256 and got != sha256:
    fileio.remove(partial)
    raise AlbertError(f"{url}: SHA-256 {got} differs from the published {sha256}: deleted "
                      "(a corrupt or different file); run the command again to fetch it anew")
  os.replace(partial, path)
  log(f"  {os.path.basename(path)}: {os.path.getsize(path)} bytes, sha256 {got} "
      + ("(the published one)" if sha256 else "(no published checksum: compare it with the "
         "source's if you need to)"))
  return path


def download(names, data_dir, base_url=None, keep_archives=False, checksums=None, log=print):
  """Fetches the data sets `names` (see `data_sets`) into `data_dir`.

  Args:
    names: comma-separated data set names, e.g. "SST-2,MRPC,IMDB" or "glue".
    data_dir: where `<directory>` of each data set goes (created if missing).
    base_url: a mirror (URL or local directory) holding the files under their own names, instead
      of their public URLs.
    keep_archives: keep the downloaded files in `<data_dir>/.downloads` (default: deleted once
      unpacked).
    checksums: {file name: SHA-256} overriding PUBLISHED_SHA256 (tests).
  Returns:
    {data set name: its directory}, those already there included.
  Raises:
    AlbertError: see `data_sets` and `fetch`; a corrupt archive (deleted, so that a rerun fetches
      it anew).
  """
  chosen = data_sets(names)
  checksums = PUBLISHED_SHA256 if checksums is None else checksums
  os.makedirs(data_dir, exist_ok=True)
  fileio.remove_temporaries(data_dir)  # task directories a killed run was unpacking
  downloads = os.path.join(data_dir, DOWNLOADS)
  done = {}
  for data_set in chosen:
    target = os.path.join(data_dir, data_set.directory)
    done[data_set.name] = target
    if os.path.exists(target):
      log(f"{data_set.name}: {target} is already there, kept (delete it to fetch it again)")
      continue
    paths = []
    for url in data_set.urls:
      name = url.rsplit("/", 1)[1]
      path = os.path.join(downloads, name)
      if not os.path.exists(path):
        fetch(source_url(url, base_url), path, checksums.get(name), log=log)
      paths.append(path)
    try:
      with fileio.atomic_path(target) as temp:
        data_set.unpack(tuple(paths), temp)
    except AlbertError:
      for path in paths:  # unusable (a corrupt archive, an MRPC file of other columns): a rerun
        fileio.remove(path)  # fetches them anew
      raise
    log(f"{data_set.name}: wrote {target} ({', '.join(sorted(os.listdir(target))[:6])})")
    if not keep_archives:
      for path in paths:
        fileio.remove(path)
  if not keep_archives and os.path.isdir(downloads) and not os.listdir(downloads):
    os.rmdir(downloads)
  return done
