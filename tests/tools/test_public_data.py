"""`python -m albert_tf.cli.download_data` (albert_tf/tools/public_data.py) without a network: the
files come from tiny archives built here, served from a local directory (--base_url) or by a
local HTTP server thread that can cut a transfer short and answers range requests. Nothing is
downloaded."""

import functools
import hashlib
import http.server
import io
import os
import subprocess
import sys
import tarfile
import threading
import zipfile

import pytest

from albert_tf.errors import AlbertError
from albert_tf.tools import public_data
from tests.helpers.paths import REPO

SST2_FILES = {"train.tsv": "sentence\tlabel\na fine film\t1\na dull film\t0\n",
              "dev.tsv": "sentence\tlabel\ngood\t1\n",
              "test.tsv": "index\tsentence\n0\tbad\n"}
MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
MRPC_TRAIN = MRPC_HEADER + "1\t10\t11\tA cat sat.\tThe cat sat.\n0\t20\t21\tIt rains.\tIt is dry.\n" \
    "1\t30\t31\tHe left.\tHe went away.\n"
MRPC_TEST = MRPC_HEADER + "1\t40\t41\tShe sang.\tShe was singing.\n0\t50\t51\tUp.\tDown.\n"
MRPC_DEV_IDS = "20\t21\n"
REVIEW = "An unlabelled review of a film.\n"


def _zip(files, folder):
  buffer = io.BytesIO()
  with zipfile.ZipFile(buffer, "w") as archive:
    for name, text in files.items():
      archive.writestr(f"{folder}/{name}", text)
  return buffer.getvalue()


def _tar_gz(files):
  buffer = io.BytesIO()
  with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
    for name, text in files.items():
      data = text.encode()
      info = tarfile.TarInfo(name)
      info.size = len(data)
      archive.addfile(info, io.BytesIO(data))
  return buffer.getvalue()


IMDB = _tar_gz({"aclImdb/README": "Large Movie Review Dataset\n",
                "aclImdb/train/unsup/0_0.txt": REVIEW * 200})


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
  """A directory holding the files under their public names (a --base_url mirror)."""
  root = tmp_path_factory.mktemp("mirror")
  files = {"SST-2.zip": _zip(SST2_FILES, "SST-2"), "msr_paraphrase_train.txt": MRPC_TRAIN.encode(),
           "msr_paraphrase_test.txt": MRPC_TEST.encode(), "mrpc_dev_ids.tsv": MRPC_DEV_IDS.encode(),
           "aclImdb_v1.tar.gz": IMDB, "CoLA.zip": _zip({"train.tsv": "x"}, "CoLA")[:-30]}
  for name, data in files.items():
    (root / name).write_bytes(data)
  return root


