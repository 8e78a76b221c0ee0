"""Chinese ALBERT end to end (issue 62): an official-layout albert_*_zh directory (built here by
our code: albert_config.json, model.ckpt-best, vocab_chinese.txt, no SentencePiece model) and its
HF conversion (vocab.txt, BertTokenizer) through every script with a WordPiece vocabulary:

  * run_classifier.py --task_name=custom on CLUE AFQMC's layout (train.json / dev.json /
    test.json, JSON Lines), the official flags with --vocab_file alone: train, eval, predict,
    export; the export answers raw Chinese text through serving_default with the probabilities
    of the run's own predictions, and its token_ids signature fed the Python tokenizer's ids
    gives the same answers (so the in-graph WordPiece ids are the Python ones);
  * run_squad_v1.py on CMRC 2018's format (SQuAD v1.1 JSON, Chinese without spaces), the
    directory as the one model argument (--init_checkpoint=<albert_tiny_zh>);
  * run_race.py on Chinese passages, the HF Chinese directory as --init_checkpoint;
  * export_savedmodel.py --albert_directory=<albert_tiny_zh> --with_preprocessor: the TF Hub
    encoder names vocab.txt in tokenization_info, the preprocessor gives the Python ids;
  * create_pretraining_data.py --vocab_file (the official WordPiece path), then
    run_pretraining.py on its records from the directory;
  * run_ner.py on Chinese NER in CoNLL columns (one character per line), --vocab_file alone:
    train, eval, predict (its --export_dir is refused for WordPiece models:
    tests/cli/test_ner_flags.py).

Seven script runs, two at a time, started by one module-scoped fixture.
"""

import concurrent.futures
import json
import os

import numpy as np
import pytest

from albert_tf.text import packing
from albert_tf.text import tokenization
from tests.helpers import chinese
from tests.helpers import finetune
from tests.helpers import model_dirs
from tests.helpers import scripts

SEQ = 32


def _runs(root, dirs):
  """The script runs (two at a time); {name: proc}."""
  zh, hf = dirs[model_dirs.ZH], dirs[model_dirs.ZH_HF]
  vocab = os.path.join(zh, "vocab_chinese.txt")
  official = [f"--albert_config_file={zh}/albert_config.json",
              f"--init_checkpoint={zh}/model.ckpt-best", f"--vocab_file={vocab}"]
  common = ["--do_lower_case", "--learning_rate=1e-3", "--save_checkpoints_steps=2"]
  corpus = chinese.write_corpus(root / "corpus.txt")
  jobs = {
      "classifier": ("run_classifier.py", official + common + [
          "--task_name=custom", "--text_a_column=sentence1", "--text_b_column=sentence2",
          "--label_column=label", "--id_column=id", f"--data_dir={_afqmc_dir(root)}",
          "--output_dir=afqmc_out", f"--max_seq_length={SEQ}", "--train_step=4",
          "--warmup_step=1", "--train_batch_size=4", "--eval_batch_size=4",
          "--predict_batch_size=4", "--do_train", "--do_eval", "--do_predict",
          "--export_dir=afqmc_export"]),
      "squad": ("run_squad_v1.py", common + [
          f"--init_checkpoint={zh}", f"--train_file={chinese.write_cmrc(root / 'cmrc.json')}",
          f"--predict_file={root / 'cmrc.json'}", "--output_dir=cmrc_out",
          "--train_feature_file=cmrc_out/train.tfrecord",
          "--predict_feature_file=cmrc_out/dev.tfrecord",
          "--predict_feature_left_file=cmrc_out/dev_left_file", "--max_seq_length=48",
          "--doc_stride=16", "--max_query_length=16", "--do_train=true", "--do_predict=true",
          "--train_batch_size=2", "--predict_batch_size=4", "--num_train_epochs=1.0",
          # Seeded, and 20 candidates each way: a head of random weights trained two steps must
          # still rank some valid span (start <= end, in the passage) among them.
          "--warmup_proportion=.1", "--n_best_size=20", "--max_answer_length=6", "--seed=1"]),
      "race": ("run_race.py", common + [
          f"--init_checkpoint={hf}", f"--data_dir={chinese.write_race(root / 'race')}",
          "--output_dir=race_out", "--train_file=race_out/train.tf_record",
          "--eval_file=race_out/eval.tf_record", "--max_seq_length=40", "--max_qa_length=12",
          "--train_batch_size=2", "--eval_batch_size=2", "--train_step=2", "--warmup_step=1",
          "--do_train", "--do_eval"]),
      "hub_export": ("export_savedmodel.py", [
          f"--albert_directory={zh}", "--export_path=zh_hub", "--with_preprocessor",
          "--preprocessor_seq_length=16"]),
      "ner": ("run_ner.py", official + common + [
          f"--data_dir={chinese.write_conll_ner(root / 'ner')}",
          "--output_dir=ner_out", "--max_seq_length=16", "--train_step=4", "--warmup_step=1",
          "--train_batch_size=2", "--eval_batch_size=2", "--predict_batch_size=2", "--do_train",
          "--do_eval", "--do_predict"]),
      "pretraining_data": ("create_pretraining_data.py", [
          f"--input_file={corpus}", "--output_file=pretraining.tfrecord",
          f"--vocab_file={vocab}", "--do_lower_case", "--max_seq_length=24",
          "--max_predictions_per_seq=4", "--dupe_factor=2", "--random_seed=1"]),
  }

  def run(name):
    script, args = jobs[name]
    proc = scripts.run_script(script, args, str(root))
    if name == "pretraining_data" and proc.returncode == 0:
      proc = scripts.run_script("run_pretraining.py", [
          f"--albert_config_file={zh}/albert_config.json", f"--init_checkpoint={zh}", "--input_file=pretraining.tfrecord",
          "--output_dir=pretraining_out", "--max_seq_length=24", "--max_predictions_per_seq=4",
          "--train_batch_size=2", "--num_train_steps=2", "--num_warmup_steps=1",
          "--save_checkpoints_steps=2", "--learning_rate=1e-3", "--do_train"], str(root))
    return proc

  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    return dict(zip(jobs, pool.map(run, jobs)))


