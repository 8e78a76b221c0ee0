"""Exports to an object store (issue 59), with TensorFlow's in-memory filesystem (`ram://`, a
fresh bucket per test) standing in for gs://.

* A tiny classifier exported twice to a ram:// base path: two numbered versions, each with its
  saved_model.pb, variables, core_ops/ and warm-up records; loaded from ram:// they give the
  outputs of the same model exported to a local disk, and their warm-up records are the local
  export's.
* Publishing: saved_model.pb is the last file copied into a version; the staging of a killed
  export (this machine, a dead pid) is removed by the next export and never numbered; another
  machine's staging is left alone; a version whose publish was cut short is numbered over and
  skipped; the in-place (TF Hub style) export is replaced in place.
* A run that lost its output lock on the bucket is refused before an export is published.
* The TF Hub style preprocessor written to ram:// (in place, its SentencePiece model an asset)
  gives the local export's token ids.
* The TFLite file written to ram:// gives the Keras model's outputs.

Where ram:// and Cloud Storage differ (a prefix of a file name looks like a directory on ram://;
a directory rename keeps the children only on GCS), fileio's docstring says so; nothing here
renames a directory off the local disk.
"""

import os
import socket
import subprocess
import sys
import uuid

import numpy as np
import pytest
import tensorflow as tf

from ai_edge_litert.interpreter import Interpreter
from albert_tf.common import fileio
from albert_tf.common.export_format import EXPORT_INFO, WARMUP_REQUESTS
from albert_tf.errors import AlbertError
from albert_tf.export import exporters
from albert_tf.export import saved_model_writer
from albert_tf.export.hub_preprocessor import export_preprocessor
from albert_tf.export.tflite import write_tflite
from albert_tf.training import output_lock
from tests.export import test_core_ops_shared as core_ops
from tests.export import test_tflite
from tests.helpers import text as text_helpers

IDENTITY = {"kind": "test_export", "size": 1}
HOST = socket.gethostname()


def _bucket():
  return f"ram://{uuid.uuid4().hex}"


def _fake_export(marker):
  """write_fn of the writer: a directory with variables/ and a saved_model.pb holding `marker`."""
  def write(tmp_dir):
    fileio.makedirs(os.path.join(tmp_dir, "variables"))
    fileio.write_text(os.path.join(tmp_dir, "variables", "variables.index"), "index")
    fileio.write_text(os.path.join(tmp_dir, "saved_model.pb"), marker)
  return write


def _dead_pid():
  """The pid of a process that has exited (and been reaped)."""
  proc = subprocess.Popen([sys.executable, "-c", "pass"])  # pylint: disable=consider-using-with
  proc.wait()
  return proc.pid


# ----------------------------------------------------------------------------- real exports
@pytest.fixture(scope="module")
def exports(tmp_path_factory):
  root = tmp_path_factory.mktemp("remote_export")
  spm = text_helpers.make_tiny_spm_model(str(root / "spm"), vocab_size=core_ops.VOCAB)
  model = core_ops._classifier(3, seed=1)  # pylint: disable=protected-access
  export = lambda base: exporters.export_classifier(model, base, ["a", "b", "c"], 16,
                                                    spm_model_file=spm)
  local = export(str(root / "local"))
  base = f"{_bucket()}/models/classifier"
  remote = [export(base), export(base)]
  return dict(local=local, base=base, remote=remote, spm=spm, root=root)


def test_versions_appear_whole_on_the_bucket(exports):
  base, (first, second) = exports["base"], exports["remote"]
  versions = saved_model_writer.export_versions(base)
  assert [path for _, path in versions] == [first, second] and versions[1][0] > versions[0][0]
  # Only the versions: no staging left, nothing else numbered.
  assert fileio.listdir(base) == [str(version) for version, _ in versions]
  assert saved_model_writer.latest_export(base) == second
  for version in (first, second):
    for name in ("saved_model.pb", "variables/variables.index", EXPORT_INFO, WARMUP_REQUESTS,
                 "core_ops/saved_model.pb", "core_ops/variables/variables.index",
                 f"core_ops/{WARMUP_REQUESTS}"):
      assert fileio.isfile(os.path.join(version, name)), (version, name)
    assert fileio.read_json(os.path.join(version, EXPORT_INFO)) == fileio.read_json(
        os.path.join(exports["local"], EXPORT_INFO))


def test_loaded_from_the_bucket_gives_the_local_exports_outputs(exports):
  features = core_ops._features()  # pylint: disable=protected-access
  for sub in ("", "core_ops"):
    local = tf.saved_model.load(os.path.join(exports["local"], sub))
    remote = tf.saved_model.load(os.path.join(exports["remote"][-1], sub))
    want = local.signatures["token_ids"](**{k: tf.constant(v) for k, v in features.items()})
    got = remote.signatures["token_ids"](**{k: tf.constant(v) for k, v in features.items()})
    assert sorted(got) == sorted(want)
    for key, value in want.items():
      np.testing.assert_array_equal(got[key].numpy(), value.numpy(), err_msg=f"{sub} {key}")


def test_warmup_records_on_the_bucket_are_the_local_exports(exports):
  def records(version, sub=""):
    path = os.path.join(version, sub, WARMUP_REQUESTS)
    return [r.numpy() for r in tf.data.TFRecordDataset(path)]
  for sub in ("", "core_ops"):
    local = records(exports["local"], sub)
    assert local and records(exports["remote"][0], sub) == local, sub


