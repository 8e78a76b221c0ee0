"""The layer rule: albert_tf's imports run one way, read from the code (AST), as
tests/cli/test_no_flags_below_cli.py reads the flags.

Layers, lowest first (a module may import its own layer and the layers below it):
  leaf utilities -> config, text, layers -> networks, heads -> models -> checkpoints ->
  pretrained -> data, tasks, export -> training -> tools -> cli
(the scripts at the repository's top sit above cli). Checked here:
  - every module under albert_tf/ belongs to a layer (a new package must be placed below);
  - no import, at module level or inside a function, from a lower layer to a higher one, except
    the commented allow-list below, which may only shrink (a fixed entry fails until removed);
  - no import circle, counting imports inside functions too (a lazy import still ties two
    modules together: runtime -> strategy -> runtime came back that way);
  - each command has one door, `python -m albert_tf.cli.<command>`: code under
    `if __name__ == "__main__":` exists only in albert_tf/cli/ modules, imports only
    albert_tf.common.console and albert_tf.cli, and the first such block quiets TensorFlow
    (console.quiet_startup()) before any module-level import (no exemption);
  - every import inside a function (of albert_tf or any other package) says why it is there with
    a `# lazy: <why>` comment on its line(s): imports belong at module level unless TensorFlow
    (or an optional or private module) must stay unloaded until the function runs.

`python tests/test_import_layers.py` prints the numbers (circles, upward imports, imports
inside functions).
"""

import ast
import collections
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(REPO, "albert_tf")

# (layer, module prefixes), lowest first; the longest matching prefix places a module.
LAYERS = (
    ("leaf", ("albert_tf.errors", "albert_tf.common", "albert_tf.metrics")),
    ("config/text/layers", ("albert_tf.config", "albert_tf.text", "albert_tf.tokenization",
                            "albert_tf.layers")),
    ("networks/heads", ("albert_tf.networks", "albert_tf.heads")),
    ("models", ("albert_tf.models",)),
    ("checkpoints", ("albert_tf.checkpoints",)),
    # The package itself is the public facade: its names load lazily from up to this layer.
    ("pretrained", ("albert_tf", "albert_tf.pretrained")),
    ("data/tasks/export", ("albert_tf.data", "albert_tf.tasks", "albert_tf.export")),
    ("training", ("albert_tf.training",)),
    ("tools", ("albert_tf.tools",)),
    ("cli", ("albert_tf.cli",)),
)

# Upward imports that remain, as (importer, imported). Only ever remove entries.
ALLOWED_UPWARD = set()  # (empty: loading weights is albert_tf.from_pretrained, above the models;
# the tokenizer's from_hub_module reads albert_tf/text/hub_tokenization.py, in its own layer)


def _module_name(path):
  name = os.path.relpath(path, REPO)[:-len(".py")].replace(os.sep, ".")
  return name[:-len(".__init__")] if name.endswith(".__init__") else name


def modules():
  """{module name: file path} of every module under albert_tf/."""
  found = {}
  for directory, _, files in os.walk(PACKAGE):
    for file in files:
      if file.endswith(".py"):
        path = os.path.join(directory, file)
        found[_module_name(path)] = path
  return found


def _is_main_guard(node):
  test = node.test if isinstance(node, ast.If) else None
  return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
          and test.left.id == "__name__" and len(test.comparators) == 1
          and isinstance(test.comparators[0], ast.Constant)
          and test.comparators[0].value == "__main__")


