"""Nothing wrong used silently, round five (issue 52), through the real scripts:

* a diverged run (--learning_rate=1000) names as its last good checkpoint one from which the
  advised rerun (a lower --learning_rate) goes on to the end; the checkpoint whose weights gave
  the NaN is set aside; a directory that still holds such a checkpoint (written before) is
  evaluated without it (a warning, no NaN in eval_results.txt), and --do_predict / --export_dir
  refuse it in one line naming it;
* a config file without a required field is one error line naming the file and the field; a
  misspelt key is a warning naming the closest known one;
* exports started together into one --export_dir each get a whole version of their own;
* a byte that is not UTF-8 is reported with its file, line and column.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from tests.helpers import finetune
from tests.helpers.paths import REPO
from tests.helpers.scripts import describe, last_line, run_script
from tests.helpers.tiny_config import tiny_config_dict

STEPS = 12  # --learning_rate=1000 diverges at step 8 (seeded)


def _mrpc_flags(setup, output_dir, *extra):
  return ["--task_name=MRPC", f"--data_dir={setup['root']}/glue", f"--output_dir={output_dir}",
          f"--albert_config_file={setup['config']}", f"--spm_model_file={setup['spm']}",
          "--max_seq_length=32", "--train_batch_size=4", f"--train_step={STEPS}",
          "--warmup_step=0", "--save_checkpoints_steps=1",
          "--eval_batch_size=4", "--predict_batch_size=4"] + list(extra)


def _one_line_error(proc):
  assert proc.returncode == 2, describe(proc)
  assert "Traceback" not in proc.stderr, describe(proc)
  line = last_line(proc.stderr)
  assert line.startswith("error: "), describe(proc)
  return line


# ------------------------------------------------------------------------------ divergence
@pytest.fixture(scope="module")
def diverged(tmp_path_factory):
  """A run with --learning_rate=1000 that diverges; a copy of its output dir as a run before
  issue 52 left it (the checkpoint that gave the NaN still in place); then the advised rerun."""
  root = tmp_path_factory.mktemp("diverged")
  setup = finetune.mrpc_setup(str(root))
  out = root / "run"
  first = run_script("run_classifier.py", _mrpc_flags(setup, out, "--do_train",
                                                       "--learning_rate=1000"), str(root))
  # The layout a diverged run left before issue 52: the checkpoint that gave the NaN in place
  # (with the one before it: a sweep of two).
  old = root / "old"
  shutil.copytree(out, old, ignore=shutil.ignore_patterns("ckpt-*", "checkpoint", "train*"))
  bad = next((out / "diverged_checkpoints").glob("*.index")).name[:-len(".index")]
  before = f"ckpt-{int(bad[5:]) - 1}"
  for path in list((out / "diverged_checkpoints").iterdir()) + list(out.glob(before + ".*")):
    shutil.copy(path, old / path.name)
  shutil.rmtree(old / "diverged_checkpoints")
  rerun = run_script("run_classifier.py", _mrpc_flags(setup, out, "--do_train",
                                                      "--learning_rate=0.001"), str(root))
  return dict(setup=setup, root=root, out=out, old=old, first=first, rerun=rerun)


def test_diverged_run_names_a_checkpoint_the_advised_rerun_goes_on_from(diverged):
  line = _one_line_error(diverged["first"])
  out = diverged["out"]
  match = re.fullmatch(r"error: non-finite loss at step (\d+); stopped; its starting weights "
                       rf"{re.escape(str(out))}/ckpt-(\d+) moved to {re.escape(str(out))}/"
                       r"diverged_checkpoints/; last good checkpoint: (\S+): run again with a "
                       r"lower --learning_rate \(or --precision fp32\) to resume from it", line)
  assert match, line
  bad_step, moved, good = int(match[1]), int(match[2]), match[3]
  assert moved == bad_step - 1 and 2 < bad_step < STEPS, line
  assert good == f"{out}/ckpt-{bad_step - 2}"
  rerun = diverged["rerun"]
  assert rerun.returncode == 0, describe(rerun)
  assert f"Resuming from {good} at step {bad_step - 2}" in rerun.stderr + rerun.stdout
  assert f"step {STEPS}/{STEPS}" in rerun.stderr + rerun.stdout


def test_eval_of_a_diverged_directory_skips_the_bad_checkpoint(diverged, tmp_path):
  old, setup = tmp_path / "old", diverged["setup"]
  shutil.copytree(diverged["old"], old)  # (the other tests need it without a model.ckpt-best)
  bad = max(int(p.name[5:-6]) for p in old.glob("ckpt-*.index"))
  proc = run_script("run_classifier.py", _mrpc_flags(setup, old, "--do_eval"), str(tmp_path))
  assert proc.returncode == 0, describe(proc)
  assert re.search(rf"warning: {re.escape(str(old))}/ckpt-{bad}: evaluation gave loss = nan: a "
                   r"diverged run's weights, not reported as a result", proc.stderr), proc.stderr
  results = (old / "eval_results.txt").read_text()
  assert "nan" not in results.lower() and f"global_step = {bad}\n" not in results, results
  assert "best_checkpoint = " in results and f"ckpt-{bad}\n" not in results


@pytest.mark.parametrize("mode", ["--do_predict", "--export_dir"])
def test_predict_and_export_refuse_the_diverged_checkpoint(diverged, mode, tmp_path):
  old, setup = diverged["old"], diverged["setup"]
  bad = max(int(p.name[5:-6]) for p in old.glob("ckpt-*.index"))
  flag = f"--export_dir={tmp_path / 'export'}" if mode == "--export_dir" else mode
  line = _one_line_error(run_script("run_classifier.py", _mrpc_flags(setup, old, flag),
                                    str(tmp_path)))
  assert line.startswith(f"error: {old}/ckpt-{bad}: ") and "NaN/inf" in line, line
  assert not (tmp_path / "export").exists()
  assert not (old / "test_results.tsv").exists()


# ------------------------------------------------------------------------------ configs
def test_config_without_a_required_field_and_with_a_misspelt_key(tmp_path):
  config = tiny_config_dict()
  config["hidden_sizee"] = config.pop("hidden_size")
  del config["vocab_size"]
  path = tmp_path / "albert_config.json"
  path.write_text(json.dumps(config), encoding="utf-8")
  proc = run_script("run_pretraining.py", [
      f"--albert_config_file={path}", f"--input_file={tmp_path / 'none-*.tfrecord'}",
      f"--output_dir={tmp_path / 'out'}"], str(tmp_path))
  line = _one_line_error(proc)
  assert line.startswith(f"error: {path}: no vocab_size: "), line
  assert (f"warning: {path}: unknown key 'hidden_sizee' (did you mean 'hidden_size'?); it is "
          f"ignored") in proc.stderr.splitlines(), proc.stderr
  assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------ exports
_WRITER = """
import glob, os, sys, time
from albert_tf.export import saved_model_writer
base, start, marker = sys.argv[1], sys.argv[2], sys.argv[3]
def write(tmp_dir):
  os.makedirs(tmp_dir)
  time.sleep(0.3)  # every process has chosen its version by now, were it chosen up front
  with open(os.path.join(tmp_dir, "saved_model.pb"), "w") as f:
    f.write(marker)
