"""Continued pretraining: run_pretraining.py --init_checkpoint=<a pretrained model> on new records.

As the official run_pretraining (which loads only the trainable variables from init_checkpoint):
the weights come from the checkpoint, the optimizer state starts fresh, and the step counter and
learning-rate schedule start at 0 (warmup included); `--init_checkpoint_schedule=continue` starts
them at the checkpoint's global_step instead, still with a fresh optimizer state. A checkpoint
already in --output_dir wins over --init_checkpoint (the run resumes, with a note). A vocabulary
that differs between the config, the checkpoint and the records' SentencePiece model is a
one-line error naming both files.

Fresh optimizer state is read off the saved slots: LAMB without bias correction, after one update
from zero slots, holds m = 0.1 g and v = 0.001 g², so v = 0.1 m² element by element; a slot
carried over from the checkpoint (all 7.0 in the TF2 source below) breaks that.
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers import training as helpers
from tests.helpers import text as text_helpers
from tests.helpers.paths import REPO
from tests.helpers.scripts import describe
from tests.helpers.tiny_config import tiny_albert_config, write_tiny_config

VOCAB = 400  # the tiny SentencePiece model's pieces: the model's vocab_size here
SOURCE_STEP = 500  # the global_step the source checkpoints record
PEAK_LR, WARMUP = 0.01, 2
SLOT = 7.0  # every optimizer slot of the TF2 source


def _pretrainer():
  import albert_tf  # pylint: disable=g-import-not-at-top
  model = albert_tf.AlbertPretrainer(tiny_albert_config(vocab_size=VOCAB))
  ids = np.array([[2, 10, 11, 3, 0]], np.int32)
  model(dict(input_ids=ids, input_mask=(ids > 0).astype(np.int32), segment_ids=0 * ids,
             masked_lm_positions=np.array([[1]], np.int32)), training=False)
  return model


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
  """Records made by our data tool with a tiny SentencePiece model, and pretrained models in
  that vocabulary: an official-layout directory (TF1 names, global_step 500, albert_config.json
  and 30k-clean.model beside) and one of our TF2 checkpoints with LAMB slots all 7.0 at step
  500."""
  import albert_tf  # pylint: disable=g-import-not-at-top
  from albert_tf.training import optimizer as optimizer_lib  # pylint: disable=g-import-not-at-top
  tmp = tmp_path_factory.mktemp("continued")
  records = helpers.make_pretraining_data(tmp / "data", num_files=1, dupe_factor=1,
                                          corpus_bytes=15_000, repeats=1)
  spm = str(tmp / "data" / "tiny_spm.model")
  config = write_tiny_config(tmp / "albert_config.json", vocab_size=VOCAB)
  model = _pretrainer()
  official = tmp / "albert_base"
  albert_tf.save_tf1_checkpoint(model, str(official / "model.ckpt-best"),
                                global_step=SOURCE_STEP, update_state=False)
  shutil.copy(config, official / "albert_config.json")
  shutil.copy(spm, official / "30k-clean.model")
  optimizer = optimizer_lib.create_optimizer("lamb", PEAK_LR, 1000, WARMUP)
  optimizer.bind_model(model)
  optimizer._create_all_weights(model.trainable_variables)  # pylint: disable=protected-access
  for variable in optimizer.variables():
    if variable is not optimizer.iterations:
      variable.assign(tf.fill(variable.shape, SLOT))
  optimizer.iterations.assign(SOURCE_STEP)
  ours = tmp / "ours"
  tf.train.Checkpoint(model=model, optimizer=optimizer,
                      global_step=optimizer.iterations).write(str(ours / "ckpt-500"))
  shutil.copy(config, ours / "albert_config.json")
  return dict(tmp=tmp, records=records, spm=spm, config=config,
              official=str(official / "model.ckpt-best"), ours=str(ours / "ckpt-500"))


def _flags(s, output_dir, steps, **extra):
  return helpers.pretraining_flags(s["config"], s["records"], output_dir, steps, batch=4,
                                   save_every=1, learning_rate=PEAK_LR, keep_checkpoint_max=0,
                                   **extra)


def _progress_lr(stdout, step):
  match = re.search(rf"^step {step}/\d+ \|.*\| learning_rate ([\d.e+-]+) \|", stdout, re.M)
  assert match, stdout[-2000:]
  return float(match.group(1))


def _slots(values):
  """{variable path: (m, v)} of the LAMB slots in one of our checkpoints."""
  slots = {}
  for key, value in values.items():
    match = re.match(r"(.*)/\.OPTIMIZER_SLOT/optimizer/(m|v)/\.ATTRIBUTES/VARIABLE_VALUE$", key)
    if match:
      slots.setdefault(match.group(1), {})[match.group(2)] = value
  return slots


def _assert_fresh_slots(values):
  slots = _slots(values)
  assert len(slots) > 10, sorted(values)[:20]
  for name, pair in slots.items():
    m, v = pair["m"], pair["v"]
    np.testing.assert_allclose(v, 0.1 * m * m, rtol=1e-4, atol=1e-12, err_msg=name)
    assert np.abs(m).max() < 1.0, name  # gradients are clipped to global norm 1: no 7.0 left


@pytest.fixture(scope="module")
def official_run(sources):
  """The real script, from the official-layout checkpoint: 2 steps, a checkpoint at each."""
  out = sources["tmp"] / "from_official"
  result = helpers.run_pretraining(_flags(
      sources, out, 2, init_checkpoint=sources["official"], spm_model_file=sources["spm"]))
  assert result.returncode == 0, describe(result)
  return out, result.stdout


def test_official_checkpoint_starts_at_step_zero_with_its_weights(sources, official_run):
  out, stdout = official_run
  assert (f"Starting from --init_checkpoint={sources['official']} (its weights; fresh optimizer "
          "state) at step 0") in stdout
  first = helpers.checkpoint_values(str(out / "ckpt-1"))
  assert int(first["global_step/.ATTRIBUTES/VARIABLE_VALUE"]) == 1
  # Step 0 of the warmup runs at learning rate 0: after it the weights are still exactly the
  # checkpoint's, every one of them (each source tensor found, bit for bit, in ckpt-1).
  saved = [v for k, v in first.items() if k.startswith("model/") and "OPTIMIZER_SLOT" not in k]
  source = tf.train.load_checkpoint(sources["official"])
  names = [n for n in source.get_variable_to_shape_map() if n != "global_step"]
  assert len(names) == len(saved) > 20
  for name in names:
    value = source.get_tensor(name)
    assert any(s.shape == value.shape and np.array_equal(s, value) for s in saved), name
  _assert_fresh_slots(first)
  # The learning rate follows the warmup from zero: lr(1) = peak * 1/2, then the decay's end.
  assert _progress_lr(stdout, 1) == pytest.approx(PEAK_LR / WARMUP)
  assert _progress_lr(stdout, 2) == 0.0
  # --spm_model_file is copied beside the run's checkpoints (a complete model directory).
  with open(out / "30k-clean.model", "rb") as a, open(sources["spm"], "rb") as b:
    assert a.read() == b.read()


def _run_in_process(sources, output_dir, steps, capsys, **extra):
  """runner.run on the configs run_pretraining.py's flags give; returns stdout."""
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks.pretraining import PretrainingConfig, PretrainingTask  # pylint: disable=g-import-not-at-top
  from albert_tf.training import runner  # pylint: disable=g-import-not-at-top
  from albert_tf.training.runtime import RuntimeConfig  # pylint: disable=g-import-not-at-top
  task = PretrainingTask(PretrainingConfig(
      AlbertConfig.from_json_file(sources["config"]), input_file=sources["records"],
      max_seq_length=helpers.TINY_SEQ, max_predictions_per_seq=helpers.TINY_PREDS,
      shuffle_seed=3, **extra))
  runner.run(task, runner.RunConfig(
      output_dir=str(output_dir), do_train=True, train_batch_size=4, train_steps=steps,
      warmup_steps=WARMUP, learning_rate=PEAK_LR, optimizer="lamb", save_checkpoints_steps=1),
      RuntimeConfig(log_every_n_steps=1))
  return capsys.readouterr().out


