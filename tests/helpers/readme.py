"""README.md and docs/*.md as data: their fenced ```bash and ```python blocks, split into the
commands a user types, each named by its page and the section it sits in.

Nothing here imports albert_tf or TensorFlow: tests/integration/test_readme.py parses the README
at collection time, and the commands then run in fresh subprocesses.
"""

import dataclasses
import re
import shlex

from tests.helpers.paths import REPO_ROOT

README = REPO_ROOT / "README.md"
DOCS = REPO_ROOT / "docs"


def pages():
  """README.md, then every page of docs/ in name order: the pages whose commands run."""
  return [README] + sorted(DOCS.glob("*.md"))

# Runs a Python snippet as if typed into the interactive interpreter: statement by statement,
# printing the value of each bare expression (`pretrained.predict(...)`), so that what the README
# shows as the result can be checked. argv: the snippet file.
INTERACTIVE_RUNNER = """
import ast, sys
path = sys.argv[1]
sys.path.insert(0, ".")
with open(path, encoding="utf-8") as f:
  tree = ast.parse(f.read(), path)
scope = {"__name__": "__main__"}
for node in tree.body:
  if isinstance(node, ast.Expr):
    code = compile(ast.Interactive([node]), path, "single")
  else:
    code = compile(ast.Module([node], []), path, "exec")
  exec(code, scope)
"""

_FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
_HEADING = re.compile(r"^(#{2,4})\s+(.*?)\s*$")


@dataclasses.dataclass(frozen=True)
class Command:
  """One shell command (backslash continuations and quoted line breaks joined) or one whole
  Python snippet of a page."""
  section: str  # the nearest heading above it, as written
  index: int  # 1-based position among the section's commands and snippets
  language: str  # "bash" or "python"
  text: str  # bash: the command as typed (one logical line); python: the block's source
  line: int  # line of the page where it starts
  page: str = "README.md"  # the page, relative to the repository

  @property
  def test_id(self):
    slug = re.sub(r"[^a-z0-9]+", "-", self.section.lower()).strip("-")
    if self.page == "README.md":
      return f"{slug}-{self.index}"
    return f"{self.page[len('docs/'):-len('.md')]}:{slug}-{self.index}"

  @property
  def where(self):
    return f"{self.page} line {self.line} ({self.test_id})"


def _complete(text):
  """Whether `text` is a whole shell command: no trailing backslash, quotes closed."""
  if text.rstrip().endswith("\\"):
    return False
  try:
    shlex.split(text, comments=True)
  except ValueError:  # "No closing quotation": a quoted string goes on to the next line
    return False
  return True


def split_shell(block):
  """The commands of a bash block: [(offset of its first line, command text)].

  Comment lines between commands are dropped; a command's own trailing comment stays (bash
  ignores it). Backslash-newline continuations are joined; a quoted string spanning lines keeps
  its line breaks, as bash reads it.
  """
  commands, current, start = [], [], 0
  for offset, line in enumerate(block.splitlines()):
    if not current:
      if not line.strip() or line.lstrip().startswith("#"):
        continue
      start = offset
    current.append(line)
    text = "\n".join(current)
    if _complete(text):
      commands.append((start, re.sub(r"\\\n\s*", "", text).strip()))
      current = []
  if current:
    raise ValueError(f"unterminated shell command at block line {start + 1}: {current[0]!r}")
  return commands


def all_commands():
  """Every command of README.md and docs/*.md, page by page (pages() order)."""
  return [command for path in pages() for command in readme_commands(
      path.read_text(encoding="utf-8"), path.relative_to(REPO_ROOT).as_posix())]


def readme_commands(text=None, page="README.md"):
  """Every ```bash command and ```python snippet of one page (default: the README), in page
  order.

  Other fences (the layout tree, plain ``` blocks) are not commands.
  """
  if text is None:
    text = README.read_text(encoding="utf-8")
  lines = text.splitlines()
  commands, counts = [], {}
  section = "top"
  i = 0
  while i < len(lines):
    fence = _FENCE.match(lines[i])
    heading = _HEADING.match(lines[i])
    if heading:
      section = heading.group(2)
      i += 1
      continue
    if not fence:
      i += 1
      continue
    indent, language = fence.group(1), fence.group(2)
    end = i + 1
    while end < len(lines) and not _FENCE.match(lines[end]):
      end += 1
    body = [l[len(indent):] if l.startswith(indent) else l.lstrip() for l in lines[i + 1:end]]
    if language in ("bash", "python"):
      pieces = ([(0, "\n".join(body) + "\n")] if language == "python"
                else split_shell("\n".join(body)))
      for offset, piece in pieces:
        counts[section] = counts.get(section, 0) + 1
        commands.append(Command(section, counts[section], language, piece, i + 2 + offset,
                                page))
    i = end + 1
  return commands


# ------------------------------------------------------------------------------ stand-ins
# The tiny data a user would have downloaded or written, in the official layouts. MNLI's and
# SST-2's label names, as GLUE spells them (id2label of the HF stand-ins).
MNLI_LABELS = ("contradiction", "entailment", "neutral")
SST2_LABELS = ("0", "1")
SPM_VOCAB = 1000  # = the tiny config's vocab_size: a vocabulary that fits it exactly
REPO_SCRIPTS = ("create_pretraining_data.py", "run_pretraining.py", "run_classifier.py",
                "run_race.py", "run_squad.py", "run_squad_v1.py", "run_squad_v2.py",
                "export_checkpoints.py", "export_savedmodel.py", "run_glue.sh", "recipes",
                "run_ner.py")


