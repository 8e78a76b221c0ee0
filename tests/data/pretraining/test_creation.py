"""Pretraining data creation on text files (format, determinism, workers, bad input)."""

import os

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from albert_tf import tokenization
from albert_tf.data.pretraining import (creation, instances as pi, record_format as pretraining_format)
from albert_tf.errors import AlbertError, run_main
from tests.helpers import text as text_helpers


SEQ, PREDS = 64, 10


OPTIONS = pi.InstanceOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS, dupe_factor=2)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
  return tmp_path_factory.mktemp("cpd")


@pytest.fixture(scope="module")
def spm_model(workdir):
  return text_helpers.make_tiny_spm_model(workdir / "spm")


@pytest.fixture(scope="module")
def corpus(workdir):
  return text_helpers.write_tiny_corpus(str(workdir / "corpus.txt"), repeats=2,
                                        docstring_bytes=40_000)


def _run(corpus, outputs, spm_model, **kwargs):
  kwargs.setdefault("options", OPTIONS)
  kwargs.setdefault("show_progress", False)
  return creation.create_pretraining_data(corpus, outputs, spm_model_file=spm_model, **kwargs)


def _read(paths, seq=SEQ, preds=PREDS):
  spec = pretraining_format.name_to_features(seq, preds)
  records = []
  for path in paths:
    for raw in tf.data.TFRecordDataset(path):
      parsed = tf.io.parse_single_example(raw, spec)
      records.append({k: v.numpy() for k, v in parsed.items()})
  return records


def _files_in(directory):
  return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


def test_output_format_and_report(workdir, spm_model, corpus):
  out = workdir / "fmt"
  paths = [str(out / "a.tfrecord"), str(out / "b.tfrecord")]
  report = _run(corpus, ",".join(paths), spm_model)
  assert _files_in(out) == ["a.tfrecord", "b.tfrecord"]  # no temp files left
  records = _read(paths)
  assert len(records) == report["instances"] > 100
  counts = list(report["output_files"].values())
  assert sum(counts) == len(records) and abs(counts[0] - counts[1]) <= 1  # round-robin
  total_masked = total_tokens = swapped = 0
  for r in records:
    mask = r["input_mask"]
    n = int(mask.sum())
    assert (mask[:n] == 1).all() and (mask[n:] == 0).all()
    ids = r["input_ids"]
    assert (ids[n:] == 0).all() and ids[0] == 2 and (ids[:n] == 3).sum() == 2 and ids[n - 1] == 3
    first_sep = int(np.argmax(ids == 3))
    seg = r["segment_ids"]
    assert (seg[:first_sep + 1] == 0).all() and (seg[first_sep + 1:n] == 1).all()
    assert (seg[n:] == 0).all()
    boundary = r["token_boundary"]
    assert boundary[0] == 1 and boundary[first_sep] == 1 and boundary[n - 1] == 1
    assert (boundary[n:] == 0).all()
    weights = r["masked_lm_weights"]
    k = int(weights.sum())
    assert (weights[:k] == 1).all() and (weights[k:] == 0).all() and 1 <= k <= PREDS
    positions = r["masked_lm_positions"][:k]
    assert (np.diff(positions) > 0).all() and (positions < n).all()
    assert not set(positions.tolist()) & {0, first_sep, n - 1}
    assert (r["masked_lm_positions"][k:] == 0).all() and (r["masked_lm_ids"][k:] == 0).all()
    assert (r["masked_lm_ids"][:k] > 4).all()
    assert r["next_sentence_labels"][0] in (0, 1)
    total_masked += k
    total_tokens += n
    swapped += int(r["next_sentence_labels"][0])
  assert report["mean_masked_fraction"] == pytest.approx(total_masked / total_tokens)
  assert 0.12 < report["mean_masked_fraction"] < 0.16
  assert report["swapped_fraction"] == pytest.approx(swapped / len(records))
  assert 0.4 < report["swapped_fraction"] < 0.6
  assert report["mask_token"] + report["random_token"] + report["kept_token"] == total_masked
  lines = creation.format_report(report)
  assert any("mean masked fraction" in l for l in lines)
  assert any("n-gram length histogram" in l for l in lines)
  assert any("swapped pairs" in l for l in lines)


def test_unmasked_tokens_are_the_tokenized_text(workdir, spm_model, corpus):
  """Pieces outside the masked positions are the tokenizer's pieces of real corpus lines."""
  out = str(workdir / "text.tfrecord")
  options = pi.InstanceOptions(max_seq_length=SEQ, max_predictions_per_seq=PREDS, dupe_factor=1,
                               masked_lm_prob=0.0, short_seq_prob=0.0)
  _run(corpus, out, spm_model, options=options)
  tok = tokenization.FullTokenizer(spm_model_file=spm_model)
  with open(corpus, encoding="utf-8") as f:
    all_ids = [i for line in f if line.strip() for i in tok.encode(line)]
  haystack = " ".join(map(str, all_ids))
  for r in _read([out])[:50]:
    n = int(r["input_mask"].sum())
    ids = r["input_ids"][:n].tolist()
    first_sep = ids.index(3)
    for segment in (ids[1:first_sep], ids[first_sep + 1:n - 1]):
      assert " ".join(map(str, segment[:8])) in haystack


