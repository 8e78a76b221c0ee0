"""docs/fine_tuning.md's hyper-parameter table and recipe commands equal recipes/common.sh's
ALBERT_HPARAMS (the one source of the official values; the recipes run from it)."""

import re
import shlex

from tests.helpers.paths import REPO_ROOT

COLUMNS = ("LR", "BSZ", "DR", "CDR", "TS", "WS", "MSL")
DOCS = REPO_ROOT / "docs" / "fine_tuning.md"
# The docs table's task names -> (common.sh task, ALBERT version of its row).
DOCS_ROWS = {"SQuAD v1.1": ("SQuAD-v1.1", "v2"), "SQuAD v2.0": ("SQuAD-v2.0", "v2"),
             "RACE": ("RACE", "v1"), "RACE, v2 models": ("RACE", "v2")}


def recipe_rows():
  """{(task, version): {column: text}} of common.sh's ALBERT_HPARAMS."""
  text = (REPO_ROOT / "recipes" / "common.sh").read_text(encoding="utf-8")
  table = re.search(r"^ALBERT_HPARAMS='\n(.*?)^'", text, re.M | re.S).group(1)
  rows = {}
  for line in table.splitlines():
    if line.startswith("#") or not line.strip():
      continue
    task, versions, *values = line.split()
    for version in versions.split(","):
      rows[(task, version)] = dict(zip(COLUMNS + ("SAVE", "EPOCHS"), values))
  return rows


def docs_table():
  """{(task, version): {column: text}} of the table under "The paper's fine-tuning
  hyper-parameters" in docs/fine_tuning.md."""
  rows = {}
  for line in DOCS.read_text(encoding="utf-8").splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 8 and cells[1] and re.fullmatch(r"\d(\.\d+)?e-\d", cells[1]):
      task, version = DOCS_ROWS.get(cells[0], (cells[0], "v2"))
      rows[(task, version)] = dict(zip(COLUMNS, cells[1:]))
  return rows


def first_block_commands():
  """{script: {flag: value}} of the commands in fine_tuning.md's first bash block."""
  text = DOCS.read_text(encoding="utf-8")
  block = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
  commands = {}
  for command in re.split(r"\n(?=python )", block.replace("\\\n", " ")):
    words = shlex.split(command, comments=True)
    if words and words[0] == "python":
      commands[words[1]] = dict(w[2:].split("=", 1) for w in words[2:] if "=" in w)
  return commands


def test_table_equals_common_sh():
  recipes = recipe_rows()
  table = docs_table()
  assert len(table) == 13
  for key in set(recipes) | set(table):
    if key not in table:  # the GLUE and SQuAD rows are the same for v1 and v2: once in the docs
      key_v1 = (key[0], "v1")
      assert table.get((key[0], "v2")) or table.get(key_v1), key
      continue
    assert key in recipes, key
    assert {c: recipes[key][c] for c in COLUMNS} == table[key], key


def test_commands_equal_common_sh():
  recipes = recipe_rows()
  commands = first_block_commands()
  mnli = recipes[("MNLI", "v2")]
  glue = commands["run_classifier.py"]
  assert glue["task_name"] == "MNLI"
  assert (glue["learning_rate"], glue["train_batch_size"], glue["train_step"],
          glue["warmup_step"], glue["max_seq_length"]) == (
      mnli["LR"], mnli["BSZ"], mnli["TS"], mnli["WS"], mnli["MSL"])
  squad = commands["run_squad.py"]
  row = recipes[("SQuAD-v2.0", "v2")]
  assert squad["train_file"] == "train-v2.0.json"
  assert (squad["learning_rate"], squad["train_batch_size"], squad["max_seq_length"],
          float(squad["num_train_epochs"]), squad["warmup_proportion"]) == (
      row["LR"], row["BSZ"], row["MSL"], float(row["EPOCHS"]), "0.1")
  race = commands["run_race.py"]  # albert_base/ is the v2 tarball: the v2 row
  row = recipes[("RACE", "v2")]
  assert (race["learning_rate"], race["train_batch_size"], race["train_step"],
          race["warmup_step"], race["max_seq_length"]) == (
      row["LR"], row["BSZ"], row["TS"], row["WS"], row["MSL"])
  # The comment's v1.1 values are v1.1's row.
  row = recipes[("SQuAD-v1.1", "v2")]
  assert (f"--learning_rate={row['LR']} --max_seq_length={row['MSL']}\n"
          f"# --num_train_epochs={float(row['EPOCHS'])}") in DOCS.read_text(encoding="utf-8")


def test_squad_warmup_is_what_the_scripts_compute():
  """The prose's SQuAD warmup steps are int(0.1 x steps), as the official scripts count."""
  recipes = recipe_rows()
  text = " ".join(DOCS.read_text(encoding="utf-8").split())
  v1, v2 = (int(recipes[(f"SQuAD-{v}", "v2")]["TS"]) for v in ("v1.1", "v2.0"))
  assert f"warmup int(0.1 x steps) = {int(0.1 * v1)} and {int(0.1 * v2)}" in text