def _copy(src, dst):
  import shutil  # pylint: disable=g-import-not-at-top
  dst.parent.mkdir(parents=True, exist_ok=True)
  shutil.copyfile(src, dst)


def _write_custom_csv(data_dir):
  """data/train.csv, dev.csv ("text,label") and test.csv ("text"), as the README's comment."""
  from tests.helpers.glue_fixtures import SENTENCES  # pylint: disable=g-import-not-at-top
  data_dir.mkdir(parents=True, exist_ok=True)

  def quoted(text):
    return '"' + text.replace('"', '""') + '"'

  for split, n, offset in (("train", 8, 0), ("dev", 4, 3)):
    rows = [f"{quoted(SENTENCES[(i + offset) % len(SENTENCES)])},{('neg', 'pos')[i % 2]}"
            for i in range(n)]
    (data_dir / f"{split}.csv").write_text("text,label\n" + "\n".join(rows) + "\n",
                                            encoding="utf-8")
  rows = [quoted(SENTENCES[(i + 5) % len(SENTENCES)]) for i in range(3)]
  (data_dir / "test.csv").write_text("text\n" + "\n".join(rows) + "\n", encoding="utf-8")


def build_stand_ins(root):
  """Writes every README path the commands read into `root` (a pathlib.Path): see the table in
  tests/integration/test_readme.py. Imports TensorFlow (the checkpoints are written in-process).
  """
  import os  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from tests.helpers import glue_fixtures, squad, text  # pylint: disable=g-import-not-at-top
  from tests.helpers.tiny_config import write_tiny_config  # pylint: disable=g-import-not-at-top

  # A clone of the repository: the scripts and the package, so that `python run_x.py` and
  # `python -m albert_tf...` work from `root` as they do from a checkout.
  for name in REPO_SCRIPTS + ("albert_tf",):
    os.symlink(REPO_ROOT / name, root / name)
  # `source .venv/bin/activate` (the README's install step): the suite's own environment.
  import sys  # pylint: disable=g-import-not-at-top
  os.symlink(sys.prefix, root / ".venv")

  build = root / "_build"
  spm = text.make_tiny_spm_model(str(build), vocab_size=SPM_VOCAB)
  vocab = spm[:-len(".model")] + ".vocab"
  for directory in (root, root / "albert_base"):
    _copy(spm, directory / "30k-clean.model")
    _copy(vocab, directory / "30k-clean.vocab")
  config_file = write_tiny_config(root / "albert_base" / "albert_config.json")
  write_tiny_config(root / "configs" / "albert_base_v2.json")

  import albert_tf  # pylint: disable=g-import-not-at-top
  from albert_tf.models import AlbertClassifier  # pylint: disable=g-import-not-at-top
  config = albert_tf.AlbertConfig.from_json_file(config_file)
  ids = np.array([[2, 10, 11, 3, 12, 3, 0, 0]], np.int32)
  features = dict(input_ids=ids, input_mask=(ids > 0).astype(np.int32),
                  segment_ids=np.array([[0, 0, 0, 0, 1, 1, 0, 0]], np.int32))
  pretrainer = albert_tf.AlbertPretrainer(config)
  pretrainer(dict(features, masked_lm_positions=np.array([[1]], np.int32)), training=False)
  albert_tf.save_tf1_checkpoint(pretrainer, str(root / "albert_base" / "model.ckpt-best"),
                                global_step=0)
  for name, labels in (("albert-base-v2-mnli", MNLI_LABELS),
                       ("albert_base_sst2_hf", SST2_LABELS)):
    classifier = AlbertClassifier(config, num_classes=len(labels))
    classifier(features, training=False)
    albert_tf.save_hf_checkpoint(classifier, str(root / name), label_list=list(labels))
    _copy(spm, root / name / "spiece.model")

  text.write_tiny_corpus(str(root / "corpus" / "docs.txt"), repeats=2,
                         docstring_bytes=20_000)
  glue_fixtures.write_glue(str(root / "glue_data"))
  glue_fixtures.write_race(str(root))
  _copy(squad.TINY_V2, root / "train-v2.0.json")
  _copy(squad.TINY_V1, root / "train-v1.1.json")
  _copy(squad.TINY_V1, root / "dev-v1.1.json")
  _copy(squad.TINY_V2, root / "dev-v2.0.json")
  _write_custom_csv(root / "data")
  from tests.helpers.ner import write_ner_data  # pylint: disable=g-import-not-at-top
  write_ner_data(str(root / "ner_data"))
  # docs/chinese_and_wordpiece.md: the official Chinese tarball's layout and CLUE / CMRC data.
  from tests.helpers import chinese, model_dirs  # pylint: disable=g-import-not-at-top
  import shutil  # pylint: disable=g-import-not-at-top
  zh = model_dirs.write_chinese_directories(build / "zh")[model_dirs.ZH]
  shutil.copytree(zh, root / "albert_base_zh")
  chinese.write_afqmc(root / "afqmc_public")
  for split in ("train", "dev"):
    chinese.write_cmrc(root / "cmrc2018" / f"{split}.json")
  chinese.write_corpus(root / "corpus_zh" / "wiki_zh.txt")
  return root
