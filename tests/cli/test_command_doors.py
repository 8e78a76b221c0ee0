"""One door per command: each command runs only as `python -m albert_tf.cli.<command>` (its flags,
main and `__main__` block in albert_tf/cli/<command>.py), and export_savedmodel.py is the export's.
Through that door --help lists the command's flags with no TensorFlow log line, a bad flag or a
missing one is one `error:` line with exit status 2, and the older paths (the shims under
albert_tf/tools/ and albert_tf/checkpoints/, albert_tf/convert_checkpoint.py) are gone."""

import ast
import importlib.util
import os
import subprocess
import sys

import pytest

from tests.helpers.paths import REPO

# command -> a flag only it defines (its --help must list it).
COMMANDS = {
    "convert": "--input_checkpoint",
    "build_corpus": "--max_mb",
    "download_data": "--base_url",
    "make_pair_task": "--pair_kind",
    "query_savedmodel": "--pair_file",
    "train_spm": "--model_prefix",
}

# The doors these commands had before, which must not open any more.
OLD_DOORS = ("albert_tf.checkpoints.convert", "albert_tf.convert_checkpoint",
             "albert_tf.tools.build_corpus", "albert_tf.tools.make_pair_task",
             "albert_tf.tools.query_savedmodel", "albert_tf.tools.train_spm")


def _is_main_guard(node):
  return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
          and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"
          and [getattr(c, "value", None) for c in node.test.comparators] == ["__main__"])


def _run(args, cwd, quiet_env=True):
  env = dict(os.environ, PYTHONPATH=REPO)
  if quiet_env:
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
  else:  # the command itself must quiet TensorFlow (console.quiet_startup before the import)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
  return subprocess.run([sys.executable] + list(args), capture_output=True, text=True, cwd=cwd,
                        timeout=300, check=False, env=env)


def test_every_cli_command_is_listed_here():
  cli = os.path.join(REPO, "albert_tf", "cli")
  with_main = []
  for name in sorted(os.listdir(cli)):
    if name.endswith(".py"):
      with open(os.path.join(cli, name), encoding="utf-8") as f:
        tree = ast.parse(f.read())
      if any(_is_main_guard(node) for node in tree.body):
        with_main.append(name[:-len(".py")])
  assert with_main == sorted(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_and_a_bad_flag_through_the_one_door(tmp_path, command):
  done = _run(["-m", f"albert_tf.cli.{command}", "--help"], tmp_path, quiet_env=False)
  assert "Traceback" not in done.stderr, done.stderr[-2000:]
  assert f"`python -m albert_tf.cli.{command}`" in done.stdout  # the module's docstring
  assert f"  {COMMANDS[command]}:" in done.stdout  # its own flags are listed
  assert done.stderr.strip() == ""  # no TensorFlow log line (I/W lines of its C++ import)
  bad = _run(["-m", f"albert_tf.cli.{command}", "--no_such_flag=1"], tmp_path)
  assert bad.returncode == 2
  assert bad.stderr.strip().splitlines() == [
      "error: Unknown command line flag 'no_such_flag'"]


@pytest.mark.parametrize("old", OLD_DOORS)
def test_the_old_doors_are_gone(old):
  assert importlib.util.find_spec(old) is None
  assert not os.path.exists(os.path.join(REPO, *old.split(".")) + ".py")


def test_make_pair_task_and_build_corpus_commands(tmp_path):
  corpus = tmp_path / "corpus.txt"
  done = _run(["-m", "albert_tf.cli.build_corpus", f"--output_file={corpus}",
               "--max_mb=0.02"], tmp_path)
  assert done.returncode == 0, done.stderr[-2000:]
  assert "MB of docstring sentences" in done.stdout
  assert 0 < corpus.stat().st_size <= 20_000
  done = _run(["-m", "albert_tf.cli.make_pair_task", f"--input_file={corpus}",
               f"--output_dir={tmp_path / 'MRPC'}", "--num_train=6", "--num_dev=4",
               "--num_test=2"], tmp_path)
  assert done.returncode == 0, done.stderr[-2000:]
  rows = {split: (tmp_path / "MRPC" / f"{split}.tsv").read_text().splitlines()
          for split in ("train", "dev", "test")}
  assert {split: len(lines) - 1 for split, lines in rows.items()} == dict(train=6, dev=4,
                                                                           test=2)


@pytest.mark.parametrize("args, message", [
    (["-m", "albert_tf.cli.make_pair_task", "--input_file=corpus.txt"],
     "error: --output_dir is required"),
    (["-m", "albert_tf.cli.train_spm", "--model_prefix=spm"], "error: --input_file is required"),
    (["-m", "albert_tf.cli.convert", "--input_checkpoint=albert_base"],
     "error: --output_checkpoint is required"),
    ([os.path.join(REPO, "export_savedmodel.py"), "--albert_directory=albert_base"],
     "error: --export_path (or --export_dir) is required"),
])
def test_missing_flag_is_one_error_line(tmp_path, args, message):
  done = _run(args, tmp_path)
  assert done.returncode == 2
  assert "Traceback" not in done.stderr
  assert done.stderr.strip().splitlines()[-1] == message
