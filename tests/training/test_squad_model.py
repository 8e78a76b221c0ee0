"""QuestionAnswerer: questions, contexts and answers in, run_squad.py's windows, loss,
post-processing, export and checkpoint out (SQuAD v2.0, the tiny fixture)."""

import json

import numpy as np
import pytest
import tensorflow as tf

import albert_tf
from albert_tf.data import squad_postprocess
from albert_tf.errors import AlbertError
from albert_tf.tasks.squad import SquadConfig, SquadTask
from albert_tf.training.squad_model import QuestionAnswerer
from tests.helpers import squad as squad_helpers
from tests.helpers.model_dirs import TARBALL, write_model_directories

WINDOWS = dict(sequence_length=64, doc_stride=32, max_query_length=16)  # several per question


def _questions(path):
  """(questions, contexts, answers) of a SQuAD file, answers as fit() takes them."""
  with open(path, encoding="utf-8") as f:
    data = json.load(f)["data"]
  questions, contexts, answers = [], [], []
  for article in data:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        questions.append(qa["question"])
        contexts.append(paragraph["context"])
        answers.append(None if qa.get("is_impossible") else
                       (qa["answers"][0]["text"], qa["answers"][0]["answer_start"]))
  return questions, contexts, answers


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  root = tmp_path_factory.mktemp("squad_model")
  spm = squad_helpers.make_squad_spm_model(root)
  dirs = write_model_directories(root, spm, vocab_size=200,
                                 **squad_helpers.TINY_CONFIG_OVERRIDES)
  model = QuestionAnswerer.from_pretrained(dirs[TARBALL], version_2_with_negative=True, seed=1,
                                           **WINDOWS)
  model.compile(learning_rate=1e-3)
  questions, contexts, answers = _questions(squad_helpers.TINY_V2)
  history = model.fit((questions, contexts), answers, batch_size=8, epochs=3,
                      verbose=0).history
  return dict(dirs=dirs, spm=spm, root=root, model=model, history=history,
              questions=questions, contexts=contexts, answers=answers)


def test_windows_and_loss_are_run_squads(setup):
  model = setup["model"]
  task = SquadTask(SquadConfig(
      albert_config=f"{setup['dirs'][TARBALL]}/albert_config.json", spm_model_file=setup["spm"],
      train_file=str(squad_helpers.TINY_V2), cache_dir=str(setup["root"]),
      shuffle_train_input=False, max_seq_length=WINDOWS["sequence_length"],
      doc_stride=WINDOWS["doc_stride"], max_query_length=WINDOWS["max_query_length"]))
  examples = task.train_examples()  # the script's order
  answers = [None if e.is_impossible else (e.orig_answer_text, e.start_position)
             for e in examples]
  _, inputs, labels = model.features(model.examples(
      ([e.question_text for e in examples], [e.paragraph_text for e in examples]), answers),
                                     is_training=True)
  assert len(inputs["input_ids"]) > len(examples)
  script_features, script_labels = next(iter(task.build_inputs(
      "train", batch_size=len(inputs["input_ids"]))))
  for key in ("input_ids", "input_mask", "segment_ids", "p_mask", "start_positions"):
    np.testing.assert_array_equal(inputs[key], script_features[key])
  for key in labels:
    np.testing.assert_array_equal(labels[key], script_labels[key])
  # The Keras loss of a batch is the task's (global batch = the batch).
  outputs = model(inputs, training=False)
  want, _ = task.build_losses({k: tf.constant(v) for k, v in labels.items()}, outputs,
                              len(labels["is_impossible"]))
  np.testing.assert_allclose(model.compute_loss(inputs, labels, outputs), want, rtol=1e-5)
  assert setup["history"]["loss"][-1] < setup["history"]["loss"][0]  # a few fit() steps learn
  fresh = QuestionAnswerer.from_pretrained(setup["dirs"][TARBALL], **WINDOWS)
  fresh.compile(num_train_steps=20)
  schedule = fresh.optimizer.learning_rate  # run_squad.py's: 5e-5, warm-up 10 % of the steps
  assert schedule.num_warmup_steps == 2 and float(schedule(2)) == pytest.approx(5e-5 * 0.9)
  assert model.optimizer.learning_rate.num_warmup_steps == int(
      model.optimizer.learning_rate.num_train_steps * 0.1)


