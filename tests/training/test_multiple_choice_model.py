"""MultipleChoice: RACE's articles, questions and options as raw text in, Keras'
compile/fit/evaluate/predict, and run_race.py's ids, recipe, losses, export and checkpoint."""

import ast
import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import albert_tf
from albert_tf.errors import AlbertError
from albert_tf.tasks import race as race_task
from albert_tf.tasks.race import RaceConfig, RaceTask
from albert_tf.training import optimizer as optimizer_lib
from albert_tf.training import multiple_choice_model
from albert_tf.training.multiple_choice_model import MultipleChoice
from tests.helpers import glue_fixtures, scripts
from tests.helpers.model_dirs import TARBALL, write_model_directories
from tests.helpers.paths import REPO
from tests.helpers.text import make_tiny_spm_model

LENGTH, QA, STEPS, SEED, LR = 32, 8, 3, 7, 1e-3
BATCH = 8  # the whole train split: every step trains on the same batch, so its loss falls


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  """The tiny pretrained directory, RACE in its download layout and a 3-step run_race job run
  in-process through the scripts' runner (the features it cached, its TensorBoard losses)."""
  from albert_tf.training import runner  # pylint: disable=g-import-not-at-top
  from albert_tf.training.runtime import RuntimeConfig  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp("multiple_choice")
  spm = make_tiny_spm_model(root)
  init = write_model_directories(root, spm)[TARBALL]
  questions = glue_fixtures.write_race(str(root / "data"))
  task = RaceTask(RaceConfig(
      os.path.join(init, "albert_config.json"), str(root / "data"), max_seq_length=LENGTH,
      max_qa_length=QA, cached_dir=str(root / "out"),
      spm_model_file=os.path.join(init, "30k-clean.model"),
      init_checkpoint=os.path.join(init, "model.ckpt-best"), dropout_rate=0.0,
      shuffle_train_input=False))
  runner.run(task, runner.RunConfig(
      output_dir=str(root / "out"), do_train=True, train_batch_size=BATCH, learning_rate=LR,
      train_steps=STEPS, warmup_steps=1, save_checkpoints_steps=STEPS),
      RuntimeConfig(log_every_n_steps=1, steps_per_loop=1, seed=SEED))
  return dict(root=root, init=init, task=task, questions=questions)


def _columns(rows):
  """(articles, questions, options), answers of write_race's questions."""
  _, articles, questions, options, answers = (list(c) for c in zip(*rows))
  return (articles, questions, options), answers


@pytest.fixture(scope="module")
def model(setup):
  """The notebook's side of the run: the same seed, data order and recipe through fit();
  returns (model, its per-step losses)."""
  chooser = MultipleChoice.from_pretrained(setup["init"], sequence_length=LENGTH,
                                           max_qa_length=QA, dropout_rate=0.0, seed=SEED)
  chooser.compile(learning_rate=LR, num_train_steps=STEPS, num_warmup_steps=1)
  x, answers = _columns(setup["questions"]["train"])
  data = tf.data.Dataset.from_tensor_slices(({"article": x[0], "question": x[1],
                                              "options": x[2]},
                                             ["ABCD".index(a) for a in answers]))
  # One step an epoch over the repeated batches: each epoch's loss is that step's loss.
  history = chooser.fit(data.batch(BATCH).repeat(), epochs=STEPS, steps_per_epoch=1, verbose=0)
  return chooser, history.history["loss"]


def test_ids_are_run_races_features(setup, model):
  """The preprocessor's ids for raw text = the train TFRecord run_race.py's data path cached."""
  model, _ = model
  x, _ = _columns(setup["questions"]["train"])
  got = model.preprocessor(tuple(tf.constant(c) for c in x))
  want = scripts.read_feature_records(setup["task"].features_file("train"))
  assert len(want["input_ids"]) == len(x[0]) == 8
  for name, values in want.items():
    np.testing.assert_array_equal(got[name].numpy().reshape(8, -1), values, err_msg=name)


def test_fit_gives_run_races_losses_step_for_step(setup, model):
  """The same seed, data order and recipe: the losses of run_race.py's trainer, falling."""
  script_losses = scripts.training_losses(str(setup["root"] / "out"))
  _, losses = model
  assert len(script_losses) == STEPS and losses[-1] < losses[0]
  np.testing.assert_allclose(losses, script_losses, atol=1e-5, rtol=0)


def test_evaluate_and_predict_on_lists_and_pandas(setup, model):
  model, _ = model
  x, answers = _columns(setup["questions"]["dev"])
  assert set(model.evaluate(x, answers, verbose=0, return_dict=True)) == {"loss", "accuracy"}
  logits = model.predict(x, verbose=0)
  assert logits.shape == (5, 4)
  frame = pd.DataFrame({"article": x[0], "question": x[1], "options": x[2]})
  np.testing.assert_array_equal(
      model.predict((frame.article, frame.question, frame.options), verbose=0), logits)
  assert model.predict_answers(x, verbose=0) == ["ABCD"[i] for i in logits.argmax(-1)]