if start == "with-the-script":  # once run_classifier.py's export is being written
  deadline = time.time() + 240
  while not glob.glob(os.path.join(base, "*.tmp-*")) and time.time() < deadline:
    time.sleep(0.05)
else:  # at an agreed moment
  time.sleep(max(0.0, float(start) - time.time()))
print(saved_model_writer.write_new_version(base, {"kind": "test_export"}, write))
"""


def _started_together(commands, cwd):
  """Runs `commands` at once; returns [(process, stdout, stderr)]."""
  env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2")
  procs = [subprocess.Popen(command, cwd=str(cwd), env=env, stdout=subprocess.PIPE,  # pylint: disable=consider-using-with
                            stderr=subprocess.PIPE, text=True) for command in commands]
  return [(p,) + p.communicate(timeout=300) for p in procs]


def _versions(base):
  return sorted(int(name) for name in os.listdir(base) if name.isdigit())


def _writers(base, start, count):
  return [[sys.executable, "-c", _WRITER, str(base), str(start), f"m{i}"] for i in range(count)]


def _check_clean(results):
  for proc, _, stderr in results:
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr[-2000:]


def test_exports_at_the_same_moment_each_get_a_whole_version(tmp_path):
  """Three writers choosing their version in the same second (as two retried CI jobs did)."""
  base = tmp_path / "export"
  results = _started_together(_writers(base, time.time() + 8, 3), tmp_path)  # (after imports)
  _check_clean(results)
  written = {os.path.basename(out.strip()) for _, out, _ in results}
  versions = _versions(base)
  assert sorted(written) == [str(v) for v in versions] and len(versions) == 3
  assert sorted((base / str(v) / "saved_model.pb").read_text() for v in versions) == [
      "m0", "m1", "m2"]
  assert sorted(os.listdir(base)) == sorted(written)  # no temporary left


def test_run_classifier_export_while_others_export_into_its_export_dir(diverged, tmp_path):
  """Through the real script: two exports finish while run_classifier.py writes its own; each
  is a whole version, numbered in the order they finished."""
  base = tmp_path / "export"
  out = tmp_path / "run"  # (a copy: the other tests read the resumed run's directory)
  shutil.copytree(diverged["out"], out, ignore=shutil.ignore_patterns("*.tf_record*"))
  script = [sys.executable, os.path.join(REPO, "run_classifier.py")] + _mrpc_flags(
      diverged["setup"], out, f"--export_dir={base}")
  results = _started_together([script] + _writers(base, "with-the-script", 2), tmp_path)
  _check_clean(results)
  versions = _versions(base)
  assert len(versions) == 3, os.listdir(base)
  ours = base / str(versions[-1])  # it finished last: the writers started while it wrote
  assert "test_export" not in (ours / "assets.extra" / "albert_export.json").read_text()
  assert (ours / "saved_model.pb").stat().st_size > 1000
  assert sorted((base / str(v) / "saved_model.pb").read_text() for v in versions[:2]) == [
      "m0", "m1"]
  assert sorted(os.listdir(base)) == sorted([str(v) for v in versions] +
                                            ["albert_model.tflite"])


# ------------------------------------------------------------------------------ UTF-8
@pytest.fixture(scope="module")
def latin1_inputs(tmp_path_factory):
  root = tmp_path_factory.mktemp("latin1")
  setup = finetune.mrpc_setup(str(root))
  train = root / "glue" / "MRPC" / "train.tsv"
  lines = train.read_bytes().split(b"\n")
  fields = lines[4].split(b"\t")
  fields[3] = b"caf\xe9 " + fields[3]  # Latin-1 e-acute in the first sentence of line 5
  lines[4] = b"\t".join(fields)
  train.write_bytes(b"\n".join(lines))
  offset = len(b"\n".join(lines[:4])) + 1 + len(b"\t".join(fields[:3])) + 1 + 3
  column = len(b"\t".join(fields[:3]).decode()) + 1 + 3 + 1
  corpus = root / "corpus.txt"
  corpus.write_bytes(b"First sentence here.\nSecond one.\n\nThe caf\xe9 is open.\nLast.\n")
  return dict(setup=setup, root=root, train=train, offset=offset, column=column, corpus=corpus)


def test_glue_file_not_utf8_names_line_and_column(latin1_inputs):
  i = latin1_inputs
  line = _one_line_error(run_script("run_classifier.py", _mrpc_flags(
      i["setup"], i["root"] / "out", "--do_train"), str(i["root"])))
  assert line == (f"error: {i['train']}: line 5, column {i['column']}: not UTF-8 text (invalid "
                  f"continuation byte 0xe9 at byte offset {i['offset']}; saved as Latin-1 or "
                  f"Windows-1252? re-save it as UTF-8)"), line


def test_corpus_not_utf8_names_line_and_column(latin1_inputs):
  """make_pair_task (create_pretraining_data's corpora: tests/data/pretraining/test_creation.py
  test_invalid_utf8_stops_or_skips; RACE, SQuAD and custom files share albert_tf/common/utf8.py:
  tests/test_utf8.py)."""
  i = latin1_inputs
  proc = subprocess.run([sys.executable, "-m", "albert_tf.cli.make_pair_task",
                         f"--input_file={i['corpus']}", f"--output_dir={i['root'] / 'pairs'}"],
                        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
                        env=dict(os.environ, PYTHONPATH=REPO))
  line = _one_line_error(proc)
  assert line == (f"error: {i['corpus']}: line 4, column 8: not UTF-8 text (invalid "
                  f"continuation byte 0xe9 at byte offset 41; saved as Latin-1 or Windows-1252? "
                  f"re-save it as UTF-8)"), line
  assert not (i["root"] / "pairs").exists()