def test_hub_preprocessor_on_the_bucket(exports):
  local = export_preprocessor(str(exports["root"] / "preprocessor"), exports["spm"],
                              seq_length=12)
  remote = export_preprocessor(f"{_bucket()}/hub/preprocessor", exports["spm"], seq_length=12)
  assert fileio.listdir(os.path.dirname(remote)) == ["preprocessor"]  # no staging left
  sentences = tf.constant(["Albert shares parameters across layers.", "Rivers flow."])
  want, got = tf.saved_model.load(local)(sentences), tf.saved_model.load(remote)(sentences)
  assert sorted(got) == sorted(want)
  for key, value in want.items():
    np.testing.assert_array_equal(got[key].numpy(), value.numpy(), err_msg=key)
  assert int(tf.reduce_sum(want["input_mask"])) > 4  # real tokens, not only padding


# ----------------------------------------------------------------------------- publishing
def test_saved_model_pb_is_published_last(monkeypatch):
  base = f"{_bucket()}/base"
  copied = []
  copy = fileio.copy

  def recording_copy(source, target):
    copied.append(target)
    copy(source, target)

  monkeypatch.setattr(fileio, "copy", recording_copy)
  version = saved_model_writer.write_new_version(base, IDENTITY, _fake_export("v1"))
  into_version = [path for path in copied if path.startswith(version + "/")]
  assert len(into_version) == 3  # variables.index, the export info, saved_model.pb
  assert into_version[-1] == os.path.join(version, "saved_model.pb")


def test_a_killed_exports_staging_is_removed_and_never_numbered(caplog):
  base = f"{_bucket()}/base"
  first = saved_model_writer.write_new_version(base, IDENTITY, _fake_export("v1"))
  # What an export killed on this machine leaves: its staging (and its assets' staging), and
  # one killed on another machine, which may still be running there.
  dead = _dead_pid()
  ours = f"new_version@{HOST}.tmp-{dead}"
  others = f"new_version@elsewhere.tmp-{dead}"
  for staging in (ours, others):
    fileio.copytree(first, os.path.join(base, staging))
  fileio.makedirs(os.path.join(base, ours + "-assets"))
  # And a version whose publish was cut short: files, but no saved_model.pb yet.
  broken = os.path.join(base, str(int(first.rsplit("/", 1)[1]) + 1))
  fileio.copytree(os.path.join(first, "variables"), os.path.join(broken, "variables"))
  assert saved_model_writer.latest_export(base) == first

  second = saved_model_writer.write_new_version(base, IDENTITY, _fake_export("v2"))
  versions = [path for _, path in saved_model_writer.export_versions(base)]
  assert versions == [first, broken, second]  # numbered above the broken one
  assert fileio.read_text(os.path.join(second, "saved_model.pb")) == "v2"
  assert fileio.listdir(base) == sorted([os.path.basename(p) for p in versions] + [others])
  assert f"{broken} has no saved_model.pb" in caplog.text


def test_in_place_export_is_replaced_on_the_bucket():
  target = f"{_bucket()}/hub/encoder"
  saved_model_writer.write_atomically(target, IDENTITY, _fake_export("old"))
  saved_model_writer.write_atomically(target, IDENTITY, _fake_export("new"))
  assert fileio.read_text(os.path.join(target, "saved_model.pb")) == "new"
  assert fileio.listdir(os.path.dirname(target)) == ["encoder"]
  with pytest.raises(AlbertError, match="already holds a different model"):
    saved_model_writer.write_atomically(target, dict(IDENTITY, size=2), _fake_export("x"))
  with pytest.raises(RuntimeError, match="disk full"):
    saved_model_writer.write_atomically(target, IDENTITY, _crash("disk full"))
  assert fileio.read_text(os.path.join(target, "saved_model.pb")) == "new"
  assert fileio.listdir(os.path.dirname(target)) == ["encoder"]


def _crash(message):
  def write(tmp_dir):
    _fake_export("partial")(tmp_dir)
    raise RuntimeError(message)
  return write


def test_a_run_that_lost_its_lock_publishes_no_version(monkeypatch):
  monkeypatch.setattr(output_lock, "OBJECT_STORE_SETTLE_SECONDS", 0.05)
  out = f"{_bucket()}/out"
  base = os.path.join(out, "export")
  with pytest.raises(AlbertError, match=r"this run no longer holds its lock .* \(it is now held "
                                        r"by pid 77 on host h2 "):
    with output_lock.hold(out) as lock:
      rival = dict(lock.record, host="h2", boot_id="b2", pid=77, token=uuid.uuid4().hex)
      fileio.write_json(lock.path, rival)
      saved_model_writer.write_new_version(base, IDENTITY, _fake_export("v1"))
  assert saved_model_writer.export_versions(base) == []
  assert [name for name in fileio.listdir(base) if "tmp" in name] == []


# ----------------------------------------------------------------------------- TFLite
def test_tflite_file_on_the_bucket():
  model = test_tflite.make_model("classifier")
  path = write_tflite(model, f"{_bucket()}/export/albert_model.tflite", test_tflite.SEQ)
  inputs = test_tflite.make_inputs([1, test_tflite.SEQ], with_p_mask=False)
  runner = Interpreter(model_content=fileio.read_bytes(path)).get_signature_runner(
      "serving_default")
  got = runner(**inputs)
  for key, value in model(inputs, training=False).items():
    np.testing.assert_allclose(got[key], value.numpy(), atol=test_tflite.FP32_TOLERANCE)
  assert fileio.listdir(os.path.dirname(path)) == ["albert_model.tflite"]
