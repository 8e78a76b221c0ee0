"""The documented command paths run their cli modules: `python -m albert_tf.tools.<tool>` and
export_savedmodel.py do the work, and a missing flag is one `error:` line with exit status 2."""

import os
import subprocess
import sys

import pytest

from tests.helpers.paths import REPO


def _run(args, cwd):
  return subprocess.run([sys.executable] + list(args), capture_output=True, text=True, cwd=cwd,
                        timeout=300, check=False,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO))


def test_make_pair_task_and_build_corpus_commands(tmp_path):
  corpus = tmp_path / "corpus.txt"
  done = _run(["-m", "albert_tf.tools.build_corpus", f"--output_file={corpus}",
               "--max_mb=0.02"], tmp_path)
  assert done.returncode == 0, done.stderr[-2000:]
  assert "MB of docstring sentences" in done.stdout
  assert 0 < corpus.stat().st_size <= 20_000
  done = _run(["-m", "albert_tf.tools.make_pair_task", f"--input_file={corpus}",
               f"--output_dir={tmp_path / 'MRPC'}", "--num_train=6", "--num_dev=4",
               "--num_test=2"], tmp_path)
  assert done.returncode == 0, done.stderr[-2000:]
  rows = {split: (tmp_path / "MRPC" / f"{split}.tsv").read_text().splitlines()
          for split in ("train", "dev", "test")}
  assert {split: len(lines) - 1 for split, lines in rows.items()} == dict(train=6, dev=4,
                                                                           test=2)


@pytest.mark.parametrize("args, message", [
    (["-m", "albert_tf.tools.make_pair_task", "--input_file=corpus.txt"],
     "error: --output_dir is required"),
    (["-m", "albert_tf.tools.train_spm", "--model_prefix=spm"], "error: --input_file is required"),
    ([os.path.join(REPO, "export_savedmodel.py"), "--albert_directory=albert_base"],
     "error: --export_path (or --export_dir) is required"),
])
def test_missing_flag_is_one_error_line(tmp_path, args, message):
  done = _run(args, tmp_path)
  assert done.returncode == 2
  assert "Traceback" not in done.stderr
  assert done.stderr.strip().splitlines()[-1] == message