def test_continue_schedule_and_resume_from_output_dir(sources, tmp_path, capsys):
  """--init_checkpoint_schedule=continue: the step counter (and so the learning rate) goes on
  from the checkpoint's step 500, the slots start fresh; run again on the same output_dir, the
  output_dir's checkpoint wins over --init_checkpoint."""
  out = tmp_path / "continued"
  stdout = _run_in_process(sources, out, SOURCE_STEP + 2, capsys,
                           init_checkpoint=sources["ours"], init_checkpoint_schedule="continue")
  assert f"(its weights; fresh optimizer state) at step {SOURCE_STEP}" in stdout
  first = helpers.checkpoint_values(str(out / f"ckpt-{SOURCE_STEP + 1}"))
  assert int(first["global_step/.ATTRIBUTES/VARIABLE_VALUE"]) == SOURCE_STEP + 1
  _assert_fresh_slots(first)  # the source's 7.0 slots were not read
  assert not os.path.exists(out / "ckpt-1.index")
  total = SOURCE_STEP + 2  # linear decay to 0 at the last step: lr(501) = peak * 1/502
  assert _progress_lr(stdout, SOURCE_STEP + 1) == pytest.approx(PEAK_LR / total, rel=1e-3)

  # The same command again (training already done: nothing to train, nothing traced).
  gone = str(tmp_path / "moved_away" / "ckpt-500")  # not even there: it is not read
  again = _run_in_process(sources, out, SOURCE_STEP + 2, capsys,
                          init_checkpoint=gone, init_checkpoint_schedule="continue")
  assert f"Resuming from {out / f'ckpt-{SOURCE_STEP + 2}'} at step {SOURCE_STEP + 2} " in again
  assert (f"note: --init_checkpoint={gone} not read: resuming --output_dir's checkpoint "
          "instead") in again
  assert "Starting from --init_checkpoint" not in again


