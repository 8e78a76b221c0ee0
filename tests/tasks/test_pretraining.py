"""The pretraining Task: learning on real text through the runner, losses against NumPy, bad input."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf.config import AlbertConfig
from albert_tf.data.pretraining.dataset import pretraining_dataset
from albert_tf.errors import AlbertError
from albert_tf.tasks import pretraining as pretraining_task
from albert_tf.training import runner
from albert_tf.training.runtime import RuntimeConfig
from tests.helpers import training as helpers
from tests.helpers.tiny_config import write_tiny_config


@pytest.fixture(scope="module")
def real_text_data(tmp_path_factory):
  """~130 SOP instances from real text (our create_pretraining_data, tiny SentencePiece)."""
  tmp = tmp_path_factory.mktemp("pretraining_data")
  data = helpers.make_pretraining_data(tmp, num_files=1, dupe_factor=1, corpus_bytes=15_000,
                                       repeats=1)
  config = write_tiny_config(tmp / "albert_config.json")
  return data, config


def _run_pretraining(config, data, output_dir, **overrides):
  """What run_pretraining.py runs for these settings: the task, the run and the runtime."""
  task = pretraining_task.PretrainingTask(pretraining_task.PretrainingConfig(
      albert_config=AlbertConfig.from_json_file(config), input_file=data,
      max_seq_length=helpers.TINY_SEQ, max_predictions_per_seq=helpers.TINY_PREDS,
      shuffle_seed=1))
  run_config = dict(
      output_dir=str(output_dir), do_train=True, do_eval=True, train_batch_size=32,
      eval_batch_size=32, optimizer="lamb", learning_rate=0.05, train_steps=400,
      warmup_steps=40, save_checkpoints_steps=400, keep_checkpoint_max=2, max_eval_steps=4)
  run_config.update(overrides)
  return runner.run(task, runner.RunConfig(**run_config), RuntimeConfig(
      strategy="default", steps_per_loop=100, log_every_n_steps=20))


def test_short_run_drives_mlm_and_sop_losses_down(real_text_data, tmp_path, capsys):
  data, config = real_text_data
  tf_keras.utils.set_random_seed(0)
  # AdamW (the official --optimizer adamw): on a model this small, LAMB's per-layer trust ratio
  # needs far more steps before SOP moves (LAMB's numerics: tests/training/test_optimizer.py).
  results = _run_pretraining(config, data, tmp_path / "run", optimizer="adamw",
                             learning_rate=0.002)
  lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("step ")]
  assert len(lines) == 20, lines

  def value(line, key):
    return float(line.split(f"| {key} ")[1].split(" ")[0])

  first, last = lines[0], lines[-1]
  assert value(first, "mlm_loss") > 5.5
  assert value(last, "mlm_loss") < value(first, "mlm_loss") - 2.0
  assert value(first, "sop_loss") > 0.68
  assert value(last, "sop_loss") < 0.5, last
  assert value(last, "sentence_order_accuracy") > 0.75, last
  for key in ("learning_rate", "examples/s", "ETA"):
    assert key in last

  # eval_results.txt: the official keys and our frequency baseline, `key = value`, sorted.
  text = (tmp_path / "run" / "eval_results.txt").read_text().splitlines()
  assert [l.split(" = ")[0] for l in text] == sorted(
      pretraining_task.OFFICIAL_EVAL_KEYS + ("masked_lm_baseline_accuracy",))
  evaluated = dict(l.split(" = ") for l in text)
  assert int(evaluated["global_step"]) == 400
  assert float(evaluated["masked_lm_loss"]) < 4.5
  assert 0 < float(evaluated["masked_lm_baseline_accuracy"]) < 1
  assert results["eval"]["global_step"] == 400
  # TensorBoard summaries were written.
  assert tf.io.gfile.glob(str(tmp_path / "run" / "train" / "events.out.tfevents.*"))


def _tiny_task(vocab=7, preds=4):
  return pretraining_task.PretrainingTask(pretraining_task.PretrainingConfig(
      AlbertConfig(vocab_size=vocab, hidden_size=8, num_attention_heads=2, intermediate_size=8,
                   num_hidden_layers=1, max_position_embeddings=16),
      max_seq_length=16, max_predictions_per_seq=preds))


def test_masked_lm_baseline_is_the_most_frequent_target_share_over_all_batches():
  """Two eval batches by hand: real targets (weight 1) 5, 5, 3 | 3, 3, 3, 2, 5 -> token 3 is
  the most frequent over the whole set (4 of 8) although batch 1 alone favours 5; padding
  (weight 0) with target 0 would win if it counted."""
  task = _tiny_task()
  batches = [
      {"masked_lm_ids": np.array([[5, 5, 0, 0], [3, 0, 0, 0]], np.int32),
       "masked_lm_weights": np.array([[1, 1, 0, 0], [1, 0, 0, 0]], np.float32)},
      {"masked_lm_ids": np.array([[3, 3, 3, 0], [2, 5, 0, 0]], np.int32),
       "masked_lm_weights": np.array([[1, 1, 1, 0], [1, 1, 0, 0]], np.float32)},
  ]
  state = None
  for labels in batches:
    state = task.aggregate_outputs(state, features={}, labels=labels, outputs={})
  metrics, outputs = task.reduce_outputs(state, "eval")
  assert metrics == {"masked_lm_baseline_accuracy": 0.5} and outputs is None
  assert pretraining_task.masked_lm_baseline_accuracy({}) == 0.0
  # Prediction batches carry no labels and count nothing.
  assert task.aggregate_outputs(None, {}, None, {}) == {}


def test_eval_reports_the_baseline_beside_the_accuracy(real_text_data, tmp_path, capsys):
  """An evaluation through the runner: the baseline is written to eval_results.txt and printed
  on the eval line next to masked_lm_accuracy, and equals the share of the most frequent
  target among the real masked positions of the evaluated records (counted here with NumPy)."""
  data, config = real_text_data
  tf_keras.utils.set_random_seed(0)
  results = _run_pretraining(config, data, tmp_path / "run", train_steps=2, warmup_steps=0,
                             save_checkpoints_steps=2, max_eval_steps=None)
  eval_line = [l for l in capsys.readouterr().out.splitlines() if "eval at step" in l][0]
  assert "masked_lm_accuracy = " in eval_line
  assert "masked_lm_baseline_accuracy = " in eval_line
  counts = {}
  for batch in pretraining_dataset(
      data, helpers.TINY_SEQ, helpers.TINY_PREDS, 32, is_training=False):
    weights = batch["masked_lm_weights"].numpy().reshape(-1)
    for token in batch["masked_lm_ids"].numpy().reshape(-1)[weights > 0]:
      counts[int(token)] = counts.get(int(token), 0) + 1
  want = max(counts.values()) / sum(counts.values())
  assert abs(results["eval"]["masked_lm_baseline_accuracy"] - want) < 1e-9
  assert want < 0.5  # real text: no token fills half the masked positions
  written = dict(l.split(" = ") for l in
                 (tmp_path / "run" / "eval_results.txt").read_text().splitlines())
  assert float(written["masked_lm_baseline_accuracy"]) == results["eval"][
      "masked_lm_baseline_accuracy"]


def test_losses_match_numpy():
  rng = np.random.default_rng(0)
  batch, preds, vocab = 3, 4, 7
  mlm_logits = rng.normal(size=(batch, preds, vocab)).astype(np.float32)
  sop_logits = rng.normal(size=(batch, 2)).astype(np.float32)
  ids = rng.integers(0, vocab, size=(batch, preds)).astype(np.int32)
  weights = np.array([[1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0]], np.float32)
  sop_labels = np.array([0, 1, 1], np.int32)
  task = pretraining_task.PretrainingTask(pretraining_task.PretrainingConfig(
      AlbertConfig(vocab_size=vocab, hidden_size=8, num_attention_heads=2, intermediate_size=8,
                   num_hidden_layers=1, max_position_embeddings=16),
      max_seq_length=16, max_predictions_per_seq=preds))
  loss, aux = task.build_losses(
      {"masked_lm_ids": ids, "masked_lm_weights": weights, "next_sentence_labels": sop_labels},
      {"mlm_logits": mlm_logits, "sop_logits": sop_logits}, global_batch_size=batch)

  def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))
  ce = -np.take_along_axis(log_softmax(mlm_logits), ids[..., None], -1)[..., 0]
  mlm = (weights * ce).sum() / (weights.sum() + 1e-5)
  sop = -np.take_along_axis(log_softmax(sop_logits), sop_labels[:, None], -1).mean()
  np.testing.assert_allclose(float(aux["mlm_loss"]), mlm, rtol=1e-5)
  np.testing.assert_allclose(float(aux["sop_loss"]), sop, rtol=1e-5)
  np.testing.assert_allclose(float(loss), mlm + sop, rtol=1e-5)


def test_seq_length_beyond_max_positions_is_rejected():
  config = AlbertConfig(vocab_size=50, hidden_size=8, num_attention_heads=2, intermediate_size=8,
                        num_hidden_layers=1, max_position_embeddings=16)
  with pytest.raises(AlbertError, match="--max_seq_length=32 exceeds max_position_embeddings=16"):
    pretraining_task.PretrainingTask(pretraining_task.PretrainingConfig(
        config, max_seq_length=32, max_predictions_per_seq=4))


def test_accumulated_micro_batches_sum_to_the_whole_batch_loss():
  """Micro-batches with different numbers of real predictions: each divides by the sum(w) of
  the whole replica batch (`replica_batch_labels`), so their losses add up to the K-times
  batch's official loss; dividing by their own sum(w) would not."""
  rng = np.random.default_rng(1)
  k, b, preds, vocab = 2, 2, 4, 7
  mlm_logits = rng.normal(size=(k, b, preds, vocab)).astype(np.float32)
  sop_logits = rng.normal(size=(k, b, 2)).astype(np.float32)
  labels = {"masked_lm_ids": rng.integers(0, vocab, size=(k, b, preds)).astype(np.int32),
            "masked_lm_weights": np.array([[[1, 1, 1, 1], [1, 1, 1, 0]],
                                           [[1, 0, 0, 0], [0, 0, 0, 0]]], np.float32),
            "next_sentence_labels": np.array([[0, 1], [1, 0]], np.int32)}
  task = pretraining_task.PretrainingTask(pretraining_task.PretrainingConfig(
      AlbertConfig(vocab_size=vocab, hidden_size=8, num_attention_heads=2, intermediate_size=8,
                   num_hidden_layers=1, max_position_embeddings=16),
      max_seq_length=16, max_predictions_per_seq=preds))
  whole = {n: v.reshape((k * b,) + v.shape[2:]) for n, v in labels.items()}
  expected, _ = task.build_losses(whole, {"mlm_logits": mlm_logits.reshape(k * b, preds, vocab),
                                          "sop_logits": sop_logits.reshape(k * b, 2)}, k * b)
  shared = task.replica_batch_labels({n: tf.constant(v) for n, v in labels.items()})
  summed = sum(float(task.build_losses(
      dict({n: v[i] for n, v in labels.items()}, **shared),
      {"mlm_logits": mlm_logits[i], "sop_logits": sop_logits[i]}, k * b)[0]) for i in range(k))
  np.testing.assert_allclose(summed, float(expected), rtol=1e-6)
  alone = sum(float(task.build_losses({n: v[i] for n, v in labels.items()},
                                      {"mlm_logits": mlm_logits[i], "sop_logits": sop_logits[i]},
                                      k * b)[0]) for i in range(k))
  assert abs(alone - float(expected)) > 1e-2  # the micro-batches' own normalisers differ