def imports_of(name, path, known):
  """[(imported albert_tf module, where, line)] of one module; where is "top" (runs on
  import), "function" (inside a function) or "main" (under `if __name__ == "__main__":`)."""

  def resolve(dotted):
    parts = dotted.split(".")
    while parts:
      if ".".join(parts) in known:
        return ".".join(parts)
      parts.pop()
    return None

  found = []

  def visit(node, where):
    for child in ast.iter_child_nodes(node):
      inner = where
      if where == "top" and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                               ast.Lambda)):
        inner = "function"
      elif where == "top" and _is_main_guard(child):
        inner = "main"
      if isinstance(child, ast.Import):
        targets = [alias.name for alias in child.names]
      elif isinstance(child, ast.ImportFrom):
        if child.level:
          base = name.split(".") if path.endswith("__init__.py") else name.split(".")[:-1]
          base = base[:len(base) - child.level + 1] + ([child.module] if child.module else [])
          module = ".".join(base)
        else:
          module = child.module or ""
        targets = [f"{module}.{alias.name}" for alias in child.names]
      else:
        targets = []
      for target in targets:
        if target.split(".")[0] == "albert_tf":
          resolved = resolve(target)
          if resolved and resolved != name:
            found.append((resolved, where, child.lineno))
      visit(child, inner)

  with open(path, encoding="utf-8") as f:
    visit(ast.parse(f.read(), path), "top")
  return found


def layer_of(module):
  """The index in LAYERS of a module (None: not placed)."""
  best = None
  for index, (_, prefixes) in enumerate(LAYERS):
    for prefix in prefixes:
      if module == prefix or module.startswith(prefix + "."):
        if best is None or len(prefix) > best[1]:
          best = (index, len(prefix))
  return None if best is None else best[0]


def import_graph():
  """{module: [(imported, where, line)]} over albert_tf/."""
  known = modules()
  return {name: imports_of(name, path, known) for name, path in sorted(known.items())}


def upward_imports(graph):
  """[(importer, imported, where, line)] from a lower layer to a higher one."""
  return [(name, target, where, line) for name, found in graph.items()
          for target, where, line in found
          if layer_of(target) > layer_of(name)]


ALL_IMPORTS = ("top", "function", "main")


def circles(graph, kinds=ALL_IMPORTS):
  """The import circles (strongly connected components of 2+ modules) among imports of the
  given kinds (default: every import, at module level, inside functions and under `__main__`)."""
  edges = {name: sorted({t for t, where, _ in found if where in kinds})
           for name, found in graph.items()}
  index, low, stack, on_stack, result = {}, {}, [], set(), []

  def connect(node):  # Tarjan's algorithm (the graph is ~100 modules: recursion is fine)
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for target in edges.get(node, ()):
      if target not in index:
        connect(target)
        low[node] = min(low[node], low[target])
      elif target in on_stack:
        low[node] = min(low[node], index[target])
    if low[node] == index[node]:
      component = []
      while True:
        member = stack.pop()
        on_stack.discard(member)
        component.append(member)
        if member == node:
          break
      if len(component) > 1:
        result.append(sorted(component))

  for node in edges:
    if node not in index:
      connect(node)
  return sorted(result)


LAZY_COMMENT = "# lazy:"


def function_imports():
  """[(module, line, source text, commented)] of every import statement inside a function
  under albert_tf/ (third-party ones included); commented: one of its lines has LAZY_COMMENT."""
  found = []
  for name, path in sorted(modules().items()):
    with open(path, encoding="utf-8") as f:
      source = f.read()
    lines = source.splitlines()

    def visit(node, inside):
      for child in ast.iter_child_nodes(node):
        if inside and isinstance(child, (ast.Import, ast.ImportFrom)):
          text = lines[child.lineno - 1:child.end_lineno]
          found.append((name, child.lineno, " ".join(t.strip() for t in text),
                        any(LAZY_COMMENT in t for t in text)))
        visit(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                  ast.Lambda)))

    visit(ast.parse(source, path), False)
  return found


def test_every_module_has_a_layer():
  assert [name for name in modules() if layer_of(name) is None] == []


def test_no_import_from_a_lower_layer_to_a_higher_one():
  upward = upward_imports(import_graph())
  found = {(name, target) for name, target, _, _ in upward}
  unexpected = [f"{name}:{line} imports {target} ({where}): {LAYERS[layer_of(name)][0]} -> "
                f"{LAYERS[layer_of(target)][0]}" for name, target, where, line in upward
                if (name, target) not in ALLOWED_UPWARD]
  assert unexpected == []
  # A fixed entry leaves the allow-list, so that it only shrinks.
  assert sorted(ALLOWED_UPWARD - found) == []


def test_no_import_circle_even_through_imports_inside_functions():
  assert circles(import_graph()) == []


