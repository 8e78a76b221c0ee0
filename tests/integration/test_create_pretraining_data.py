"""create_pretraining_data.py with the official command line."""

import hashlib
import json
import os
import subprocess
import sys

import tensorflow as tf

from albert_tf.data.pretraining import record_format
from tests.helpers import text as text_helpers
from tests.helpers.paths import REPO


def test_script_official_command_line(tmp_path):
  spm_model = text_helpers.make_tiny_spm_model(tmp_path / "spm")
  corpus = text_helpers.write_tiny_corpus(str(tmp_path / "corpus.txt"), repeats=2,
                                          docstring_bytes=40_000)
  out = tmp_path / "script.tfrecord"
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
  cmd = [sys.executable, os.path.join(REPO, "create_pretraining_data.py"),
         f"--input_file={corpus}", f"--output_file={out}", f"--spm_model_file={spm_model}",
         f"--vocab_file={spm_model[:-len('.model')]}.vocab", "--do_lower_case",
         "--do_whole_word_mask", "--max_seq_length=64", "--max_predictions_per_seq=10",
         "--ngram=3", "--random_seed=3", "--dupe_factor=1", "--masked_lm_prob=0.15",
         "--short_seq_prob=0.1", "--num_workers=1"]
  done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
  assert done.returncode == 0, done.stderr
  assert "instances:" in done.stderr and "swapped pairs" in done.stderr
  # Beside the records: the vocabulary that made them (the SentencePiece model wins over
  # --vocab_file, as in the records themselves).
  with open(f"{out}.vocab.json", encoding="utf-8") as f:
    record = json.load(f)
  with open(spm_model, "rb") as f:
    assert record["sha1"] == hashlib.sha1(f.read()).hexdigest()
  assert (record["kind"], record["path"], record["do_lower_case"]) == (
      "sentencepiece", spm_model, True)
  assert record["pieces"] == 400 and len(record["pieces_sha1"]) == 40
  # Every record parses with the official feature spec at the flags' lengths.
  spec = record_format.name_to_features(64, 10)
  records = [tf.io.parse_single_example(raw, spec) for raw in tf.data.TFRecordDataset(str(out))]
  assert records
