"""bench/ as a package of three rooms: every folder of modules is a package (benches run as
`python -m bench.<room>.<name>`), no module edits sys.path, results only in each room's results/
folder, every experiment has its README, and a bench restarts itself as a module."""

import ast
import os
import sys

import pytest

from bench import common
from tests.helpers.paths import REPO

BENCH = os.path.join(REPO, "bench")
ROOMS = ("speed", "peers", "experiments")


def _python_files():
  for folder, _, names in os.walk(BENCH):
    for name in names:
      if name.endswith(".py"):
        yield os.path.join(folder, name)


def _edits_sys_path(node):
  """A call or assignment on `sys.path` (sys.path.insert(...), sys.path[:0] = ...)."""
  target = node.func if isinstance(node, ast.Call) else (
      node.targets[0] if isinstance(node, ast.Assign) else None)
  while isinstance(target, (ast.Attribute, ast.Subscript)):
    if (isinstance(target, ast.Attribute) and target.attr == "path"
        and isinstance(target.value, ast.Name) and target.value.id == "sys"):
      return True
    target = target.value
  return False


def test_no_bench_module_edits_sys_path():
  """Code only: a child script held in a string may put another checkout first (serving_history
  bisects older commits' albert_tf)."""
  edits = []
  for path in _python_files():
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read(), path)
    edits += [f"{os.path.relpath(path, REPO)}:{node.lineno}" for node in ast.walk(tree)
              if isinstance(node, (ast.Call, ast.Assign)) and _edits_sys_path(node)]
  assert not edits, edits


def test_the_check_sees_a_sys_path_edit():
  tree = ast.parse("import sys\nsys.path.insert(0, 'x')\nsys.path[:0] = ['y']\nprint(sys.path)\n")
  assert sum(_edits_sys_path(n) for n in ast.walk(tree) if isinstance(n, (ast.Call, ast.Assign))
             ) == 2


def test_every_folder_of_modules_is_a_package():
  missing = [os.path.relpath(folder, REPO) for folder, _, names in os.walk(BENCH)
             if any(n.endswith(".py") for n in names) and "__init__.py" not in names]
  assert not missing, missing


def test_results_live_in_each_rooms_results_folder():
  assert sorted(n for n in os.listdir(BENCH) if os.path.isdir(os.path.join(BENCH, n))
                and not n.startswith("__")) == sorted(ROOMS)
  stray = []
  for folder, _, names in os.walk(BENCH):
    rel = os.path.relpath(folder, BENCH)
    if os.path.basename(folder) == "results":
      assert rel in {f"{room}/results" for room in ROOMS}, rel
    elif any(n.endswith(".json") for n in names):
      stray.append(rel)
  assert not stray, stray


@pytest.mark.parametrize("experiment", sorted(
    n for n in os.listdir(os.path.join(BENCH, "experiments"))
    if os.path.isdir(os.path.join(BENCH, "experiments", n)) and n not in ("results", "__pycache__")))
def test_every_experiment_has_a_readme_with_question_command_and_result(experiment):
  with open(os.path.join(BENCH, "experiments", experiment, "README.md"), encoding="utf-8") as f:
    text = f.read()
  for part in ("**Question.**", "**Command**", "**Result file"):
    assert part in text, f"{experiment}/README.md: no {part}"
  assert "results/" in text, f"{experiment}/README.md names no file in experiments/results/"


def test_a_bench_restarts_itself_as_a_module_with_the_repo_on_its_path(monkeypatch):
  assert common.module_command("bench.speed.precision", "--child=x") == [
      sys.executable, "-m", "bench.speed.precision", "--child=x"]
  monkeypatch.setenv("PYTHONPATH", "/elsewhere")
  monkeypatch.setenv("BENCH_LAYOUT_PROBE", "kept")
  env = common.child_env(TF_CPP_MIN_LOG_LEVEL="3")
  assert env["PYTHONPATH"] == os.pathsep.join([REPO, "/elsewhere"])
  assert env["TF_CPP_MIN_LOG_LEVEL"] == "3" and env["BENCH_LAYOUT_PROBE"] == "kept"
  monkeypatch.delenv("PYTHONPATH")
  assert common.child_env()["PYTHONPATH"] == REPO