def test_save_for_serving_makes_run_races_export_call(setup, model, monkeypatch):
  """run_race.py's export (RaceTask.export) and save_for_serving: one export function, called
  with the same arguments (so the same signatures, warm-up records and version layout)."""
  model, _ = model
  calls = []
  record = lambda *args, **kwargs: calls.append((args, kwargs))
  monkeypatch.setattr(multiple_choice_model, "export_multiple_choice", record)
  monkeypatch.setattr(race_task, "export_multiple_choice", record)
  setup["task"].export(model.chooser, "export", "fp32")
  model.save_for_serving("export")
  (script_args, script_kwargs), (args, kwargs) = calls
  assert script_kwargs.pop("vocab_file") is None  # (a WordPiece vocabulary: none here)
  assert (args, kwargs) == (script_args, script_kwargs)


def test_save_for_serving_serves_what_predict_predicts(setup, model, tmp_path):
  model, _ = model
  x, _ = _columns(setup["questions"]["dev"])
  version = model.save_for_serving(tmp_path / "notebook")
  assert os.path.basename(version).isdigit() and os.path.isdir(os.path.join(version, "core_ops"))
  assert os.path.isfile(os.path.join(version, "assets.extra", "tf_serving_warmup_requests"))
  served = tf.saved_model.load(version)
  assert sorted(served.signatures) == ["serving_default", "tf_example", "token_ids"]
  out = served.signatures["serving_default"](
      article=tf.constant(x[0]), question=tf.constant(x[1]), options=tf.constant(x[2]))
  np.testing.assert_allclose(out["probabilities"].numpy(),
                             tf.nn.softmax(model.predict(x, verbose=0)).numpy(), atol=1e-5)
  assert [a.decode() for a in out["label"].numpy()] == model.predict_answers(x, verbose=0)


def test_save_checkpoint_reads_back(setup, model, tmp_path):
  model, _ = model
  x, _ = _columns(setup["questions"]["dev"])
  want = model.predict(x, verbose=0)
  prefix = model.save_checkpoint(tmp_path / "out" / "model.ckpt-best")
  assert albert_tf.from_pretrained(prefix).model_type == "multiple_choice"
  again = MultipleChoice.from_pretrained(prefix, sequence_length=LENGTH, max_qa_length=QA)
  np.testing.assert_allclose(again.predict(x, verbose=0), want, atol=1e-5)
  # As the official run_race.py leaves it (no best_checkpoint.json): the scorer is still kept.
  os.remove(tmp_path / "out" / "best_checkpoint.json")
  with pytest.raises(AlbertError, match="one-row head"):
    albert_tf.from_pretrained(prefix)
  official = MultipleChoice.from_pretrained(prefix, sequence_length=LENGTH, max_qa_length=QA)
  for mine, theirs in zip(official.chooser.weights, model.chooser.weights):
    np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


def test_bad_input_is_one_clear_error(setup, model):
  model, _ = model
  (articles, questions, options), answers = _columns(setup["questions"]["dev"][:2])
  x = (articles, questions, options)
  with pytest.raises(AlbertError, match=r"options\[1\]: 3 options, expected 4 \(num_choices\)"):
    model.predict((articles, questions, [options[0], options[1][:3]]))
  with pytest.raises(AlbertError, match=r"labels\[1\]: 'E' is not an answer: expected answer "
                                        r"indices 0..3 or letters A, B, C, D"):
    model.evaluate(x, ["A", "E"], verbose=0)
  with pytest.raises(AlbertError, match=r"labels\[0\]: 4 is outside num_choices=4"):
    model.evaluate(x, [4, 0], verbose=0)
  with pytest.raises(AlbertError, match="questions: expected strings, got int at index 1"):
    model.predict((articles, ["q", 3], options))
  with pytest.raises(AlbertError, match=r"a multiple-choice model takes \(articles, questions, "
                                        r"options\), got 2 columns"):
    model.predict((articles, questions))
  with pytest.raises(AlbertError, match="takes .*got one column of texts"):
    model.predict(articles)
  with pytest.raises(AlbertError, match="no options in the inputs"):
    model.predict({"article": articles, "question": questions})
  with pytest.raises(AlbertError, match="2 articles, 1 questions and 2 option lists"):
    model.predict((articles, questions[:1], options))
  with pytest.raises(AlbertError, match="expected strings, got int32"):
    model.predict(tf.data.Dataset.from_tensor_slices(([1], [2], [[3, 4, 5, 6]])).batch(1))


def test_defaults_are_run_races_and_get_config_round_trips(model):
  model, _ = model
  """compile() and the lengths default to run_race.py's flags (read from the script)."""
  tree = ast.parse(open(os.path.join(REPO, "run_race.py"), encoding="utf-8").read())
  calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
  defaults = {k.arg: ast.literal_eval(k.value) for c in calls if getattr(
      c.func, "attr", "") == "define_flags" for k in c.keywords}
  qa_flag = next(c for c in calls if getattr(c.func, "attr", "") == "DEFINE_integer"
                 and ast.literal_eval(c.args[0]) == "max_qa_length")
  assert (multiple_choice_model.LEARNING_RATE, multiple_choice_model.SEQUENCE_LENGTH,
          multiple_choice_model.MAX_QA_LENGTH) == (
              defaults["learning_rate"], defaults["max_seq_length"],
              ast.literal_eval(qa_flag.args[1]))
  clone = MultipleChoice.from_config(model.get_config())
  assert clone.get_config() == model.get_config()
  clone.compile(num_train_steps=10)
  assert isinstance(clone.optimizer, optimizer_lib.AlbertAdamW)
  assert clone.optimizer.global_clipnorm == 1.0
  assert float(clone.optimizer.learning_rate(0)) == pytest.approx(1e-5)
