"""The cli rule: importing any module under albert_tf/ other than albert_tf/cli/ defines no absl
flag and pulls in no part of albert_tf.cli (flags are defined and read only by the cli layer and
the top-level scripts)."""

import json
import os
import subprocess
import sys

from tests.helpers.paths import REPO

# Runs in a fresh interpreter: this test process has flags of its own (other tests define the
# shared groups), and a module imported once here would not show its definitions again.
_IMPORT_EVERYTHING = r"""
import importlib, json, pkgutil, sys
from absl import flags
import albert_tf

# The libraries albert_tf uses may define flags of their own on import (absl.logging does):
# import them first, so that what appears below is what albert_tf's modules define.
for name in ("absl.app", "absl.logging", "numpy", "sentencepiece", "tensorflow", "tf_keras",
             "tensorflow_text"):
  importlib.import_module(name)
before = set(flags.FLAGS)
imported = []

def import_all(package):  # (pkgutil.walk_packages would import albert_tf.cli to look inside)
  for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
    if info.name != "albert_tf.cli":
      module = importlib.import_module(info.name)
      imported.append(info.name)
      if info.ispkg:
        import_all(module)

import_all(albert_tf)
defined_by = {name: module for module, defined in flags.FLAGS.flags_by_module_dict().items()
              for name in (flag.name for flag in defined)}
print(json.dumps({
    "imported": imported,
    "new_flags": {name: defined_by.get(name) for name in sorted(set(flags.FLAGS) - before)},
    "cli_modules": sorted(m for m in sys.modules if m == "albert_tf.cli"
                          or m.startswith("albert_tf.cli.")),
}))
"""


def test_library_modules_define_no_flags():
  proc = subprocess.run([sys.executable, "-c", _IMPORT_EVERYTHING], capture_output=True,
                        text=True, cwd=REPO, timeout=600, check=False,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO))
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  # Every module was imported, the libraries of the commands included (they used to define
  # flags; the commands themselves are albert_tf/cli/<command>.py).
  for module in ("albert_tf.checkpoints.conversion", "albert_tf.export.hub_encoder",
                 "albert_tf.tools.docstring_corpus", "albert_tf.tools.pair_task",
                 "albert_tf.tools.savedmodel_query", "albert_tf.text.sentencepiece_training",
                 "albert_tf.training.runner"):
    assert module in result["imported"]
  assert result["new_flags"] == {}
  assert result["cli_modules"] == []