def _afqmc_dir(root):
  return str(root / "afqmc")


@pytest.fixture(scope="module")
def zh_runs(tmp_path_factory):
  root = tmp_path_factory.mktemp("zh")
  dirs = model_dirs.write_chinese_directories(root / "models")
  pairs = chinese.write_afqmc(_afqmc_dir(root))
  return root, dirs, pairs, _runs(root, dirs)


@pytest.mark.parametrize("name", ["classifier", "squad", "race", "hub_export",
                                  "pretraining_data", "ner"])
def test_each_script_runs_with_the_wordpiece_vocabulary_alone(zh_runs, name):
  _, _, _, procs = zh_runs
  assert procs[name].returncode == 0, scripts.describe(procs[name])
  assert "spm_model_file" not in procs[name].stderr.split("error:")[-1]


def test_the_export_answers_raw_chinese_text_as_the_run_predicted(zh_runs):
  root, dirs, pairs, procs = zh_runs
  assert procs["classifier"].returncode == 0, scripts.describe(procs["classifier"])
  export = scripts.versioned_export(str(root / "afqmc_export"))
  with open(os.path.join(export, "assets", "vocab.txt"), "rb") as f, open(
      os.path.join(dirs[model_dirs.ZH], "vocab_chinese.txt"), "rb") as g:
    assert f.read() == g.read()  # the vocabulary travels with the export
  tok = tokenization.FullTokenizer(
      vocab_file=os.path.join(dirs[model_dirs.ZH], "vocab_chinese.txt"))
  features = [packing.encode_text_pair(p["sentence1"], p["sentence2"], SEQ, tok) for p in pairs]
  ids = {k: [f[k] for f in features] for k in ("input_ids", "input_mask", "segment_ids")}
  raw, by_ids = finetune.run_serving_client(str(root / "client"), [
      dict(export_dir=export, signature="serving_default",
           inputs={"text_a": [p["sentence1"] for p in pairs],
                   "text_b": [p["sentence2"] for p in pairs]}),
      dict(export_dir=export, signature="token_ids", inputs=ids)], tensorflow_text=True)
  predicted = scripts.read_test_results(str(root / "afqmc_out" / "test_results.tsv"))
  np.testing.assert_allclose(raw["probabilities"], predicted, atol=1e-5)
  np.testing.assert_allclose(by_ids["probabilities"], raw["probabilities"], atol=1e-6)
  assert np.ptp(predicted[:, 0]) > 0  # the rows differ: equal answers are not a constant


