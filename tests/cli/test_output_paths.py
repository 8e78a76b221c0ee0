"""Every output path a command cannot use is one `error:` line and exit status 2, before any
work, with nothing written (issue 39, part 2).

Through the real scripts and tools, for each writing flag: a path under a regular file, a file
where a directory is expected and the reverse, and a read-only place (a read-only bind mount,
else `chattr +i`: the tests run as root, where permission bits do not stop writes). The check
itself (fileio.output_path_problem) is tested in-process for the variants the matrix leaves out.
"""

import concurrent.futures
import os
import subprocess
import sys

import pytest

from albert_tf.common import fileio
from tests.helpers.paths import REPO

D, F, P = fileio.DIRECTORY, fileio.FILE, fileio.PREFIX

# command -> (argv before the flag under test, [(flag, kind)], the first being its main output).
# Only flag parsing must pass: the inputs named here do not exist (the check comes first).
COMMANDS = {
    "run_pretraining": (["run_pretraining.py", "--input_file=in.tfrecord",
                         "--albert_config_file=c.json", "--do_train"], [("output_dir", D)]),
    "run_classifier": (["run_classifier.py", "--task_name=MRPC", "--data_dir=glue",
                        "--output_dir=out", "--do_train"],
                       [("output_dir", D), ("export_dir", D), ("cached_dir", D)]),
    "run_race": (["run_race.py", "--data_dir=race", "--output_dir=out"],
                 [("output_dir", D), ("export_dir", D), ("cached_dir", D), ("train_file", F),
                  ("eval_file", F), ("predict_file", F)]),
    "run_squad": (["run_squad.py", "--output_dir=out", "--do_train"],
                  [("output_dir", D), ("export_dir", D), ("train_feature_file", F),
                   ("predict_feature_file", F), ("predict_feature_left_file", F)]),
    "run_squad_v1": (["run_squad_v1.py", "--do_train"], [("output_dir", D)]),
    "run_squad_v2": (["run_squad_v2.py", "--do_train"], [("output_dir", D)]),
    "create_pretraining_data": (["create_pretraining_data.py", "--input_file=corpus.txt",
                                 "--spm_model_file=spm.model"], [("output_file", F)]),
    "export_savedmodel": (["export_savedmodel.py", "--albert_directory=albert_base"],
                          [("export_path", D), ("export_dir", D)]),
    "export_checkpoints": (["export_checkpoints.py", "--albert_directory=albert_base"],
                           [("export_path", P)]),
    "convert": (["-m", "albert_tf.cli.convert", "--input_checkpoint=albert_base"],
                [("output_checkpoint", P)]),
    "convert_hf": (["-m", "albert_tf.cli.convert", "--input_checkpoint=albert_base",
                    "--output_format=hf"], [("output_checkpoint", D)]),
    "build_corpus": (["-m", "albert_tf.cli.build_corpus"], [("output_file", F)]),
    "train_spm": (["-m", "albert_tf.cli.train_spm", "--input_file=corpus.txt"],
                  [("model_prefix", P)]),
    "make_pair_task": (["-m", "albert_tf.cli.make_pair_task", "--input_file=corpus.txt"],
                       [("output_dir", D)]),
}

BAD_KINDS = ("under_a_file", "wrong_type", "read_only")

WRONG_TYPE = {D: "is a file, expected a directory", F: "is a directory, expected a file",
              P: "is a directory, expected a file prefix (e.g. <directory>/model.ckpt)"}


def _cases():
  """(id, command, flag, kind, bad kind): every bad kind for each command's main output, the
  wrong type for its other writing flags."""
  for command, (_, outputs) in COMMANDS.items():
    for i, (flag, kind) in enumerate(outputs):
      for bad in (BAD_KINDS if i == 0 else ("wrong_type",)):
        yield f"{command}-{flag}-{bad}", command, flag, kind, bad


CASES = list(_cases())


def _snapshot(root):
  """Every path under `root` with its type, size and mtime: what `nothing written` compares."""
  found = {}
  for directory, dirs, files in os.walk(root):
    for name in dirs + files:
      path = os.path.join(directory, name)
      stat = os.lstat(path)
      found[os.path.relpath(path, root)] = (os.path.isdir(path), stat.st_size, stat.st_mtime_ns)
  stat = os.lstat(root)
  found["."] = (True, stat.st_mtime_ns)
  return found


@pytest.fixture(scope="module")
def read_only_dir(tmp_path_factory):
  """A directory nothing can be created in, even by root: a read-only bind mount, else an
  immutable directory (chattr +i); (path, how). Skips when neither works here."""
  root = tmp_path_factory.mktemp("read_only")
  source, mount = root / "source", root / "mount"
  source.mkdir()
  mount.mkdir()
  (source / "existing_dir").mkdir()
  (source / "existing.txt").write_text("kept\n")

  def run(*argv):
    return subprocess.run(argv, capture_output=True, text=True, check=False).returncode == 0

  if run("mount", "--bind", str(source), str(mount)):
    if run("mount", "-o", "remount,bind,ro", str(mount)):
      yield str(mount), "read-only bind mount"
      run("umount", str(mount))
      return
    run("umount", str(mount))
  if run("chattr", "+i", str(source)):
    yield str(source), "chattr +i"
    run("chattr", "-i", str(source))
    return
  pytest.skip("neither `mount --bind -o ro` nor `chattr +i` works here (needs root and a file "
              "system that supports them)")