def test_encoder_matches_full_tokenizer(workdir, spm_model):
  dc_model = text_helpers.make_digit_comma_spm_model(workdir / "dc")
  for model in (spm_model, dc_model):
    encoder = creation.DocumentEncoder(creation.TokenizerSpec(spm_model_file=model))
    tok = tokenization.FullTokenizer(spm_model_file=model)
    texts = text_helpers.VARIED_TEXTS + ["in 1990, 10, 3.0, x"]
    assert encoder.encode_texts(texts) == [tok.encode(t) for t in texts]


def test_deterministic_and_independent_of_workers(workdir, spm_model, corpus):
  def run(name, **kwargs):
    path = str(workdir / "det" / name)
    report = _run(corpus, path, spm_model, chunk_mb=0.02, **kwargs)
    with open(path, "rb") as f:
      return f.read(), report

  one, report = run("seed1.tfrecord", random_seed=1)
  again, _ = run("seed1b.tfrecord", random_seed=1)
  other, _ = run("seed2.tfrecord", random_seed=2)
  parallel, preport = run("seed1w2.tfrecord", random_seed=1, num_workers=2)
  assert one == again
  assert one != other
  assert parallel == one  # several chunks, two worker processes, same bytes
  assert preport["instances"] == report["instances"]
  assert preport["ngram_masked"] == report["ngram_masked"]


def test_wordpiece_vocab_mode(tmp_path):
  words = ("the cat sat on mat dog ran far away and came back home later that day "
           "##s ##ing").split()
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words) + "\n")
  text = tmp_path / "in.txt"
  text.write_text("The cat sat on the mat.\nThe dog ran far away.\nAnd came back home.\n\n"
                  "Later that day the cats sat.\nThe dogs ran home.\n" * 20)
  out = str(tmp_path / "wp.tfrecord")
  report = creation.create_pretraining_data(str(text), out, vocab_file=str(vocab), options=OPTIONS,
                                            show_progress=False)
  records = _read([out])
  assert len(records) == report["instances"] > 0
  inv = {i: w for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words)}
  for r in records:
    n = int(r["input_mask"].sum())
    for i in range(1, n - 1):
      piece = inv[int(r["input_ids"][i])]
      if r["input_ids"][i] not in (3, 4) and i not in r["masked_lm_positions"]:
        assert r["token_boundary"][i] == int(not piece.startswith("##"))


def test_missing_or_unreadable_input(tmp_path, spm_model):
  out = tmp_path / "out"
  with pytest.raises(AlbertError, match="--input_file: no file matches"):
    _run(str(tmp_path / "nothing*.txt"), str(out / "x.tfrecord"), spm_model)
  with pytest.raises(AlbertError, match="no file matches"):
    _run(str(tmp_path), str(out / "x.tfrecord"), spm_model)  # a directory is not a text file
  assert _files_in(out) == []


def test_invalid_utf8_stops_or_skips(tmp_path, spm_model, corpus):
  good = open(corpus, "rb").read()
  bad = tmp_path / "bad.txt"
  # Enough good text before the bad line that earlier chunks are already written.
  bad.write_bytes(good + b"\nfirst sentence here.\nsecond \xff\xfe sentence.\n")
  bad_line = good.count(b"\n") + 3
  out = tmp_path / "out"
  with pytest.raises(AlbertError) as err:
    _run(str(bad), str(out / "x.tfrecord"), spm_model, chunk_mb=0.01)
  message = str(err.value)
  assert message.startswith(f"{bad}: line {bad_line}, column 8: not UTF-8 text (invalid start "
                            f"byte 0xff; ") and "--invalid_utf8=skip" in message
  assert "\n" not in message
  assert _files_in(out) == []  # no partial output, no temp file
  report = _run(str(bad), str(out / "x.tfrecord"), spm_model, invalid_utf8="skip")
  assert report["invalid_utf8_lines"] == 1
  assert _files_in(out) == ["x.tfrecord"]