def _task(sources, **overrides):
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks.pretraining import PretrainingConfig, PretrainingTask  # pylint: disable=g-import-not-at-top
  kwargs = dict(albert_config=AlbertConfig.from_json_file(sources["config"]),
                input_file=sources["records"], max_seq_length=helpers.TINY_SEQ,
                max_predictions_per_seq=helpers.TINY_PREDS, init_checkpoint=sources["official"],
                spm_model_file=sources["spm"])
  kwargs.update(overrides)
  return PretrainingTask(PretrainingConfig(**kwargs))


def _initialize(sources, **overrides):
  """What the trainer does first when --output_dir holds no checkpoint."""
  task = _task(sources, **overrides)
  model = task.build_model()
  task.initialize(model)
  return model


def _other_spm(tmp, vocab_size):
  """A SentencePiece model trained on other text (the tiny corpus, each word reversed)."""
  from albert_tf.text.sentencepiece_training import train_sentencepiece  # pylint: disable=g-import-not-at-top
  corpus = text_helpers.write_tiny_corpus(os.path.join(tmp, "corpus.txt"), repeats=1,
                                          docstring_bytes=40_000)
  with open(corpus, encoding="utf-8") as f:
    reversed_text = "\n".join(" ".join(w[::-1] for w in line.split()) for line in f)
  with open(corpus, "w", encoding="utf-8") as f:
    f.write(reversed_text)
  return train_sentencepiece([corpus], os.path.join(tmp, f"other_{vocab_size}"),
                             vocab_size=vocab_size)


