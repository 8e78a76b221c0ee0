"""AlbertPreprocessor: the Keras layer a notebook holds, raw text -> encoder inputs.

The in-graph tokenizer of the exports (text/in_graph_tokenizer.py) with the names a Keras user
expects: `sequence_length` (settable), one text or a pair, a batch or a single example (so it runs
in `tf.data.Dataset.map` before or after `batch`), and a check that the texts are strings. The
ids are the scripts' ids: the same SentencePiece pieces and the official truncation and packing
(text/packing.py), nothing written twice.
"""

import tensorflow as tf
# The op library tf_text.SentencepieceTokenizer wraps (tensorflow-text has no public name for it).
from tensorflow_text.python.ops.sentencepiece_tokenizer import gen_sentencepiece_tokenizer
import tf_keras

from albert_tf.errors import AlbertError
from albert_tf.text.in_graph_tokenizer import InGraphTokenizer

FEATURES = ("input_ids", "input_mask", "segment_ids")


def check_strings(tensor, what):
  """Raises AlbertError unless `tensor` holds strings (what: the input named in the message)."""
  if tensor.dtype != tf.string:
    raise AlbertError(f"{what}: expected strings, got {tensor.dtype.name} values")


class _SentencePieceOp:
  """tokenize(texts [batch]) -> int32 RaggedTensor [batch, (pieces)], the model's op run where it
  is called.

  tf_text.SentencepieceTokenizer makes its model once, as a kernel-owned resource that
  `tf.random.set_seed` / `tf_keras.utils.set_random_seed` destroy (they clear the eager kernel
  cache): every function traced before then fails with "Resource ... does not exist". A
  notebook seeds after building a model, so the preprocessor makes the resource inside each
  traced function (owned by that function) or each eager call (cached until the next reset).
  """

  def __init__(self, model):
    self._model = model

  def tokenize(self, texts):
    handle = gen_sentencepiece_tokenizer.sentencepiece_op(model=self._model)
    values, row_splits = gen_sentencepiece_tokenizer.sentencepiece_tokenize_op(
        handle, texts, nbest_size=0, alpha=1.0, add_bos=False, add_eos=False, reverse=False,
        out_type=tf.int32)
    return tf.RaggedTensor.from_row_splits(values, row_splits, validate=False)


@tf_keras.utils.register_keras_serializable(package="albert_tf")
class AlbertPreprocessor(InGraphTokenizer):
  """Strings (or a pair of strings) -> dict of int32 input_ids / input_mask / segment_ids.

  Call with texts tf.string [batch] (or [batch, 1], as Keras feeds a column), a scalar string
  (one example: the outputs are then [sequence_length]), or a pair (text_a, text_b) of such
  tensors. Returns int32 [batch, sequence_length] (or [sequence_length]) tensors.
  """

  def __init__(self, spm_model_file, sequence_length=128, do_lower_case=True, **kwargs):
    kwargs.pop("max_seq_length", None)  # (the base class's name for sequence_length)
    super().__init__(spm_model_file, max_seq_length=sequence_length,
                     do_lower_case=do_lower_case, **kwargs)
    self._sp_op = _SentencePieceOp(self._sp_op._model_resource._model)  # pylint: disable=protected-access

  @property
  def sequence_length(self):
    """Pieces per packed input, [CLS] and [SEP]s included (settable; >= 3)."""
    return self.max_seq_length

  @sequence_length.setter
  def sequence_length(self, value):
    if int(value) < 3:
      raise AlbertError(f"sequence_length={value}: expected at least 3")
    self.max_seq_length = int(value)

  @property
  def vocabulary_size(self):
    """The number of pieces of the SentencePiece model."""
    return self._py_tokenizer.sp_model.GetPieceSize()

  def call(self, inputs):
    pair = isinstance(inputs, (tuple, list))
    texts = [tf.convert_to_tensor(t) for t in (inputs if pair else [inputs])]
    if len(texts) not in (1, 2):
      raise AlbertError(f"AlbertPreprocessor takes one text or a pair, got {len(texts)} texts")
    for i, t in enumerate(texts):
      check_strings(t, "AlbertPreprocessor input" + (f" {i}" if pair else ""))
    scalar = texts[0].shape.rank == 0
    # A [batch, 1] column (Keras' 2-D view of a 1-D array) or one example -> [batch].
    texts = [tf.reshape(t, [-1]) for t in texts]
    outputs = super().call(tuple(texts) if pair else texts[0])
    if scalar:
      outputs = {k: v[0] for k, v in outputs.items()}
    return outputs

  def get_config(self):
    config = super().get_config()
    config["sequence_length"] = config.pop("max_seq_length")
    return config