def test_command_fetches_glue_tasks_as_run_classifier_reads_them(mirror, tmp_path):
  """The real command, from a file mirror: SST-2 unzipped, MRPC built as download_glue_data.py
  builds it (GLUE's dev pairs cut out of the training file), both read by our GLUE reader."""
  data_dir = tmp_path / "glue_data"
  env = dict(os.environ, PYTHONPATH=REPO)
  result = subprocess.run(
      [sys.executable, "-m", "albert_tf.cli.download_data", f"--data_dir={data_dir}",
       "--tasks=sst-2,MRPC", f"--base_url={mirror}"],
      capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  for name, text in SST2_FILES.items():
    assert (data_dir / "SST-2" / name).read_text() == text
  sha = hashlib.sha256((mirror / "SST-2.zip").read_bytes()).hexdigest()
  assert f"SST-2.zip: {len((mirror / 'SST-2.zip').read_bytes())} bytes, sha256 {sha} (no " \
         "published checksum" in result.stdout
  assert (data_dir / "MRPC" / "dev.tsv").read_text() == \
      MRPC_HEADER + "0\t20\t21\tIt rains.\tIt is dry.\n"
  assert (data_dir / "MRPC" / "test.tsv").read_text() == (
      "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
      "0\t40\t41\tShe sang.\tShe was singing.\n1\t50\t51\tUp.\tDown.\n")
  assert sorted(os.listdir(data_dir)) == ["MRPC", "SST-2"]  # no downloads, no temporaries left
  from albert_tf.data import glue  # pylint: disable=g-import-not-at-top
  train = glue.get_task("mrpc").read_examples(str(data_dir), "train")
  assert [(e.text_a, e.label) for e in train] == [("A cat sat.", "1"), ("He left.", "1")]
  assert len(glue.get_task("sst-2").read_examples(str(data_dir), "train")) == 2
  # Asked again, what is there is kept: nothing fetched (from a server that is not there).
  lines = []
  public_data.download("SST-2", str(data_dir), base_url="http://127.0.0.1:9", log=lines.append)
  assert lines == [f"SST-2: {data_dir / 'SST-2'} is already there, kept (delete it to fetch it "
                   "again)"]
  # An unknown name: the one line of bad input.
  again = subprocess.run(
      [sys.executable, "-m", "albert_tf.cli.download_data", f"--data_dir={data_dir}",
       "--tasks=SST-2,nope", f"--base_url={mirror}"],
      capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False)
  assert again.returncode == 2
  assert again.stderr.strip().splitlines() == [
      "error: --tasks: unknown data set 'nope': expected names among CoLA, SST-2, MRPC, QQP, "
      "STS-B, MNLI, QNLI, RTE, WNLI, AX, IMDB, WNUT17, albert_base_zh, AFQMC, or glue (all of "
      "GLUE)"]


def _quiet(*args):
  del args


class _Server(http.server.SimpleHTTPRequestHandler):
  """Serves `files` ({path: bytes}); answers `Range: bytes=N-` with 206, and cuts the first
  `cut[path]` transfers short after half the bytes (announcing them all)."""

  def __init__(self, *args, files=None, cut=None, seen=None, **kwargs):
    self.files, self.cut, self.seen = files, cut, seen
    super().__init__(*args, **kwargs)

  def log_message(self, *args):  # pylint: disable=arguments-differ
    del args

  def do_GET(self):  # pylint: disable=invalid-name
    data = self.files.get(self.path)
    self.seen.append((self.path, self.headers.get("Range")))
    if data is None:
      self.send_error(404)
      return
    start = 0
    if self.headers.get("Range"):
      start = int(self.headers["Range"].split("=")[1].rstrip("-"))
      self.send_response(206)
    else:
      self.send_response(200)
    body = data[start:]
    self.send_header("Content-Length", str(len(body)))
    self.end_headers()
    if self.cut.get(self.path, 0) > 0:
      self.cut[self.path] -= 1
      body = body[:len(body) // 2]
      self.close_connection = True
    self.wfile.write(body)


@pytest.fixture
def server():
  state = dict(files={}, cut={}, seen=[])
  handler = functools.partial(_Server, files=state["files"], cut=state["cut"], seen=state["seen"])
  httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
  thread = threading.Thread(target=httpd.serve_forever, kwargs=dict(poll_interval=0.05),
                            daemon=True)
  thread.start()
  state["url"] = f"http://127.0.0.1:{httpd.server_address[1]}"
  yield state
  httpd.shutdown()
  httpd.server_close()


def test_cut_transfer_resumes_and_unpacks_imdb(server, tmp_path):
  server["files"]["/aclImdb_v1.tar.gz"] = IMDB
  server["cut"]["/aclImdb_v1.tar.gz"] = 1
  sha = hashlib.sha256(IMDB).hexdigest()
  data_dir = str(tmp_path / "data")
  # What a run killed while unpacking leaves (fileio.atomic_path's temporary of a dead process).
  os.makedirs(os.path.join(data_dir, "aclImdb.tmp-999999999", "train"))
  with pytest.raises(AlbertError, match=r"aclImdb_v1\.tar\.gz: the transfer ended at byte \d+ "
                     rf"of {len(IMDB)}; run the command again to resume"):
    public_data.download("IMDB", data_dir, base_url=server["url"], log=_quiet,
                         checksums={"aclImdb_v1.tar.gz": sha})
  partial = os.path.join(data_dir, ".downloads", "aclImdb_v1.tar.gz.part")
  assert 0 < os.path.getsize(partial) < len(IMDB)
  assert not os.path.exists(os.path.join(data_dir, "aclImdb"))
  done = public_data.download("imdb", data_dir, base_url=server["url"], log=_quiet,
                              checksums={"aclImdb_v1.tar.gz": sha})
  assert done == {"IMDB": os.path.join(data_dir, "aclImdb")}
  assert server["seen"][-1] == ("/aclImdb_v1.tar.gz", f"bytes={len(IMDB) // 2}-")
  with open(os.path.join(data_dir, "aclImdb", "train", "unsup", "0_0.txt")) as f:
    assert f.read() == REVIEW * 200
  assert sorted(os.listdir(data_dir)) == ["aclImdb"]


def _assert_left_nothing(data_dir, kept=()):
  assert sorted(os.listdir(data_dir)) == sorted(kept), os.listdir(data_dir)


def test_bad_downloads_are_errors_that_leave_nothing_complete(mirror, server, tmp_path):
  data_dir = str(tmp_path / "data")
  # The published SHA-256 of aclImdb_v1.tar.gz is not this tiny archive's: deleted.
  with pytest.raises(AlbertError, match=r"aclImdb_v1\.tar\.gz: SHA-256 [0-9a-f]{64} differs "
                     r"from the published c40f74a1[0-9a-f]{56}: deleted"):
    public_data.download("IMDB", data_dir, base_url=str(mirror), log=_quiet)
  _assert_left_nothing(data_dir, [".downloads"])
  assert os.listdir(os.path.join(data_dir, ".downloads")) == []
  # A truncated zip (the mirror's CoLA.zip lost its last 30 bytes): refused before unpacking.
  with pytest.raises(AlbertError, match=r"CoLA\.zip: not a readable zip archive \(.*\): deleted; "
                     "run the command again"):
    public_data.download("CoLA", data_dir, base_url=str(mirror), log=_quiet)
  # A truncated tar.gz (whose checksum nobody published).
  server["files"]["/aclImdb_v1.tar.gz"] = IMDB[:len(IMDB) // 2]
  with pytest.raises(AlbertError, match=r"aclImdb_v1\.tar\.gz: not a readable tar\.gz archive"):
    public_data.download("IMDB", data_dir, base_url=server["url"], log=_quiet, checksums={})
  # An archive that is not the task's.
  server["files"]["/RTE.zip"] = _zip({"train.tsv": "x"}, "Other")
  with pytest.raises(AlbertError, match=r"RTE\.zip: holds no RTE/ \(found Other/train\.tsv\): "
                     "not the expected archive: deleted"):
    public_data.download("RTE", data_dir, base_url=server["url"], log=_quiet)
  # An MRPC file of other columns: its line named, the three files deleted (fetched anew next).
  server["files"].update({"/msr_paraphrase_train.txt": (MRPC_HEADER + "1\t10\tA.\tB.\n").encode(),
                          "/msr_paraphrase_test.txt": MRPC_TEST.encode(),
                          "/mrpc_dev_ids.tsv": MRPC_DEV_IDS.encode()})
  with pytest.raises(AlbertError, match=r"msr_paraphrase_train\.txt:2: 4 tab-separated fields, "
                     r"expected 5 \(label, #1 ID, #2 ID, #1 String, #2 String\)$"):
    public_data.download("MRPC", data_dir, base_url=server["url"], log=_quiet)
  # A file the server does not have.
  with pytest.raises(AlbertError, match=rf"^cannot fetch {server['url']}/WNLI\.zip: HTTP 404 "):
    public_data.download("WNLI", data_dir, base_url=server["url"], log=_quiet)
  _assert_left_nothing(data_dir, [".downloads"])
  assert os.listdir(os.path.join(data_dir, ".downloads")) == []


def test_offline_and_unknown_names_are_one_line_errors(tmp_path):
  import socket  # pylint: disable=g-import-not-at-top
  with socket.socket() as s:  # a port nothing listens on: as a machine without network
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  with pytest.raises(AlbertError) as e:
    public_data.download("SST-2", str(tmp_path), base_url=f"http://127.0.0.1:{port}", log=_quiet)
  assert str(e.value).startswith(f"cannot fetch http://127.0.0.1:{port}/SST-2.zip: ")
  assert str(e.value).endswith("(offline? with no internet, fetch the files elsewhere and pass "
                               "their directory as --base_url)")
  assert "\n" not in str(e.value)
  for names in ("SST-3", ",", "glue,imdb,x"):
    with pytest.raises(AlbertError, match="^--tasks: "):
      public_data.data_sets(names)
  assert [d.name for d in public_data.data_sets("glue,IMDB,sst2")] == [
      "CoLA", "SST-2", "MRPC", "QQP", "STS-B", "MNLI", "QNLI", "RTE", "WNLI", "AX", "IMDB"]
  # The public URLs, and what a mirror serves instead.
  assert [d.urls for d in public_data.data_sets("SST-2,IMDB")] == [
      ("https://dl.fbaipublicfiles.com/glue/data/SST-2.zip",),
      ("https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",)]
  assert public_data.source_url("https://dl.fbaipublicfiles.com/glue/data/QNLIv2.zip",
                                "http://mirror/glue/") == "http://mirror/glue/QNLIv2.zip"


def test_wnut17_lands_as_run_ners_data_dir(tmp_path):
  """The WNUT 2017 files (from a local mirror: no network in tests) become
  wnut17/{train,dev,test}.txt, which run_ner.py's reader takes as they are."""
  from albert_tf.data import tagged_files  # pylint: disable=g-import-not-at-top
  mirror = tmp_path / "mirror"
  mirror.mkdir()
  for name, words in (("wnut17train.conll", "@paul\tO\nLondon\tB-location\n\nok\tO\n"),
                      ("emerging.dev.conll", "Kanye\tB-person\nWest\tI-person\n"),
                      ("emerging.test.annotated", "the\tO\nNBA\tB-group\n")):
    (mirror / name).write_text(words, encoding="utf-8")
  done = public_data.download("wnut17", str(tmp_path / "data"), base_url=str(mirror), log=_quiet)
  assert done == {"WNUT17": str(tmp_path / "data" / "wnut17")}
  train = tagged_files.read_tagged_file(str(tmp_path / "data" / "wnut17" / "train.txt"), "BIO")
  assert [s.words for s in train] == [["@paul", "London"], ["ok"]]
  assert sorted(os.listdir(tmp_path / "data" / "wnut17")) == ["dev.txt", "test.txt", "train.txt"]
  assert "wnut17" not in public_data.GLUE_TASKS


def test_chinese_model_and_clue_archives_unpack_whatever_their_top_directory(tmp_path):
  """albert_base_zh.tar.gz and CLUE's afqmc_public.zip: files under one top directory, or at
  the archive's top, both land in the data set's directory."""
  # pylint: disable=protected-access
  tar_path = tmp_path / "albert_base_zh.tar.gz"
  with tarfile.open(tar_path, "w:gz") as archive:
    for name, data in (("albert_base/vocab_chinese.txt", b"[UNK]\n"),
                       ("albert_base/albert_config.json", b"{}")):
      info = tarfile.TarInfo(name)
      info.size = len(data)
      archive.addfile(info, io.BytesIO(data))
  public_data._unpack_tar_gz(str(tar_path), str(tmp_path / "zh"), None)
  assert sorted(os.listdir(tmp_path / "zh")) == ["albert_config.json", "vocab_chinese.txt"]
  zip_path = tmp_path / "afqmc_public.zip"
  with zipfile.ZipFile(zip_path, "w") as archive:
    for split in ("train", "dev", "test"):
      archive.writestr(f"{split}.json", '{"sentence1": "a"}\n')
  public_data._unpack_zip(str(zip_path), str(tmp_path / "afqmc"), None)
  assert sorted(os.listdir(tmp_path / "afqmc")) == ["dev.json", "test.json", "train.json"]
  assert public_data.DATA_SETS["afqmc"].directory == "afqmc_public"
