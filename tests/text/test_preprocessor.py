"""AlbertPreprocessor gives the scripts' feature-writer ids, in a model or a tf.data map."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import tokenization
from albert_tf.errors import AlbertError
from albert_tf.text.packing import encode_text_pair
from albert_tf.text.preprocessor import AlbertPreprocessor
from tests.helpers import text as text_helpers

TEXTS_A = text_helpers.VARIED_TEXTS[:6] + ["x" * 200]
TEXTS_B = list(reversed(TEXTS_A))
LENGTH = 16


def _writer_rows(spm_model, texts_a, texts_b):
  """The scripts' Python feature writer (encode_text_pair), as int32 arrays."""
  py = tokenization.FullTokenizer(spm_model_file=spm_model, do_lower_case=True)
  rows = [encode_text_pair(a, None if texts_b is None else texts_b[i], LENGTH, py)
          for i, a in enumerate(texts_a)]
  return {k: np.array([r[k] for r in rows], np.int32) for k in rows[0]}


@pytest.mark.parametrize("pair", [False, True])
def test_same_ids_as_the_feature_writer(spm_model, pair):
  layer = AlbertPreprocessor(spm_model, sequence_length=LENGTH)
  texts_b = TEXTS_B if pair else None
  got = layer((tf.constant(TEXTS_A), tf.constant(texts_b)) if pair else tf.constant(TEXTS_A))
  want = _writer_rows(spm_model, TEXTS_A, texts_b)
  for name in want:
    np.testing.assert_array_equal(got[name].numpy(), want[name], err_msg=name)


def test_dataset_map_on_single_examples_and_columns(spm_model):
  layer = AlbertPreprocessor(spm_model, sequence_length=LENGTH)
  want = _writer_rows(spm_model, TEXTS_A, TEXTS_B)
  single = tf.data.Dataset.from_tensor_slices((TEXTS_A, TEXTS_B)).map(lambda a, b: layer((a, b)))
  got = list(single.batch(len(TEXTS_A)))[0]
  np.testing.assert_array_equal(got["input_ids"].numpy(), want["input_ids"])
  column = layer(tf.constant(TEXTS_A)[:, None])  # Keras' [batch, 1] view of a 1-D array
  np.testing.assert_array_equal(column["input_ids"].numpy(),
                                _writer_rows(spm_model, TEXTS_A, None)["input_ids"])


def test_sequence_length_settable_and_config_round_trip(spm_model):
  layer = AlbertPreprocessor(spm_model, sequence_length=LENGTH, do_lower_case=False)
  layer.sequence_length = 8
  assert layer(tf.constant(["a b c d e f g h i j k"]))["input_ids"].shape == (1, 8)
  config = layer.get_config()
  assert config["sequence_length"] == 8 and config["do_lower_case"] is False
  clone = AlbertPreprocessor.from_config(config)
  assert clone.sequence_length == 8 and clone.spm_model_file == spm_model
  with pytest.raises(AlbertError, match="at least 3"):
    layer.sequence_length = 2


def test_non_string_texts_raise(spm_model):
  layer = AlbertPreprocessor(spm_model, sequence_length=LENGTH)
  with pytest.raises(AlbertError, match="expected strings, got int32"):
    layer(tf.constant([1, 2]))


def test_survives_seeding_after_it_was_traced(spm_model):
  """tf_keras.utils.set_random_seed clears the eager kernel cache, where tf_text keeps its
  SentencePiece resource: a function traced before it must still run."""
  layer = AlbertPreprocessor(spm_model, sequence_length=LENGTH)
  traced = tf.function(lambda texts: layer(texts)["input_ids"])
  before = traced(tf.constant(TEXTS_A)).numpy()
  tf.random.set_seed(3)
  np.testing.assert_array_equal(traced(tf.constant(TEXTS_A)).numpy(), before)
  np.testing.assert_array_equal(layer(tf.constant(TEXTS_A))["input_ids"].numpy(), before)