def test_cmrc_predictions_are_spans_of_the_chinese_passage(zh_runs):
  root, dirs, _, procs = zh_runs
  assert procs["squad"].returncode == 0, scripts.describe(procs["squad"])
  with open(root / "cmrc_out" / "predictions.json", encoding="utf-8") as f:
    predictions = json.load(f)
  assert sorted(predictions) == [f"q{i}" for i in range(len(chinese.CMRC_QUESTIONS))]
  with open(root / "cmrc_out" / "nbest_predictions.json", encoding="utf-8") as f:
    nbest = json.load(f)
  # A tiny model trained two steps may find no valid span ("empty", the official answer then);
  # every answer it gives is characters of the passage, cut at WordPiece boundaries.
  texts = [e["text"] for entries in nbest.values() for e in entries if e["text"] != "empty"]
  assert texts and all(t in chinese.CMRC_CONTEXT for t in texts), texts
  assert all(a == "empty" or a in chinese.CMRC_CONTEXT for a in predictions.values())
  records = scripts.read_feature_records(str(root / "cmrc_out" / "train.tfrecord"),
                                         ("input_ids", "start_positions", "end_positions"))
  # The windows holding an answer point at its pieces (the others at [CLS], position 0).
  tok = tokenization.FullTokenizer(vocab_file=os.path.join(dirs[model_dirs.ZH],
                                                           "vocab_chinese.txt"))
  found = set()
  for ids, start, end in zip(records["input_ids"], records["start_positions"][:, 0],
                             records["end_positions"][:, 0]):
    if start > 0:
      found.add("".join(tok.convert_ids_to_tokens(ids[start:end + 1])).replace("##", ""))
  assert found == {answer for _, answer in chinese.CMRC_QUESTIONS}


def test_race_and_pretraining_read_the_directories_vocabulary(zh_runs):
  root, _, _, procs = zh_runs
  assert procs["race"].returncode == 0, scripts.describe(procs["race"])
  assert scripts.eval_blocks(str(root / "race_out" / "eval_results.txt"))
  assert procs["pretraining_data"].returncode == 0, scripts.describe(procs["pretraining_data"])
  assert os.path.exists(root / "pretraining_out" / "ckpt-2.index") or any(
      name.startswith("ckpt-2") or name.startswith("model.ckpt-2")
      for name in os.listdir(root / "pretraining_out"))


def test_tf_hub_export_of_the_directory_tokenizes_as_python(zh_runs):
  root, dirs, _, procs = zh_runs
  assert procs["hub_export"].returncode == 0, scripts.describe(procs["hub_export"])
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_text  # pylint: disable=g-import-not-at-top,unused-import
  encoder = tf.saved_model.load(str(root / "zh_hub" / "encoder"))
  info = encoder.signatures["tokenization_info"]()
  assert info["vocab_file"].numpy().decode().endswith("vocab.txt")
  preprocessor = tf.saved_model.load(str(root / "zh_hub" / "preprocessor"))
  tok = tokenization.FullTokenizer(vocab_file=os.path.join(dirs[model_dirs.ZH],
                                                           "vocab_chinese.txt"))
  text = chinese.SENTENCES[1]
  expected = [tok.cls_id] + tok.encode(text) + [tok.sep_id]
  got = preprocessor(tf.constant([text]))["input_word_ids"].numpy()[0].tolist()
  assert got == expected + [0] * (16 - len(expected))


def test_ner_tags_every_chinese_character_of_the_test_file(zh_runs):
  root, _, _, procs = zh_runs
  assert procs["ner"].returncode == 0, scripts.describe(procs["ner"])
  assert "eval_f1" in (root / "ner_out" / "eval_results.txt").read_text(encoding="utf-8")
  with open(root / "ner_out" / "tag_list.json", encoding="utf-8") as f:
    tags = set(json.load(f)["labels"])
  assert tags == {"O", "B-LOC", "I-LOC", "B-ORG", "I-ORG"}
  blocks = (root / "ner_out" / "test_predictions.txt").read_text(encoding="utf-8").strip()
  rows = [[line.split() for line in block.splitlines()] for block in blocks.split("\n\n")]
  # The test file's own lines (character, gold tag) with the predicted tag as a last column.
  assert [[r[0] for r in block] for block in rows] == [list(t) for t, _ in chinese.NER_SENTENCES]
  assert all(len(r) == 3 and r[2] in tags for block in rows for r in block)