def test_answers_are_the_saved_models_after_the_scripts_post_processing(setup, tmp_path):
  model, questions, contexts = setup["model"], setup["questions"], setup["contexts"]
  answers = model.predict_answers(questions, contexts, verbose=0)
  served = tf.saved_model.load(model.save_for_serving(tmp_path / "export"))
  examples = model.examples((questions, contexts))
  features, inputs, _ = model.features(examples, is_training=False)
  outputs = served.signatures["serving_default"](**{k: tf.constant(v) for k, v in inputs.items()})
  results = {f.unique_id: {k: v.numpy()[row] for k, v in outputs.items()}
             for row, f in enumerate(features)}
  nbest, null_odds = squad_postprocess.v2_nbest(examples, features, results)
  assert any(entries[0]["text"] for entries in nbest.values())
  for example, answer in zip(examples, answers):
    want = nbest[example.qas_id]
    assert [e["text"] for e in answer["nbest"]] == [e["text"] for e in want]
    assert answer["probability"] == pytest.approx(want[0]["probability"], abs=1e-5)
    assert answer["null_odds"] == pytest.approx(null_odds[example.qas_id], abs=1e-4)
    assert answer["text"] == ("" if answer["null_odds"] > 0.0 else want[0]["text"])
  metrics = model.evaluate_answers(questions, contexts, setup["answers"], verbose=0)
  assert (metrics["HasAns_total"], metrics["NoAns_total"]) == (4, 2)


def test_save_checkpoint_reads_back(setup, tmp_path):
  model = setup["model"]
  prefix = model.save_checkpoint(tmp_path / "out" / "model.ckpt-best")
  assert albert_tf.from_pretrained(prefix).model_type == "squad_v2"
  again = QuestionAnswerer.from_pretrained(prefix, **WINDOWS)
  assert again.version_2_with_negative
  xs = (setup["questions"][:2], setup["contexts"][:2])
  mine, back = model.predict(xs, verbose=0), again.predict(xs, verbose=0)
  for key in ("start_top_log_probs", "end_top_log_probs", "cls_logits"):
    np.testing.assert_allclose(back[key], mine[key], atol=1e-5)
  clone = QuestionAnswerer.from_config(again.get_config())
  assert clone.get_config() == again.get_config()


def test_bad_input_is_one_clear_error(setup):
  model = setup["model"]
  context = "Tokyo is the capital of Japan."
  with pytest.raises(AlbertError, match=r"answers\[0\]: 'Japan' is not at answer_start 3 of "
                                        r"contexts\[0\] \(which has 'yo is' there\)"):
    model.fit((["Where?"], [context]), [("Japan", 3)], verbose=0)
  with pytest.raises(AlbertError, match="questions: expected strings, got int at index 1"):
    model.predict_answers(["Where?", 7], [context, context])
  with pytest.raises(AlbertError, match="2 questions but 1 contexts"):
    model.predict_answers(["Where?", "What?"], [context])
  with pytest.raises(AlbertError, match=r"answers\[0\]: answer_start should be a character "):
    model.fit((["Where?"], [context]), [("Japan", "24")], verbose=0)
  with pytest.raises(AlbertError, match=r"one answer per question \(1\), got 2"):
    model.fit((["Where?"], [context]), [("Japan", 24), None], verbose=0)
  v1 = QuestionAnswerer.from_pretrained(setup["dirs"][TARBALL], **WINDOWS)
  answer = v1.predict_answers(["Where?"], [context], verbose=0)[0]
  assert "null_odds" not in answer
  assert answer["text"] == "empty" or answer["text"] in context  # (the official "empty")
  with pytest.raises(AlbertError, match=r"answers\[0\]: no answer, but a SQuAD v1.1 model"):
    v1.fit((["Where?"], [context]), [None], verbose=0)
  with pytest.raises(AlbertError, match="its head is SQuAD v1.1's"):
    v1.save_checkpoint(setup["root"] / "v1" / "model.ckpt")
    QuestionAnswerer.from_pretrained(setup["root"] / "v1" / "model.ckpt",
                                     version_2_with_negative=True, **WINDOWS)
