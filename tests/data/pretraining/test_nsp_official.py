"""--random_next_sentence draws B from the whole input, as the official tool does (issue 37).

The official create_pretraining_data ran once on a corpus ordered by topic
(tests/fixtures/official_nsp/, made by make_official_nsp.py there); ours runs through the real
script on the same corpus and flags, with chunks of ~4 documents (--chunk_mb=0.001), so a B
taken from the chunk (the old behaviour: ~10 % of negatives crossing topics, mean topic
distance ~0.1) cannot pass. Tolerances are about 4 standard errors of the difference.
"""

import json
import os

import pytest

from albert_tf.data.pretraining import creation
from albert_tf.data.pretraining import document_index
from albert_tf.data.pretraining import instances as pi
from tests.data.pretraining import nsp_topics
from tests.helpers.paths import FIXTURES_DIR
from tests.helpers.scripts import describe, run_script

FIXTURE = FIXTURES_DIR / "official_nsp"
with open(FIXTURE / "official.json", encoding="utf-8") as _f:
  OFFICIAL = json.load(_f)
CORPUS, VOCAB = str(FIXTURE / "corpus.txt"), str(FIXTURE / "vocab.txt")
FLAGS = {k: v for k, v in OFFICIAL["flags"].items()
         if k not in ("random_next_sentence", "do_lower_case")}
CHUNK_MB = 0.001  # ~4 documents per chunk: half a topic


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
  out = tmp_path_factory.mktemp("nsp")
  outputs = [str(out / "a.tfrecord"), str(out / "b.tfrecord")]
  proc = run_script("create_pretraining_data.py", [
      f"--input_file={CORPUS}", f"--output_file={','.join(outputs)}", f"--vocab_file={VOCAB}",
      "--do_lower_case", "--random_next_sentence", f"--chunk_mb={CHUNK_MB}", "--num_workers=2",
      "--progress=false"] + [f"--{k}={v}" for k, v in FLAGS.items()], cwd=str(out))
  assert proc.returncode == 0, describe(proc)
  assert sorted(os.listdir(out)) == ["a.tfrecord", "a.tfrecord.vocab.json", "b.tfrecord",
                                     "b.tfrecord.vocab.json"]  # each with its vocabulary record
  return outputs, nsp_topics.summarize(nsp_topics.segment_documents(outputs))


def test_negatives_take_b_from_the_whole_input_as_the_official_tool(ours):
  _, summary = ours
  official = OFFICIAL
  assert official["other_topic_share"] > 0.8  # the reference itself: B from anywhere
  assert summary["negatives"] > 700
  assert abs(summary["negative_share"] - official["negative_share"]) < 0.06, summary
  assert abs(summary["other_topic_share"] - official["other_topic_share"]) < 0.06, summary
  assert abs(summary["mean_topic_distance"] - official["mean_topic_distance"]) < 0.35, summary
  assert abs(summary["mean_document_distance"]
             - official["mean_document_distance"]) < 3.0, summary
  # Every topic distance occurs about as often as in the official records (~110 negatives a
  # bin; a same-chunk B would put nearly all of them in bin 0).
  ours_share = [c / summary["negatives"] for c in summary["topic_distance_histogram"]]
  official_share = [c / official["negatives"] for c in official["topic_distance_histogram"]]
  assert max(abs(a - b) for a, b in zip(ours_share, official_share)) < 0.06, summary
  assert summary["same_document_share"] < 0.01
  assert summary["positives_same_document_share"] == 1.0


def test_same_bytes_for_any_number_of_workers(tmp_path, ours):
  outputs, _ = ours
  options = pi.InstanceOptions(
      max_seq_length=FLAGS["max_seq_length"], max_predictions_per_seq=FLAGS[
          "max_predictions_per_seq"], masked_lm_prob=FLAGS["masked_lm_prob"],
      short_seq_prob=FLAGS["short_seq_prob"], dupe_factor=FLAGS["dupe_factor"],
      random_next_sentence=True)
  results = {}
  for workers in (1, 3):
    paths = [str(tmp_path / f"w{workers}_a"), str(tmp_path / f"w{workers}_b")]
    creation.create_pretraining_data(CORPUS, ",".join(paths), vocab_file=VOCAB, options=options,
                                     random_seed=FLAGS["random_seed"], num_workers=workers,
                                     chunk_mb=CHUNK_MB, show_progress=False)
    results[workers] = [open(p, "rb").read() for p in paths]
  script = [open(p, "rb").read() for p in outputs]
  assert results[1] == results[3] == script


def test_the_index_numbers_documents_as_the_chunks_do(tmp_path):
  # Two files, an empty document, CRLF line ends, a document longer than 4 chunks (cut into
  # several documents): every document the chunk pipeline encodes is found again by its number.
  first = tmp_path / "first.txt"
  first.write_bytes(b"\n\nalpha beta\r\ngamma delta\r\n\n\n\nepsilon zeta\neta theta\n\n"
                    + b"\n".join(b"word%d and more words" % i for i in range(60)) + b"\n")
  second = tmp_path / "second.txt"
  second.write_bytes(b"last one\nreally last\n")
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "alpha", "beta",
                              "gamma", "delta", "epsilon", "zeta", "eta", "theta", "and",
                              "more", "words", "last", "one", "really"]
                             + [f"word{i}" for i in range(60)]) + "\n")
  files, chunk_bytes = [str(first), str(second)], 100
  index = creation.index_documents(files, chunk_bytes)
  encoder = creation.DocumentEncoder(creation.TokenizerSpec(vocab_file=str(vocab)))
  source = document_index.IndexedDocuments(index, encoder, lambda path: open(path, "rb"))
  seen = []
  for chunk in creation.iter_chunks(files, chunk_bytes):
    documents, numbers = encoder.encode_chunk(chunk, creation.new_counters())
    for document, number in zip(documents, numbers):
      assert source.sentence_count(number) == len(document)
      assert list(source.sentences(number, 0)) == document
      assert list(source.sentences(number, len(document) - 1)) == document[-1:]
      seen.append(number)
  assert seen == list(range(len(index))) and len(index) >= 6  # the long document was cut
  assert index.locate(len(index) - 1)[0] == str(second)
  source.close()