def test_vocabulary_mismatches_are_one_line_errors(sources, tmp_path):
  from albert_tf.config import AlbertConfig  # pylint: disable=g-import-not-at-top
  from albert_tf.errors import AlbertError  # pylint: disable=g-import-not-at-top
  # The config's vocab_size against the checkpoint's embedding rows.
  big = write_tiny_config(tmp_path / "vocab_1000.json", vocab_size=1000)
  with pytest.raises(AlbertError) as e:
    _initialize(sources, albert_config=AlbertConfig.from_json_file(big), spm_model_file=None)
  assert str(e.value) == (
      f"{sources['official']}: its word embeddings have {VOCAB} rows (a vocabulary of {VOCAB}) "
      f"but {big} has vocab_size=1000: give the checkpoint's own albert_config.json")
  # The records' SentencePiece model: another size ...
  smaller = text_helpers.make_tiny_spm_model(tmp_path, vocab_size=300, name="small")
  with pytest.raises(AlbertError, match=rf"^{re.escape(smaller)}: has \d+ pieces but the word "
                     rf"embeddings of {re.escape(sources['official'])} have {VOCAB} rows"):
    _initialize(sources, spm_model_file=smaller)
  # ... or the same size with other pieces (a SentencePiece model trained anew).
  other = _other_spm(str(tmp_path), VOCAB)
  with pytest.raises(AlbertError) as e:
    _initialize(sources, spm_model_file=other)
  own = os.path.join(os.path.dirname(sources["official"]), "30k-clean.model")
  assert str(e.value).startswith(f"{other}: its pieces differ from those of {own}, the "
                                 f"SentencePiece model of {sources['official']} (id ")
  assert "\n" not in str(e.value)
  # Records of a larger vocabulary than the config's: the record file and the config named.
  from albert_tf.data import record_checks  # pylint: disable=g-import-not-at-top
  small = write_tiny_config(tmp_path / "vocab_100.json", vocab_size=100)
  task = _task(sources, albert_config=AlbertConfig.from_json_file(small), init_checkpoint=None,
               spm_model_file=None)
  with pytest.raises(tf.errors.InvalidArgumentError) as e:
    next(iter(task.build_inputs("eval", 4)))
  explained = record_checks.explain_input_error(e.value, task.input_files("eval"))
  assert re.fullmatch(rf"{re.escape(sources['records'])}: record \d+: input_ids holds \d+, "
                      rf"expected values in \[0, 100\) \(vocab_size 100 of {re.escape(small)}\)",
                      str(explained)), explained
  # A SentencePiece model larger than the config: refused before anything is built.
  with pytest.raises(AlbertError, match=rf"^{re.escape(other)}: vocabulary has {VOCAB} pieces "
                     r"but .*vocab_300\.json has vocab_size=300"):
    _task(sources, spm_model_file=other, init_checkpoint=None, albert_config=AlbertConfig.
          from_json_file(write_tiny_config(tmp_path / "vocab_300.json", vocab_size=300)))


def test_schedule_opt_in_errors(sources, tmp_path, capsys):
  from albert_tf.errors import AlbertError  # pylint: disable=g-import-not-at-top
  with pytest.raises(AlbertError, match="^--init_checkpoint_schedule=continue needs "
                     "--init_checkpoint"):
    _task(sources, init_checkpoint=None, init_checkpoint_schedule="continue")
  import albert_tf  # pylint: disable=g-import-not-at-top
  no_step = str(tmp_path / "no_step" / "model.ckpt")  # a TF1 checkpoint with no global_step
  albert_tf.save_tf1_checkpoint(_pretrainer(), no_step)
  with pytest.raises(AlbertError, match=rf"^{re.escape(no_step)}: records no global_step, so its "
                     "schedule cannot be continued: drop --init_checkpoint_schedule=continue"):
    _task(sources, init_checkpoint=no_step, init_checkpoint_schedule="continue").initial_step()
  assert _task(sources, init_checkpoint=sources["official"]).initial_step() == 0
  assert _task(sources, init_checkpoint=sources["official"],
               init_checkpoint_schedule="continue").initial_step() == SOURCE_STEP
  with pytest.raises(AlbertError, match=rf"^--init_checkpoint={re.escape(sources['ours'])} is "
                     rf"at step {SOURCE_STEP}, not below the 3 training steps: nothing to train"):
    _run_in_process(sources, tmp_path / "short", 3, capsys, init_checkpoint=sources["ours"],
                    init_checkpoint_schedule="continue")


