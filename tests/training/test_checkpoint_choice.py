"""The one rule for the checkpoint evaluation, prediction and export use
(`checkpointing.checkpoint_for_inference`), with its one error, and the callers that go
through it (the Trainer, the runner's --do_predict / --export_dir)."""

import os

import pytest
import tensorflow as tf

from albert_tf.errors import AlbertError
from albert_tf.training import checkpointing
from albert_tf.training import runner
from albert_tf.training import trainer as trainer_lib
from tests.helpers import training as helpers


def _write(prefix):
  """A small intact checkpoint at `prefix` (its .index and data files)."""
  return tf.train.Checkpoint(v=tf.Variable([1.0, 2.0])).write(prefix)


def _no_checkpoint(flag, output_dir):
  return (f"{flag}: no checkpoint in --output_dir={output_dir} and no --init_checkpoint (train "
          f"first with --do_train, or point --output_dir at a fine-tuned model)")


@pytest.fixture(name="run_dir")
def fixture_run_dir(tmp_path):
  """An output dir after a sweep: ckpt-2, ckpt-4 and model.ckpt-best."""
  for name in ("ckpt-2", "ckpt-4", "model.ckpt-best"):
    _write(str(tmp_path / name))
  return tmp_path


def test_predict_and_export_read_the_best_evaluation_the_latest(run_dir):
  out = str(run_dir)
  for flag in ("--do_predict", "--export_dir"):
    assert checkpointing.checkpoint_for_inference(out, None, flag) == os.path.join(
        out, "model.ckpt-best")
  assert checkpointing.checkpoint_for_inference(out, None, "--do_eval", prefer_best=False) == (
      os.path.join(out, "ckpt-4"))


def test_a_broken_best_is_an_error_never_an_older_model(run_dir):
  data = [f for f in os.listdir(run_dir) if f.startswith("model.ckpt-best.data")][0]
  with open(run_dir / data, "r+b") as f:
    f.truncate(3)
  with pytest.raises(AlbertError, match=r"model\.ckpt-best: .*rerun --do_eval"):
    checkpointing.checkpoint_for_inference(str(run_dir), None, "--do_predict")


def test_a_named_checkpoint_or_directory_wins_and_must_exist(run_dir, tmp_path_factory):
  out = str(run_dir)
  other = tmp_path_factory.mktemp("other")
  _write(str(other / "ckpt-7"))
  assert checkpointing.checkpoint_for_inference(out, None, "--do_eval", str(other)) == str(
      other / "ckpt-7")
  named = os.path.join(out, "ckpt-2")
  assert checkpointing.checkpoint_for_inference(out, None, "--do_eval", named) == named
  with pytest.raises(AlbertError, match=r"ckpt-3: no such checkpoint \(expected .*ckpt-3\.index\)"):
    checkpointing.checkpoint_for_inference(out, None, "--do_eval", os.path.join(out, "ckpt-3"))
  empty = tmp_path_factory.mktemp("empty")
  with pytest.raises(AlbertError, match="no checkpoint in this directory"):
    checkpointing.checkpoint_for_inference(out, None, "--do_eval", str(empty))


def test_init_checkpoint_is_the_last_resort_and_none_at_all_is_one_error(tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  init = _write(str(tmp_path / "init" / "model.ckpt-9"))
  assert checkpointing.checkpoint_for_inference(str(out), init, "--do_predict") == init
  for flag in ("--do_eval", "--do_predict", "--export_dir"):
    with pytest.raises(AlbertError) as e:
      checkpointing.checkpoint_for_inference(str(out), None, flag)
    assert str(e.value) == _no_checkpoint(flag, out)


def test_trainer_and_runner_say_the_same_line(tmp_path):
  """evaluate/predict on a Trainer, --do_predict and --export_dir of a run: the one error."""
  out = tmp_path / "out"
  out.mkdir()
  trainer = trainer_lib.Trainer(helpers.make_toy_task(), None, str(out))
  with pytest.raises(AlbertError) as e:
    trainer.evaluate(8)
  assert str(e.value) == _no_checkpoint("--do_eval", out)
  with pytest.raises(AlbertError) as e:
    next(trainer.predict(8))
  assert str(e.value) == _no_checkpoint("--do_predict", out)
  for flag, kwargs in (("--do_predict", {"do_predict": True}),
                       ("--export_dir", {"export_dir": str(tmp_path / "export")})):
    with pytest.raises(AlbertError) as e:
      runner.run(helpers.make_toy_task(), runner.RunConfig(output_dir=str(out), **kwargs))
    assert str(e.value) == _no_checkpoint(flag, out)