# Modules that may name another module's private names: albert_tf.tokenization re-exports the
# official tokenization.py's, which users and the official tests call (`_is_control`, ...).
PRIVATE_NAMES_ALLOWED_IN = {"albert_tf.tokenization"}


def private_names_used(name, path, known):
  """[(line, module, private name)] of another albert_tf module's `_names` that `name` uses
  (`module._name` or `from module import _name`)."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  aliases, found = {}, []
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("albert_tf"):
      for alias in node.names:
        aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        if alias.name.startswith("_") and not alias.name.startswith("__"):
          found.append((node.lineno, node.module, alias.name))
    elif isinstance(node, ast.Import):
      aliases.update({alias.asname: alias.name for alias in node.names
                      if alias.asname and alias.name.startswith("albert_tf")})
  for node in ast.walk(tree):
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
        and aliases.get(node.value.id) in known and node.attr.startswith("_")
        and not node.attr.startswith("__")):
      found.append((node.lineno, aliases[node.value.id], node.attr))
  return found


def test_no_module_uses_another_modules_private_names():
  known = modules()
  assert [f"{name}:{line} uses {module}.{private}" for name, path in sorted(known.items())
          if name not in PRIVATE_NAMES_ALLOWED_IN
          for line, module, private in private_names_used(name, path, known)] == []


def test_the_private_name_rule_catches_an_attribute_and_a_from_import(tmp_path):
  # As beam_pipeline.py called creation._new_counters() before issue 60.
  (tmp_path / "a.py").write_text(
      "from albert_tf.data.pretraining import creation\n"
      "from albert_tf.text.tokenization import _is_control, FullTokenizer\n"
      "counters = creation._new_counters()\nfine = creation.new_counters()\n")
  known = {"albert_tf.data.pretraining.creation": "", "albert_tf.text.tokenization": ""}
  assert sorted(private_names_used("albert_tf.x", str(tmp_path / "a.py"), known)) == [
      (2, "albert_tf.text.tokenization", "_is_control"),
      (3, "albert_tf.data.pretraining.creation", "_new_counters")]


def _calls_quiet_startup(node):
  return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "quiet_startup" and isinstance(n.func.value, ast.Name)
             and n.func.value.id == "console" for n in ast.walk(node))


def main_block_problems(name, path):
  """What breaks the one-door rule in one module: a `__main__` block outside albert_tf/cli/, an
  import in one other than albert_tf.common.console / albert_tf.cli, or a command whose first
  module-level statement after the docstring is not the block calling console.quiet_startup()
  (every import after it, so that TensorFlow loads quietly)."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  blocks = [node for node in ast.walk(tree) if _is_main_guard(node)]
  if not blocks:
    return []
  if not name.startswith("albert_tf.cli."):
    return [f"{name}:{blocks[0].lineno}: `if __name__ == \"__main__\":` outside albert_tf/cli/ "
            f"(a command's one door is `python -m albert_tf.cli.<command>`)"]
  problems = []
  for block in blocks:
    for node in ast.walk(block):
      if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
      elif isinstance(node, ast.ImportFrom):
        targets = [f"{node.module}.{alias.name}" for alias in node.names]
      else:
        continue
      problems += [f"{name}:{node.lineno}: imports {target} under `__main__`" for target in targets
                   if target != "albert_tf.common.console"
                   and not target.startswith("albert_tf.cli.")]
  body = tree.body
  if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
    body = body[1:]  # the docstring
  if not (body and _is_main_guard(body[0]) and _calls_quiet_startup(body[0])):
    problems.append(f"{name}: a command must start with `if __name__ == \"__main__\":` calling "
                    f"console.quiet_startup(), before any import")
  return problems


def test_commands_have_one_door_under_cli():
  problems = [p for name, path in sorted(modules().items()) for p in main_block_problems(name, path)]
  assert problems == []
  # The commands are there (the rule is not vacuous).
  commands = sorted(name for name, path in modules().items()
                    if "__main__" in open(path, encoding="utf-8").read())
  assert "albert_tf.cli.convert" in commands and "albert_tf.cli.train_spm" in commands, commands


