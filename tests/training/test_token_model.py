"""TokenClassifier: words and tags in, run_ner.py's windows, loss, seqeval numbers, export and
checkpoint out."""

import numpy as np
import pytest
import tensorflow as tf

import albert_tf
from albert_tf.data.token_alignment import IGNORE
from albert_tf.errors import AlbertError
from albert_tf.tasks.token_classification import (TokenClassificationConfig,
                                                  TokenClassificationTask, seqeval_results)
from albert_tf.training.token_model import TokenClassifier
from tests.helpers.model_dirs import TARBALL, write_model_directories
from tests.helpers.ner import SENTENCES, write_ner_data
from tests.helpers.text import make_tiny_spm_model

WORDS = [[word for word, _ in sentence] for sentence in SENTENCES]
TAGS = [[tag for _, tag in sentence] for sentence in SENTENCES]
LENGTH, STRIDE = 10, 2  # windows: most sentences are longer than 8 pieces


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  root = tmp_path_factory.mktemp("token_model")
  spm = make_tiny_spm_model(str(root))
  dirs = write_model_directories(root, spm)
  task = TokenClassificationTask(TokenClassificationConfig(
      albert_config=f"{dirs[TARBALL]}/albert_config.json", data_dir="", spm_model_file=spm,
      max_seq_length=LENGTH, doc_stride=STRIDE,
      train_file=f"{write_ner_data(str(root / 'data'))}/train.txt"))
  model = TokenClassifier.from_pretrained(dirs[TARBALL], label_list=task.label_list,
                                          sequence_length=LENGTH, doc_stride=STRIDE, seed=1)
  model.compile(learning_rate=1e-3)
  history = model.fit(WORDS * 3, TAGS * 3, batch_size=8, epochs=3, verbose=0).history
  return dict(dirs=dirs, task=task, model=model, history=history, root=root)


def test_windows_loss_and_recipe_are_run_ners(setup):
  task, model = setup["task"], setup["model"]
  script = task.features("train")  # train.txt: the sentences 3 times
  features, label_ids, word_ids, sentence_index = model.windows(WORDS * 3, TAGS * 3)
  for key in ("input_ids", "input_mask", "segment_ids"):
    np.testing.assert_array_equal(features[key], script[key])
  np.testing.assert_array_equal(label_ids, script["label_ids"])
  np.testing.assert_array_equal(word_ids, script["word_ids"])
  np.testing.assert_array_equal(sentence_index, script["sentence_index"])
  assert (label_ids == IGNORE).any() and len(label_ids) > len(WORDS) * 3
  # The Keras loss over a batch is the task's loss of that batch (global batch = the batch).
  logits = tf.random.stateless_normal(label_ids[:5].shape + (len(task.label_list),), [1, 2])
  want, _ = task.build_losses({"label_ids": tf.constant(label_ids[:5])}, {"logits": logits}, 5)
  np.testing.assert_allclose(model.loss(label_ids[:5], logits), want, rtol=1e-6)
  fresh = TokenClassifier.from_pretrained(setup["dirs"][TARBALL], label_list=task.label_list,
                                          sequence_length=LENGTH)
  fresh.compile(num_train_steps=10)
  assert float(fresh.optimizer.learning_rate(0)) == pytest.approx(5e-5)  # run_ner.py's


