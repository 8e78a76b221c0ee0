"""albert_tf/common/output_layout.py owns the file names of an output directory: its best_trial.txt
reads back what it writes, and no other module spells one of its names."""

import ast
import os

from albert_tf.common import fileio, output_layout
from tests.helpers import remote as remote_helpers
from tests.test_import_layers import modules

# The names a module must take from output_layout (the generic "checkpoint"/"ckpt" also name
# other things: a `what` argument, a JSON key).
_NAMES = {value for key, value in vars(output_layout).items()
          if key.isupper() and isinstance(value, str)} - {"checkpoint", "ckpt"}


def test_best_trial_round_trip(tmp_path):
  assert output_layout.read_best_trial_value(str(tmp_path)) is None
  output_layout.write_best_trial(str(tmp_path), 300, 200, "0.8125")
  assert (tmp_path / "best_trial.txt").read_text() == "300:200:0.8125"
  assert output_layout.read_best_trial_value(str(tmp_path)) == 0.8125


def test_best_checkpoint_record(tmp_path):
  output_layout.write_best_checkpoint_record(str(tmp_path), "out/ckpt-2", 2, "eval_accuracy",
                                             0.5, {"eval_accuracy": 0.5, "global_step": 2})
  assert (tmp_path / "best_checkpoint.json").read_text().startswith('{\n  "checkpoint": ')


def test_model_description_and_best_trial_on_ram(tmp_path):
  """ram:// stands in for gs://: an output dir and a SentencePiece model in buckets."""
  spm = remote_helpers.copied_to_ram(fileio.write_bytes(str(tmp_path / "30k-clean.model"),
                                                        b"\x0a\x05model bytes"))
  output_dir = f"{remote_helpers.ram_bucket()}/out"
  written = output_layout.write_model_description(output_dir, '{"hidden_size": 8}\n', spm)
  assert written == [f"{output_dir}/albert_config.json", f"{output_dir}/30k-clean.model"]
  assert fileio.read_bytes(written[1]) == b"\x0a\x05model bytes"
  assert fileio.read_text(written[0]) == '{"hidden_size": 8}\n'
  assert output_layout.read_best_trial_value(output_dir) is None
  output_layout.write_best_trial(output_dir, 300, 200, "0.8125")
  assert output_layout.read_best_trial_value(output_dir) == 0.8125


def _docstrings(tree):
  return {id(node.body[0].value) for node in ast.walk(tree)
          if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
          and node.body and isinstance(node.body[0], ast.Expr)
          and isinstance(node.body[0].value, ast.Constant)}


def test_no_other_module_spells_an_output_file_name():
  assert {"best_trial.txt", "eval_results.txt", "model.ckpt-best", "label_list.json"} <= _NAMES
  found = []
  for name, path in modules().items():
    # (cli/ is exempt: its flag defaults name the official tarball's files, e.g.
    # --checkpoint_name=model.ckpt-best of export_to_tfhub.py)
    # (export_format is the other layout owner: the names inside a SavedModel's assets/, which
    # are the official tarball's names too)
    if name in ("albert_tf.common.output_layout", "albert_tf.common.export_format") or name.startswith(
        "albert_tf.cli."):
      continue
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read(), path)
    docstrings = _docstrings(tree)
    found += [f"{os.path.relpath(path)}:{node.lineno} {node.value}" for node in ast.walk(tree)
              if isinstance(node, ast.Constant) and node.value in _NAMES
              and id(node) not in docstrings]
  assert found == []