def _create_records(tmp, spm_model, output_prefix):
  """create_pretraining_data.py (the real script) -> 2 shards `<prefix>-*` and
  `<prefix>.vocab.json`; returns the glob of the shards."""
  corpus = text_helpers.write_tiny_corpus(os.path.join(tmp, "records_corpus.txt"), repeats=1,
                                          docstring_bytes=15_000)
  done = subprocess.run(
      [sys.executable, os.path.join(REPO, "create_pretraining_data.py"),
       f"--input_file={corpus}", f"--output_file={output_prefix}", "--output_shards=2",
       f"--spm_model_file={spm_model}", f"--max_seq_length={helpers.TINY_SEQ}",
       f"--max_predictions_per_seq={helpers.TINY_PREDS}", "--dupe_factor=1",
       "--num_workers=1", "--noprogress"],
      capture_output=True, text=True, env=helpers.subprocess_env(), timeout=180)
  assert done.returncode == 0, describe(done)
  assert f"vocabulary record: {output_prefix}.vocab.json" in done.stderr
  return f"{output_prefix}-*"


def test_records_carry_their_vocabulary(sources, tmp_path):
  """create_pretraining_data.py writes which SentencePiece model made the records; a run on them
  uses it (no --spm_model_file needed) and stops with one line when --init_checkpoint or
  --spm_model_file has other pieces, also once the model itself is gone."""
  import json  # pylint: disable=g-import-not-at-top
  from albert_tf.errors import AlbertError  # pylint: disable=g-import-not-at-top
  other = _other_spm(str(tmp_path), VOCAB)  # 400 pieces, not those of the official checkpoint
  records = _create_records(str(tmp_path), other, str(tmp_path / "other" / "train"))
  with open(tmp_path / "other" / "train.vocab.json", encoding="utf-8") as f:
    record = json.load(f)
  with open(other, "rb") as f:
    assert record["sha1"] == hashlib.sha1(f.read()).hexdigest()
  assert (record["kind"], record["path"], record["pieces"]) == ("sentencepiece", other, VOCAB)

  # The README's continued pretraining, without --spm_model_file: one line, exit 2.
  result = helpers.run_pretraining(_flags(dict(sources, records=records), tmp_path / "out", 1,
                                          init_checkpoint=sources["official"]))
  own = os.path.join(os.path.dirname(sources["official"]), "30k-clean.model")
  assert result.returncode == 2, describe(result)
  assert result.stderr.strip().splitlines()[-1].startswith(
      f"error: {other}: its pieces differ from those of {own}, the SentencePiece model of "
      f"{sources['official']} (id "), describe(result)
  assert "Traceback" not in result.stderr and result.stderr.count("error:") == 1

  # The records' model becomes the run's (checked, then copied into --output_dir) ...
  assert _task(sources, input_file=records, init_checkpoint=None,
               spm_model_file=None).params.spm_model_file == other
  # ... another --spm_model_file is refused ...
  with pytest.raises(AlbertError) as e:
    _task(sources, input_file=records, init_checkpoint=None)
  assert str(e.value) == (
      f"--spm_model_file={sources['spm']}: not the vocabulary the records were made with "
      f"({tmp_path / 'other' / 'train.vocab.json'} names {other}: {VOCAB} pieces, here {VOCAB} "
      "and other ones)")
  # ... and with the model gone, the record still stops an --init_checkpoint of other pieces.
  record["path"] = str(tmp_path / "gone.model")
  with open(tmp_path / "other" / "train.vocab.json", "w", encoding="utf-8") as f:
    json.dump(record, f)
  with pytest.raises(AlbertError, match=rf"^{re.escape(own)} \(the SentencePiece model of "
                     rf"{re.escape(sources['official'])}\): not the vocabulary the records were "
                     rf"made with \("):
    _initialize(sources, input_file=records, spm_model_file=None)


def test_run_copies_the_records_sentencepiece_model(sources, tmp_path, capsys):
  """Records whose vocabulary record names the official model: the run finds it and copies it
  beside its checkpoints, so fine-tuning from the output directory needs no other flag."""
  from albert_tf.data.pretraining import vocab_record  # pylint: disable=g-import-not-at-top
  records = str(tmp_path / "records.tfrecord")
  shutil.copy(sources["records"], records)
  vocab_record.write([records], spm_model_file=sources["spm"])
  out = tmp_path / "out"
  stdout = _run_in_process(dict(sources, records=records), out, 1, capsys,
                           init_checkpoint=sources["official"])
  assert "(its weights; fresh optimizer state) at step 0" in stdout
  with open(out / "30k-clean.model", "rb") as a, open(sources["spm"], "rb") as b:
    assert a.read() == b.read()