def test_predict_entities_is_what_the_export_serves(setup, tmp_path):
  # An untrained head tags words at random: entities to compare (the trained one says "O").
  model = TokenClassifier.from_pretrained(setup["dirs"][TARBALL], label_list=setup["model"]
                                          .label_list, sequence_length=LENGTH, seed=3)
  texts = ["Tokyo is", "Albert is", "the dog", "Paris of"]
  entities = model.predict_entities(texts)
  assert sum(len(found) for found in entities) > 0
  served = tf.saved_model.load(model.save_for_serving(tmp_path / "export"))
  out = served.signatures["serving_default"](text=tf.constant(texts))
  for i, found in enumerate(entities):
    assert len(found) == int(out["num_entities"][i])
    for j, entity in enumerate(found):
      assert entity["type"] == out["entity_type"][i, j].numpy().decode()
      assert (entity["start"], entity["end"]) == (int(out["entity_start"][i, j]),
                                                  int(out["entity_end"][i, j]))
      assert entity["text"] == texts[i][entity["start"]:entity["end"]]
      assert entity["score"] == pytest.approx(float(out["entity_score"][i, j]), abs=1e-6)
  with pytest.raises(AlbertError, match="text 0 has .* pieces, more than 8"):
    model.predict_entities(["Rivers flow to Tokyo Japan and France"])


def test_fit_lowers_the_loss_and_tf_data_reads_as_lists(setup):
  model, history = setup["model"], setup["history"]
  assert history["loss"][-1] < history["loss"][0]
  assert "word_accuracy" in history
  ragged = tf.data.Dataset.from_tensor_slices(
      (tf.ragged.constant(WORDS), tf.ragged.constant(TAGS))).batch(2)
  from_lists = model.evaluate(WORDS, TAGS, verbose=0, return_dict=True)
  np.testing.assert_allclose(model.evaluate(ragged, verbose=0, return_dict=True)["loss"],
                             from_lists["loss"], rtol=1e-6)
  logits = model.predict(WORDS, verbose=0)
  assert [len(rows) for rows in logits] == [len(words) for words in WORDS]
  tags = model.predict_tags(WORDS, verbose=0)
  assert tags == [[model.label_list[i] for i in np.argmax(rows, -1)] for rows in logits]
  assert model.evaluate_entities(WORDS, TAGS, verbose=0) == seqeval_results(TAGS, tags, "BIO")


def test_save_checkpoint_reads_back(setup, tmp_path):
  model = setup["model"]
  prefix = model.save_checkpoint(tmp_path / "out" / "model.ckpt-best")
  loaded = albert_tf.from_pretrained(prefix)
  assert loaded.model_type == "token_classifier" and loaded.label_list == model.label_list
  again = TokenClassifier.from_pretrained(prefix, sequence_length=LENGTH, doc_stride=STRIDE)
  assert again.label_list == model.label_list and again.tag_scheme == "BIO"
  for mine, back in zip(model.predict(WORDS, verbose=0), again.predict(WORDS, verbose=0)):
    np.testing.assert_allclose(back, mine, atol=1e-5)
  clone = TokenClassifier.from_config(again.get_config())
  assert clone.get_config() == again.get_config()


def test_bad_input_is_one_clear_error(setup):
  model = setup["model"]
  with pytest.raises(AlbertError, match=r"tags\[0\]\[0\]: 'B-ORG' is not one of label_list"):
    model.fit([["Tokyo"]], [["B-ORG"]], verbose=0)
  with pytest.raises(AlbertError, match=r"tags\[0\]: 1 tags for 2 words"):
    model.evaluate([["Tokyo", "Japan"]], [["B-LOC"]], verbose=0)
  with pytest.raises(AlbertError, match=r"words\[0\]\[1\]: expected a string, got int"):
    model.predict_tags([["Tokyo", 3]])
  with pytest.raises(AlbertError, match=r"words\[0\]: expected a list of words, got a string"):
    model.predict_tags(["Tokyo is big"])
  with pytest.raises(AlbertError, match=r"tags\[0\]\[0\]: 9 is outside the 5 tags"):
    model.fit([["Tokyo"]], [[9]], verbose=0)
  with pytest.raises(AlbertError, match="label_list: the labels must include 'O'"):
    TokenClassifier.from_pretrained(setup["dirs"][TARBALL], label_list=["B-PER", "I-PER"])
  with pytest.raises(AlbertError, match="needs its tags"):
    TokenClassifier.from_pretrained(setup["dirs"][TARBALL])
