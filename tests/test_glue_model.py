"""Classification / multiple-choice heads and models: NumPy references, dropout, get_config."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from albert_tf.config import AlbertConfig
from albert_tf.heads.classification import ClassificationHead
from albert_tf.heads.multiple_choice import MultipleChoiceHead
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.tasks.glue import ClassificationTask, GlueConfig
from tests.conftest import tiny_config_dict


def _config():
  return AlbertConfig.from_dict(tiny_config_dict())


def _inputs(batch, seq, seed=0, extra_dims=()):
  rng = np.random.default_rng(seed)
  shape = (batch,) + tuple(extra_dims) + (seq,)
  ids = rng.integers(5, 1000, size=shape).astype(np.int32)
  mask = np.ones(shape, np.int32)
  mask[..., seq - 3:] = 0
  return {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask),
          "segment_ids": tf.constant((np.arange(seq) >= seq // 2).astype(np.int32)
                                     * np.ones(shape, np.int32))}


def test_classification_head_matches_numpy_and_dropout_only_in_training():
  head = ClassificationHead(hidden_size=8, num_classes=3, dropout_rate=0.1)
  pooled = tf.constant(np.random.default_rng(0).normal(size=(4, 8)), tf.float32)
  logits = head(pooled, training=False).numpy()
  w, b = head.output_weights.numpy(), head.output_bias.numpy()
  assert w.shape == (3, 8)  # official layout [num_labels, hidden]
  np.testing.assert_allclose(logits, pooled.numpy() @ w.T + b, rtol=1e-5, atol=1e-6)
  tf.random.set_seed(1)
  trained = head(tf.ones([64, 8]), training=True).numpy()
  assert not np.allclose(trained, head(tf.ones([64, 8]), training=False).numpy())
  clone = ClassificationHead.from_config(head.get_config())
  assert clone.get_config() == head.get_config() and clone.dropout_rate == 0.1


def test_multiple_choice_head_softmax_over_choices():
  head = MultipleChoiceHead(hidden_size=8, num_choices=4)
  pooled = tf.constant(np.random.default_rng(2).normal(size=(8, 8)), tf.float32)
  logits = head(pooled, training=False).numpy()
  scorer = head.scorer
  scores = pooled.numpy() @ scorer.output_weights.numpy().T + scorer.output_bias.numpy()
  np.testing.assert_allclose(logits, scores.reshape(2, 4), rtol=1e-5, atol=1e-6)
  assert MultipleChoiceHead.from_config(head.get_config()).get_config() == head.get_config()


def test_classifier_outputs_and_config_roundtrip():
  model = AlbertClassifier(_config(), num_classes=3)
  inputs = _inputs(2, 16)
  outputs = model(inputs, training=False)
  assert outputs["logits"].shape == (2, 3) and outputs["logits"].dtype == tf.float32
  np.testing.assert_allclose(outputs["probabilities"].numpy(),
                             tf.nn.softmax(outputs["logits"]).numpy(), rtol=1e-6)
  pooled = model.encoder(inputs, training=False)["pooled_output"].numpy()
  head = model.classifier_head
  np.testing.assert_allclose(outputs["logits"].numpy(),
                             pooled @ head.output_weights.numpy().T + head.output_bias.numpy(),
                             rtol=1e-5, atol=1e-6)
  clone = AlbertClassifier.from_config(model.get_config())
  assert clone.get_config() == model.get_config()
  clone.set_weights(model.get_weights())
  np.testing.assert_allclose(clone(inputs, training=False)["logits"].numpy(),
                             outputs["logits"].numpy(), rtol=1e-5, atol=1e-6)
  regression = AlbertClassifier(_config(), num_classes=1, is_regression=True)
  out = regression(inputs, training=False)
  np.testing.assert_array_equal(out["probabilities"].numpy(), out["logits"].numpy())
  with pytest.raises(ValueError):
    AlbertClassifier(_config(), num_classes=2, is_regression=True)


def test_multiple_choice_model_runs_each_choice_through_the_encoder():
  model = AlbertMultipleChoice(_config(), num_choices=4)
  inputs = _inputs(2, 12, seed=3, extra_dims=(4,))
  outputs = model(inputs, training=False)
  assert outputs["logits"].shape == (2, 4)
  np.testing.assert_allclose(outputs["probabilities"].numpy().sum(-1), [1, 1], rtol=1e-6)
  # Choice (1, 2) scored alone equals its entry in the batched result.
  single = {k: v[1:2, 2] for k, v in inputs.items()}
  pooled = model.encoder(single, training=False)["pooled_output"]
  score = model.choice_head.scorer(pooled, training=False).numpy()[0, 0]
  assert outputs["logits"].numpy()[1, 2] == pytest.approx(score, abs=1e-5)
  clone = AlbertMultipleChoice.from_config(model.get_config())
  assert clone.get_config() == model.get_config()


def test_task_losses_against_numpy(tmp_path):
  task = ClassificationTask(GlueConfig(_config(), str(tmp_path), task_name="mrpc",
                                       max_seq_length=16, cached_dir=str(tmp_path)),
                            tokenizer=object())
  logits = np.array([[2.0, -1.0], [0.5, 0.5], [-1.0, 3.0]], np.float32)
  labels = {"label_ids": tf.constant([0, 1, 0]), "is_real_example": tf.constant([1., 1., 0.])}
  loss, _ = task.build_losses(labels, {"logits": tf.constant(logits)}, global_batch_size=4)
  log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  expected = -(log_probs[0, 0] + log_probs[1, 1]) / 4  # padding example weighted 0
  assert float(loss) == pytest.approx(expected, rel=1e-5)
  state = task.aggregate_outputs(None, None, {k: v.numpy() for k, v in labels.items()},
                                 {"logits": logits})
  result = task.reduce_outputs(state)
  assert result["eval_accuracy"] == 0.5 and result["num_examples"] == 2
  assert result["eval_loss"] == pytest.approx(-(log_probs[0, 0] + log_probs[1, 1]) / 2, rel=1e-5)
  stsb = ClassificationTask(GlueConfig(_config(), str(tmp_path), task_name="sts-b",
                                       max_seq_length=16, cached_dir=str(tmp_path)),
                            tokenizer=object())
  loss, _ = stsb.build_losses({"label_ids": tf.constant([1.0, 3.0])},
                              {"logits": tf.constant([[1.5], [2.0]])}, global_batch_size=2)
  assert float(loss) == pytest.approx((0.25 + 1.0) / 2)


def test_numpy_softmax_cross_entropy_matches_tensorflow():
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from albert_tf.metrics.losses import softmax_cross_entropy  # pylint: disable=g-import-not-at-top
  rng = np.random.RandomState(0)
  logits = rng.standard_normal((7, 4)) * 5
  labels = rng.randint(0, 4, 7)
  want = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits).numpy()
  np.testing.assert_allclose(softmax_cross_entropy(logits, labels), want, rtol=1e-6)