def test_the_one_door_rule_catches_a_shim_and_a_loud_command(tmp_path):
  guard = ('if __name__ == "__main__":\n  from albert_tf.common import console\n'
           '  console.quiet_startup()\n')
  good = tmp_path / "good.py"
  good.write_text('"""Doc."""\n\n' + guard + 'import os\n\nif __name__ == "__main__":\n'
                  '  main()\n')
  assert main_block_problems("albert_tf.cli.good", str(good)) == []
  # An entry point outside albert_tf/cli/ (a shim, as albert_tf/tools/train_spm.py was).
  assert main_block_problems("albert_tf.tools.good", str(good)) != []
  # An import before the quiet guard (TensorFlow would log before it is quieted).
  loud = tmp_path / "loud.py"
  loud.write_text('"""Doc."""\nimport os\n' + guard)
  assert main_block_problems("albert_tf.cli.loud", str(loud)) != []
  # A main block importing a library module.
  wide = tmp_path / "wide.py"
  wide.write_text(guard + '  from albert_tf.tools import pair_task\n')
  assert main_block_problems("albert_tf.cli.wide", str(wide)) == [
      "albert_tf.cli.wide:4: imports albert_tf.tools.pair_task under `__main__`"]


def test_every_import_inside_a_function_says_why():
  assert [f"{name}:{line}: {text}" for name, line, text, commented in function_imports()
          if not commented] == []


def test_the_rule_catches_an_upward_import_and_a_circle(tmp_path):
  # The checker itself: a models module importing pretrained is upward; two modules importing
  # each other at module level are a circle.
  (tmp_path / "a.py").write_text("from albert_tf import pretrained\n"
                                 "def f():\n  from albert_tf.cli import flags\n")
  known = {"albert_tf.pretrained": "", "albert_tf.cli.flags": "", "albert_tf.models.a": ""}
  found = imports_of("albert_tf.models.a", str(tmp_path / "a.py"), known)
  assert found == [("albert_tf.pretrained", "top", 1), ("albert_tf.cli.flags", "function", 3)]
  graph = {"albert_tf.models.a": found, "albert_tf.pretrained": [], "albert_tf.cli.flags": []}
  assert [(n, t) for n, t, _, _ in upward_imports(graph)] == [
      ("albert_tf.models.a", "albert_tf.pretrained"), ("albert_tf.models.a", "albert_tf.cli.flags")]
  assert circles({"x": [("y", "top", 1)], "y": [("x", "top", 1)]}) == [["x", "y"]]
  # An import inside a function closes a circle too (as runtime -> strategy -> runtime did).
  assert circles({"x": [("y", "function", 1)], "y": [("x", "top", 1)]}) == [["x", "y"]]
  assert circles({"x": [("y", "function", 1)], "y": [("x", "top", 1)]}, ("top",)) == []


def main():
  graph = import_graph()
  inside = sum(1 for found in graph.values() for _, where, _ in found if where == "function")
  upward = upward_imports(graph)
  print(f"modules: {len(graph)}")
  top_level = circles(graph, ("top",))
  print(f"import circles (module-level imports): {len(top_level)}")
  everything = circles(graph)
  print(f"import circles (all imports): {len(everything)} {[len(c) for c in everything]}")
  for circle in everything:
    print("  ", " ".join(circle))
  print(f"upward imports: {len(upward)} (module-level "
        f"{sum(1 for u in upward if u[2] == 'top')}, in functions "
        f"{sum(1 for u in upward if u[2] == 'function')})")
  for name, target, where, line in upward:
    print(f"   {name}:{line} -> {target} ({where})")
  print(f"imports of albert_tf modules inside functions: {inside}")
  counts = collections.Counter(name for name, found in graph.items()
                               for _, where, _ in found if where == "function")
  print("  ", dict(counts.most_common()))
  statements = function_imports()
  print(f"import statements inside functions (albert_tf and others): {len(statements)}, "
        f"without a `{LAZY_COMMENT}` comment: {sum(1 for s in statements if not s[3])}")


if __name__ == "__main__":
  sys.exit(main())