def _bad_path(bad, kind, case_dir, read_only):
  """(the flag's value, the message expected after `--flag=<value>: `). The wrong-type case
  is relative to the working directory (the case's folder), the others absolute."""
  if bad == "under_a_file":
    return (os.path.join(case_dir, "afile", "sub", "out"),
            f"cannot be created: {os.path.join(case_dir, 'afile')} is a file, not a directory")
  if bad == "wrong_type":
    return ("afile" if kind == D else "adir"), WRONG_TYPE[kind]
  reason = "read-only file system" if read_only[1].startswith("read-only") else \
      "permission denied"
  return (os.path.join(read_only[0], "new", "out"),
          f"cannot be created: {read_only[0]} is not writable ({reason})")


def _run_case(case, base, read_only):
  name, command, flag, kind, bad = case
  case_dir = os.path.join(base, name)
  os.makedirs(os.path.join(case_dir, "adir"))
  with open(os.path.join(case_dir, "afile"), "w", encoding="utf-8") as f:
    f.write("a regular file\n")
  value, expected = _bad_path(bad, kind, case_dir, read_only)
  argv, _ = COMMANDS[command]
  argv = [os.path.join(REPO, argv[0]) if argv[0].endswith(".py") else argv[0]] + argv[1:]
  before = {root: _snapshot(root) for root in (case_dir, read_only[0])}
  done = subprocess.run([sys.executable] + argv + [f"--{flag}={value}"], capture_output=True,
                        text=True, cwd=case_dir, timeout=600, check=False,
                        env=dict(os.environ, PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES=""))
  after = {root: _snapshot(root) for root in before}
  return done, f"error: --{flag}={value}: {expected}", before, after


@pytest.fixture(scope="module")
def results(tmp_path_factory, read_only_dir):
  """Every case, run 3 at a time (each is mostly Python's start-up)."""
  base = str(tmp_path_factory.mktemp("output_paths"))
  with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
    futures = {case[0]: pool.submit(_run_case, case, base, read_only_dir) for case in CASES}
    return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_bad_output_path_is_one_line_exit_2_nothing_written(results, case):
  done, expected, before, after = results[case[0]]
  assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr[-3000:])
  assert done.stderr.splitlines() == [expected], done.stderr[-3000:]
  assert done.stdout == ""
  assert after == before, "something was written"


# ---------------------------------------------------------------- the check itself, in-process
def test_output_path_problem_variants(tmp_path, read_only_dir):
  ro, how = read_only_dir
  reason = "read-only file system" if how.startswith("read-only") else "permission denied"
  afile = tmp_path / "afile"
  afile.write_text("x")
  adir = tmp_path / "adir"
  adir.mkdir()
  problem = fileio.output_path_problem
  # Usable paths: missing (created), existing of the right type, relative, a prefix's file.
  for path, kind in [(tmp_path / "new" / "deeper", D), (adir, D), (adir / "x.txt", F),
                     (afile, F), (afile, P), (tmp_path / "new" / "model.ckpt", P),
                     ("relative/out", D), ("gs://bucket/out", D), ("", D)]:
    assert problem(path, kind) is None, (path, kind)
  # A read-only place: an existing directory or file there, and a missing one.
  assert problem(os.path.join(ro, "existing_dir"), D) == f"is not writable ({reason})"
  assert problem(os.path.join(ro, "existing.txt"), F) == \
      f"exists and cannot be replaced ({reason})"
  assert problem(os.path.join(ro, "model.ckpt"), P) == \
      f"cannot be created: {ro} is not writable ({reason})"
  # A cache written only when missing: an existing one there is only read.
  assert problem(os.path.join(ro, "existing.txt"), F, written_if_missing=True) is None
  assert problem(os.path.join(ro, "existing_dir"), D, written_if_missing=True) is None
  assert problem(os.path.join(ro, "missing.tfrecord"), F, written_if_missing=True) == \
      f"cannot be created: {ro} is not writable ({reason})"
  assert problem(os.path.join(ro, "existing_dir"), F, written_if_missing=True) == \
      "is a directory, expected a file"


def test_immutable_file_and_directory(tmp_path):
  """chattr +i on a file and on a directory (as root: permission bits would not stop it)."""
  target = tmp_path / "locked"
  target.mkdir()
  kept = target / "corpus.txt"
  kept.write_text("x")
  if subprocess.run(["chattr", "+i", str(kept), str(target)], capture_output=True,
                    check=False).returncode != 0:
    pytest.skip("chattr +i does not work here")
  try:
    assert fileio.output_path_problem(kept, fileio.FILE) == \
        "exists and cannot be replaced (permission denied)"
    assert fileio.output_path_problem(target, fileio.DIRECTORY) == \
        "is not writable (permission denied)"
    assert fileio.output_path_problem(target / "new" / "out", fileio.DIRECTORY) == \
        f"cannot be created: {target} is not writable (permission denied)"
  finally:
    subprocess.run(["chattr", "-i", str(kept), str(target)], check=False)
