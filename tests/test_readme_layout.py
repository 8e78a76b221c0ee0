"""The Layout block of docs/architecture.md (linked from the README) names every module under
albert_tf/, and nothing that is not there.

The block is a tree written by indentation (two spaces a level): a line whose first word ends in
`/` is a folder, one whose first word ends in `.py` is a module of the folder above it. The test
rebuilds the paths from the indentation and compares them with the files git would ship.
"""

import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYOUT_PAGE = os.path.join(REPO, "docs", "architecture.md")
ENTRY = re.compile(r"^(?P<indent> *)(?P<name>[A-Za-z_][\w.]*(?:/|\.py))(?:\s|$)")


def layout_block(text):
  """The lines of the fenced block under `## Layout`."""
  section = text.split("\n## Layout\n", 1)
  if len(section) != 2:
    raise AssertionError("docs/architecture.md has no '## Layout' section")
  after = section[1]
  fence = after.index("```")
  body = after[fence:].split("\n", 1)[1]
  return body[:body.index("```")].splitlines()


def layout_paths(lines):
  """`albert_tf/...` paths (folders end in '/') named by the tree under `albert_tf/`."""
  paths, stack = set(), []
  inside = False
  for line in lines:
    match = ENTRY.match(line)
    if not match:
      continue
    depth = len(match.group("indent")) // 2
    name = match.group("name")
    if depth == 0:
      inside = name == "albert_tf/"
      stack = ["albert_tf"] if inside else []
      continue
    if not inside:
      continue
    del stack[depth:]
    if len(stack) != depth:
      raise AssertionError(f"docs/architecture.md Layout: {name!r} is indented under nothing: {line!r}")
    path = "/".join(stack + [name.rstrip("/")])
    paths.add(path + ("/" if name.endswith("/") else ""))
    if name.endswith("/"):
      stack.append(name.rstrip("/"))
  return paths


def package_paths():
  """Every module and folder of the package as it is on disk (no caches)."""
  found = set()
  root = os.path.join(REPO, "albert_tf")
  for folder, dirs, files in os.walk(root):
    dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
    rel = os.path.relpath(folder, REPO).replace(os.sep, "/")
    if rel != "albert_tf":
      found.add(rel + "/")
    for name in files:
      if name.endswith(".py"):
        found.add(f"{rel}/{name}")
  return found


def test_layout_parser_reads_a_tree():
  lines = ["albert_tf/", "  a.py   x", "  sub/", "    b.py   y", "    deeper/", "      c.py",
           "  d.py", "configs/      not the package", "  e.py"]
  assert layout_paths(lines) == {"albert_tf/a.py", "albert_tf/sub/", "albert_tf/sub/b.py",
                                 "albert_tf/sub/deeper/", "albert_tf/sub/deeper/c.py",
                                 "albert_tf/d.py"}


def test_every_module_is_in_the_layout():
  named = layout_paths(layout_block(open(LAYOUT_PAGE, encoding="utf-8").read()))
  on_disk = package_paths()
  missing = sorted(on_disk - named)
  assert not missing, f"modules missing from docs/architecture.md's Layout: {missing}"


def test_the_layout_names_nothing_that_does_not_exist():
  named = layout_paths(layout_block(open(LAYOUT_PAGE, encoding="utf-8").read()))
  stale = sorted(named - package_paths())
  assert not stale, f"docs/architecture.md's Layout names what does not exist: {stale}"


def test_a_badly_indented_layout_fails():
  with pytest.raises(AssertionError, match="indented under nothing"):
    layout_paths(["albert_tf/", "  sub/", "        too_deep.py"])
