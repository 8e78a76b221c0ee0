"""run_pretraining.py: one-line errors, and a --recompute=layer run end to end (it trains, its
progress lines carry the memory report, and its checkpoint restores into a recompute=none model)."""

import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.tasks import pretraining as pretraining_task
from tests.helpers import training as helpers
from tests.helpers.tiny_config import write_tiny_config


def test_script_prints_one_line_error(tmp_path, capsys):
  """run_pretraining.py's main, wrapped by run_main: one `error: ...` line, exit code 2."""
  import runpy  # pylint: disable=g-import-not-at-top
  from absl import flags  # pylint: disable=g-import-not-at-top
  from albert_tf.errors import run_main  # pylint: disable=g-import-not-at-top
  # Other scripts' tests may have defined flags of the same (official) names in this process:
  # drop them, load the script, and remove what it defined afterwards.
  script_flags = ("albert_config_file", "input_file", "output_dir", "init_checkpoint",
                  "max_seq_length", "max_predictions_per_seq", "do_train", "do_eval",
                  "train_batch_size", "eval_batch_size", "optimizer", "learning_rate",
                  "poly_power", "num_train_steps", "num_warmup_steps", "start_warmup_step",
                  "save_checkpoints_steps", "keep_checkpoint_max", "max_eval_steps",
                  "init_from_group0", "shuffle_seed")
  for name in script_flags:
    if name in flags.FLAGS:
      delattr(flags.FLAGS, name)
  before = set(flags.FLAGS)
  script = runpy.run_path(str(helpers.REPO_ROOT / "run_pretraining.py"), run_name="script")
  config = write_tiny_config(tmp_path / "c.json")
  argv = ["run_pretraining.py"] + helpers.pretraining_flags(
      config, str(tmp_path / "none-*.tfrecord"), tmp_path / "o", 2)
  try:
    flags.FLAGS(argv)
    with pytest.raises(SystemExit) as e:
      run_main(script["main"])(argv)
  finally:
    flags.FLAGS.unparse_flags()
    for name in set(flags.FLAGS) - before:
      if name in script_flags:
        delattr(flags.FLAGS, name)
  assert e.value.code == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert err[-1].startswith("error: --input_file: no file matches"), err
  assert err[-1].endswith("none-*.tfrecord'")


@pytest.fixture(scope="module")
def layer_run(tmp_path_factory):
  """run_pretraining.py --recompute=layer, 8 steps on tiny real-text data (the test launcher
  enables op determinism, under which unseeded dropout cannot run: dropout 0, as ALBERT v2)."""
  tmp = tmp_path_factory.mktemp("recompute_run")
  data = helpers.make_pretraining_data(tmp, num_files=1, dupe_factor=1, corpus_bytes=15_000,
                                       repeats=1)
  config = write_tiny_config(tmp / "albert_config.json", num_hidden_groups=2,
                             num_hidden_layers=4)
  out = tmp / "run"
  result = helpers.run_pretraining(
      helpers.pretraining_flags(config, data, out, steps=8, save_every=8, recompute="layer",
                                learning_rate=0.005, optimizer="adamw"), timeout=300)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
  return config, out, result.stdout


def test_run_pretraining_with_recompute_layer_trains_and_reports_memory(layer_run):
  _, out, stdout = layer_run
  lines = [l for l in stdout.splitlines() if l.startswith("step ")]
  assert len(lines) == 8, stdout[-2000:]
  for line in lines:
    assert re.search(r" \| peak RSS \d+ MB$", line), line
  rss = [int(re.search(r"peak RSS (\d+) MB", l).group(1)) for l in lines]
  assert rss == sorted(rss) and rss[0] > 100  # a high-water mark of a TF process

  def loss(line):
    return float(line.split("| loss ")[1].split(" ")[0])
  assert all(np.isfinite(loss(l)) for l in lines)
  assert loss(lines[-1]) < loss(lines[0])
  assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-8")


def test_layer_checkpoint_restores_into_recompute_none(layer_run, tmp_path):
  config, out, _ = layer_run
  task = pretraining_task.PretrainingTask(pretraining_task.PretrainingConfig(
      AlbertConfig.from_json_file(config), max_seq_length=helpers.TINY_SEQ,
      max_predictions_per_seq=helpers.TINY_PREDS))
  model = task.build_model()
  assert model.encoder.recompute == "none"
  def model_values(path):  # the model's own variables (no optimizer slots)
    return {k: v for k, v in helpers.checkpoint_values(path).items()
            if k.startswith("model/") and ".OPTIMIZER_SLOT" not in k}

  # The same variables as a recompute=none model writes ...
  fresh = model_values(tf.train.Checkpoint(model=model).write(str(tmp_path / "fresh" / "ckpt")))
  written = model_values(tf.train.latest_checkpoint(str(out)))
  assert len(written) > 20 and set(fresh) == set(written)
  # ... and they all restore into it, with the trained values.
  status = tf.train.Checkpoint(model=model).restore(tf.train.latest_checkpoint(str(out)))
  status.assert_existing_objects_matched()
  restored = model_values(tf.train.Checkpoint(model=model).write(str(tmp_path / "back" / "ckpt")))
  changed = 0
  for key, value in written.items():
    np.testing.assert_array_equal(restored[key], value, err_msg=key)
    changed += not np.array_equal(fresh[key], value)
  assert changed > len(written) // 2