def test_empty_and_short_documents(tmp_path, spm_model):
  text = tmp_path / "in.txt"
  text.write_text("\n\nThe quick brown fox.\nJumps over the dog.\n\n\n\nA lone sentence.\n\n"
                  "Rivers flow to the sea.\nMountains rise high.\n")
  report = _run(str(text), str(tmp_path / "o.tfrecord"), spm_model)
  assert report["empty_documents"] == 4  # two leading blank lines + two extra separators
  assert report["short_documents"] == 1
  assert report["instances"] > 0
  assert any("empty documents skipped" in l for l in creation.format_report(report))

  only_short = tmp_path / "short.txt"
  only_short.write_text("One sentence only.\n\nAnother lone one.\n\n")
  with pytest.raises(AlbertError, match="fewer than 2 sentences"):
    _run(str(only_short), str(tmp_path / "s.tfrecord"), spm_model)
  blank = tmp_path / "blank.txt"
  blank.write_text("\n\n  \n")
  with pytest.raises(AlbertError, match="no instances"):
    _run(str(blank), str(tmp_path / "b.tfrecord"), spm_model)
  assert not (tmp_path / "s.tfrecord").exists() and not (tmp_path / "b.tfrecord").exists()


def test_vocabulary_without_special_tokens(tmp_path, corpus):
  spm.SentencePieceTrainer.train(input=corpus, model_prefix=str(tmp_path / "plain"),
                                 vocab_size=200, hard_vocab_limit=False, minloglevel=2)
  with pytest.raises(AlbertError, match=r"no \[CLS\] token"):
    creation.create_pretraining_data(corpus, str(tmp_path / "o.tfrecord"),
                                     spm_model_file=str(tmp_path / "plain.model"),
                                     options=OPTIONS, show_progress=False)
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")
  with pytest.raises(AlbertError, match=r"no \[MASK\] token"):
    creation.create_pretraining_data(corpus, str(tmp_path / "o.tfrecord"), vocab_file=str(vocab),
                                     options=OPTIONS, show_progress=False)
  assert _files_in(tmp_path) == ["plain.model", "plain.vocab", "vocab.txt"]


@pytest.mark.parametrize("kwargs,flag", [
    (dict(options=pi.InstanceOptions(max_seq_length=4)), "--max_seq_length"),
    (dict(options=pi.InstanceOptions(masked_lm_prob=1.5)), "--masked_lm_prob"),
    (dict(options=pi.InstanceOptions(dupe_factor=0)), "--dupe_factor"),
    (dict(num_workers=0), "--num_workers"),
    (dict(invalid_utf8="maybe"), "--invalid_utf8"),
])
def test_bad_flags(tmp_path, spm_model, corpus, kwargs, flag):
  with pytest.raises(AlbertError, match=flag):
    _run(corpus, str(tmp_path / "o.tfrecord"), spm_model, **kwargs)


def test_bad_input_prints_one_error_line(tmp_path, spm_model, capsys):
  # The script wraps main with run_main: an AlbertError becomes "error: ..." and exit code 2.
  def main(argv):
    del argv
    _run(f"{tmp_path}/missing*.txt", str(tmp_path / "o.tfrecord"), spm_model)

  with pytest.raises(SystemExit) as exit_info:
    run_main(main)(["create_pretraining_data.py"])
  assert exit_info.value.code == 2
  err = capsys.readouterr().err
  assert err.startswith("error: --input_file: no file matches") and err.count("\n") == 1


def test_unwritable_output_with_workers(tmp_path, spm_model, corpus):
  blocker = tmp_path / "a_file"
  blocker.write_text("not a directory")
  with pytest.raises(AlbertError, match="--output_file: cannot write"):
    _run(corpus, str(blocker / "x.tfrecord"), spm_model, num_workers=2)
  import multiprocessing  # pylint: disable=g-import-not-at-top
  assert not multiprocessing.active_children()  # the workers were shut down


def test_line_blank_after_preprocessing_separates_documents(tmp_path, spm_model):
  text = tmp_path / "in.txt"
  text.write_text("A first sentence here.\nA second one here.\n\u3000\u00a0\n"
                  "Third sentence now.\nFourth sentence now.\n", encoding="utf-8")
  report = _run(str(text), str(tmp_path / "o.tfrecord"), spm_model)
  assert report["documents"] == 2 and report["empty_documents"] == 0
  assert report["sentences"] == 4


def test_unreadable_input_is_reported(tmp_path, spm_model, corpus, monkeypatch):
  # Tests run as root, where chmod cannot make a file unreadable: simulate the permission check.
  monkeypatch.setattr(creation.os, "access", lambda path, mode: False)
  with pytest.raises(AlbertError, match=r"--input_file: .* is not readable"):
    _run(corpus, str(tmp_path / "o.tfrecord"), spm_model)
  assert _files_in(tmp_path) == []


def test_progress_line(tmp_path, spm_model, corpus):
  import io  # pylint: disable=g-import-not-at-top
  stream = io.StringIO()
  report = _run(corpus, str(tmp_path / "o.tfrecord"), spm_model, show_progress=True,
                progress_stream=stream)
  last = stream.getvalue().strip().splitlines()[-1]
  assert last.startswith("[create_pretraining_data]") and "(100%)" in last
  assert f"{report['instances']:,} instances" in last and "MB/s" in last and "documents" in last
