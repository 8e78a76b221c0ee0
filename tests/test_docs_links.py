"""Every relative link of README.md, docs/*.md and bench/**/README.md leads somewhere: the file
(or folder) exists, and an anchor names a heading of the page it points to, as GitHub spells
heading anchors.

Links outside code (fenced blocks and `inline code` are not read) of the form [text](target) or
[text](target "title"); http(s) and mailto links are not followed (no network in the tests).
"""

import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md"] + sorted(
    os.path.join("docs", name) for name in os.listdir(os.path.join(REPO, "docs"))
    if name.endswith(".md")) + sorted(  # and each bench experiment's README
        os.path.relpath(os.path.join(folder, "README.md"), REPO)
        for folder, _, names in os.walk(os.path.join(REPO, "bench")) if "README.md" in names)
LINK = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def prose(text):
  """The page without fenced blocks and inline code (their brackets are not links)."""
  kept, fence = [], False
  for line in text.splitlines():
    if line.lstrip().startswith("```"):
      fence = not fence
      kept.append("")
      continue
    kept.append("" if fence else re.sub(r"`[^`]*`", "", line))
  return "\n".join(kept)


def slug(heading):
  """GitHub's anchor for a heading: lower case, markup and punctuation dropped (letters, digits,
  `_` and `-` stay), each space a `-`."""
  text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
  text = text.replace("`", "").lower()
  text = re.sub(r"[^\w\- ]", "", text)
  return text.replace(" ", "-")


def anchors(path):
  """The anchors of a page's headings (a repeated heading gets -1, -2, ... as on GitHub)."""
  with open(path, encoding="utf-8") as f:
    text = prose(f.read())
  seen, found = {}, set()
  for line in text.splitlines():
    match = HEADING.match(line)
    if not match:
      continue
    base = slug(match.group(1))
    count = seen.get(base, 0)
    seen[base] = count + 1
    found.add(base if count == 0 else f"{base}-{count}")
  return found


def dead_links(page, repo=REPO):
  with open(os.path.join(repo, page), encoding="utf-8") as f:
    text = prose(f.read())
  dead = []
  for match in LINK.finditer(text):
    target = match.group("target")
    if re.match(r"^(https?:|mailto:)", target):
      continue
    path, _, anchor = target.partition("#")
    resolved = (os.path.normpath(os.path.join(repo, os.path.dirname(page), path)) if path
                else os.path.join(repo, page))
    if not os.path.exists(resolved):
      dead.append(f"{target}: no such file")
    elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
      dead.append(f"{target}: no heading with anchor #{anchor} in "
                  f"{os.path.relpath(resolved, repo)}")
  return dead


@pytest.mark.parametrize("page", PAGES)
def test_relative_links_and_anchors_resolve(page):
  dead = dead_links(page)
  assert not dead, f"{page}: dead links:\n" + "\n".join(dead)


def test_slugs_follow_github():
  assert slug("The official recipes: run_glue.sh, SQuAD and RACE") == (
      "the-official-recipes-run_gluesh-squad-and-race")
  assert slug("Memory: `--recompute=none|layer|attention`") == "memory---recomputenonelayerattention"
  assert slug("The project's own benchmarks (history: each row its own run)") == (
      "the-projects-own-benchmarks-history-each-row-its-own-run")


def test_a_dead_link_and_a_dead_anchor_are_found(tmp_path):
  (tmp_path / "docs").mkdir()
  (tmp_path / "docs" / "a.md").write_text("# A\n\n## Real part\n", encoding="utf-8")
  (tmp_path / "README.md").write_text(
      "[ok](docs/a.md#real-part) [gone](docs/b.md) [bad](docs/a.md#unreal) `[code](x.md)`\n"
      "```\n[fenced](y.md)\n```\n[web](https://example.com/z.md)\n", encoding="utf-8")
  dead = dead_links("README.md", repo=str(tmp_path))
  assert dead == ["docs/b.md: no such file",
                  "docs/a.md#unreal: no heading with anchor #unreal in docs/a.md"]
