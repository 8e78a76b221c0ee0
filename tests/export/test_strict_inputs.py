"""Every exported signature refuses inconsistent inputs with a one-line InvalidArgumentError
(which input, what was expected) and answers consistent ones as the model does.

The exports are loaded back with tf.saved_model.load and called through their signatures, as a
serving process would (a signature's TensorSpec is not enforced on that path: the in-graph
checks are what stands between a bad request and an answer).
"""

import base64
import types

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.export import export_classifier, export_encoder, export_multiple_choice
from albert_tf.export.squad_serving import export_squad_model
from albert_tf.export.tflite import write_tflite
from albert_tf.models import AlbertClassifier, AlbertMultipleChoice, AlbertSquadModel
from albert_tf.models.pretrainer import AlbertPretrainer
from tests.helpers import scripts
from tests.helpers.model_inputs import randomize_weights
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_albert_config

SEQ = 24  # the exports' max_seq_length; the tiny config: vocab 1000, 2 types, 128 positions
VOCAB, MAX_POSITIONS = 1000, 128
RACE_TEXT = {"article": ["The quick brown fox jumps over the lazy dog."],
             "question": ["The fox jumps over the _ dog."],
             "options": [["lazy", "quick", "brown", "small"]]}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
  root = tmp_path_factory.mktemp("strict")
  spm = make_tiny_spm_model(str(root))
  config = tiny_albert_config()
  models = types.SimpleNamespace(
      classifier=randomize_weights(AlbertClassifier(config, num_classes=2), 0),
      chooser=randomize_weights(AlbertMultipleChoice(config, num_choices=4), 1),
      squad=randomize_weights(AlbertSquadModel(config, version_2_with_negative=True), 2),
      pretrainer=randomize_weights(AlbertPretrainer(config), 3))
  paths = dict(
      classifier=export_classifier(models.classifier, str(root / "mrpc"), ["0", "1"], SEQ, spm,
                                   True, "mrpc", True),
      race=export_multiple_choice(models.chooser, str(root / "race"), SEQ, 8, spm, True),
      squad=export_squad_model(models.squad, str(root / "squad"), SEQ),
      hub=export_encoder(models.pretrainer, str(root / "hub"), spm))
  # The loaded objects own the variables their signatures read: keep them alive.
  loaded = {name: tf.saved_model.load(path) for name, path in paths.items()}
  return types.SimpleNamespace(models=models, loaded=loaded,
                               signatures={name: m.signatures for name, m in loaded.items()})


def token_inputs(shape, seed=0, real=None):
  """Valid int32 input_ids / input_mask / segment_ids of `shape` (last dim: seq_len)."""
  rng = np.random.default_rng(seed)
  seq = shape[-1]
  real = seq - 3 if real is None else real
  mask = np.broadcast_to((np.arange(seq) < real).astype(np.int32), shape).copy()
  return {"input_ids": (rng.integers(5, VOCAB, size=shape) * mask).astype(np.int32),
          "input_mask": mask,
          "segment_ids": np.broadcast_to((np.arange(seq) >= real // 2), shape).astype(
              np.int32) * mask}


def call(signature, **inputs):
  return signature(**{k: tf.constant(v) for k, v in inputs.items()})


def assert_refused(signature, expected, **inputs):
  """The call raises InvalidArgumentError whose message has the line `expected`, as one line."""
  with pytest.raises(tf.errors.InvalidArgumentError) as raised:
    call(signature, **inputs)
  lines = [line for line in raised.value.message.splitlines() if "assertion failed" in line]
  assert lines == [f"assertion failed: [{expected}]"], raised.value.message


def with_changes(inputs, **changes):
  """`inputs` with some replaced (as arrays of the replaced input's dtype)."""
  return dict(inputs, **{k: np.asarray(v, dtype=inputs[k].dtype if k in inputs else np.int32)
                         for k, v in changes.items()})


def tf_examples(features):
  """{name: int values per record} -> serialized tf.Examples (a string array)."""
  encoded = scripts.tf_examples_b64(features)["b64"]
  return np.array([base64.b64decode(record) for record in encoded], dtype=object)


# ----------------------------------------------------------------------------- classifier
# (change to the valid [2, 32] inputs, the expected message)
CLASSIFIER_CASES = {
    "probe: shorter input_mask": (
        dict(input_mask=np.ones([2, 16])),
        "input_mask has shape [2, 16], expected the shape of input_ids [2, 32]"),
    "longer segment_ids": (
        dict(segment_ids=np.zeros([2, 40])),
        "segment_ids has shape [2, 40], expected the shape of input_ids [2, 32]"),
    "probe: batch-1 segment_ids": (
        dict(segment_ids=np.zeros([1, 32])),
        "segment_ids has shape [1, 32], expected the shape of input_ids [2, 32]"),
    "batch-1 input_mask": (
        dict(input_mask=np.ones([1, 32])),
        "input_mask has shape [1, 32], expected the shape of input_ids [2, 32]"),
    "mask and segments agree, ids do not": (
        dict(input_ids=np.full([2, 30], 5)),
        "input_mask has shape [2, 32], expected the shape of input_ids [2, 30]"),
    "input_ids of rank 1": (
        dict(input_ids=np.full([32], 5)),
        "input_ids has shape [32], expected [batch, seq_len]"),
    "id = vocab_size": (
        dict(input_ids=np.full([2, 32], VOCAB)),
        "input_ids has values from 1000 to 1000, expected token ids in [0, 1000) (vocab_size)"),
    "negative id": (
        dict(input_ids=np.full([2, 32], -3)),
        "input_ids has values from -3 to -3, expected token ids in [0, 1000) (vocab_size)"),
    "segment id 2": (
        dict(segment_ids=np.full([2, 32], 2)),
        "segment_ids has values from 2 to 2, expected segment ids in [0, 2) (type_vocab_size)"),
    "mask value 2": (
        dict(input_mask=np.full([2, 32], 2)),
        "input_mask has values from 2 to 2, expected 0 or 1"),
}


@pytest.mark.parametrize("case", sorted(CLASSIFIER_CASES))
def test_classifier_token_ids_refuses(served, case):
  changes, expected = CLASSIFIER_CASES[case]
  assert_refused(served.signatures["classifier"]["token_ids"], expected,
                 **with_changes(token_inputs([2, 32]), **changes))


def test_classifier_sequence_longer_than_the_position_table_is_refused(served):
  inputs = token_inputs([1, MAX_POSITIONS + 1], real=MAX_POSITIONS + 1)
  assert_refused(served.signatures["classifier"]["token_ids"],
                 "input_ids has seq_len 129, expected 1 to 128 (max_position_embeddings)",
                 **inputs)
  assert_refused(served.signatures["classifier"]["token_ids"],
                 "input_ids has seq_len 0, expected 1 to 128 (max_position_embeddings)",
                 **token_inputs([1, 0], real=0))
  # The longest sequence the model has positions for is served, as the model computes it.
  full = token_inputs([1, MAX_POSITIONS], real=MAX_POSITIONS)
  np.testing.assert_allclose(
      call(served.signatures["classifier"]["token_ids"], **full)["probabilities"].numpy(),
      served.models.classifier(full, training=False)["probabilities"].numpy(), atol=1e-5)


def test_classifier_good_inputs_answer_as_the_model(served):
  model = served.models.classifier
  inputs = token_inputs([3, 32], seed=4, real=20)
  expected = model(inputs, training=False)["probabilities"].numpy()
  assert np.ptp(expected) > 0.05  # far from uniform: the comparison bites
  got = call(served.signatures["classifier"]["token_ids"], **inputs)
  np.testing.assert_allclose(got["probabilities"].numpy(), expected, atol=1e-5)
  # The official tf.Example records of max_seq_length values give the same answer.
  records = token_inputs([3, SEQ], seed=5)
  by_example = call(served.signatures["classifier"]["tf_example"], examples=tf_examples(records))
  np.testing.assert_allclose(by_example["probabilities"].numpy(),
                             model(records, training=False)["probabilities"].numpy(), atol=1e-5)
  # Batch 0 is not an error: an empty answer.
  empty = call(served.signatures["classifier"]["token_ids"], **token_inputs([0, 8]))
  assert empty["probabilities"].shape == (0, 2)
  # Refused after the shape checks pass too: the bad request is not half-served.
  assert_refused(served.signatures["classifier"]["token_ids"],
                 "input_mask has values from -1 to 1, expected 0 or 1",
                 **with_changes(inputs, input_mask=np.where(inputs["input_mask"] == 0, -1, 1)))


def test_tf_example_records_must_hold_max_seq_length_values(served):
  signature = served.signatures["classifier"]["tf_example"]
  good = {k: v.astype(np.int64) for k, v in token_inputs([3, SEQ]).items()}
  short = dict(good, input_mask=[list(good["input_mask"][0]), list(good["input_mask"][1][:16]),
                                 list(good["input_mask"][2])])
  assert_refused(signature, "tf_example record 1 has 16 input_mask values, expected 24 "
                 "(max_seq_length)", examples=tf_examples(short))
  long = dict(good, input_ids=np.concatenate([good["input_ids"], good["input_ids"]], axis=1))
  assert_refused(signature, "tf_example record 0 has 48 input_ids values, expected 24 "
                 "(max_seq_length)", examples=tf_examples(long))
  missing = {k: v for k, v in good.items() if k != "segment_ids"}
  assert_refused(signature, "tf_example record 0 has 0 segment_ids values, expected 24 "
                 "(max_seq_length)", examples=tf_examples(missing))
  # int64 values are checked before the cast to int32 (2**32 + 5 would wrap around to 5).
  wrapped = dict(good, input_ids=good["input_ids"] + 2**32)
  assert_refused(signature, f"input_ids has values from {wrapped['input_ids'].min()} to "
                 f"{wrapped['input_ids'].max()}, expected token ids in [0, 1000) (vocab_size)",
                 examples=tf_examples(wrapped))


def test_raw_text_batch_sizes_must_agree(served):
  signature = served.signatures["classifier"]["serving_default"]
  assert_refused(signature, "text_b has shape [1], expected the shape of text_a [2]",
                 text_a=np.array(["The quick brown fox.", "Paris is a city."], dtype=object),
                 text_b=np.array(["The lazy dog."], dtype=object))
  good = call(signature, text_a=np.array(["The quick brown fox.", "A fox."], dtype=object),
              text_b=np.array(["The lazy dog.", ""], dtype=object))
  assert good["probabilities"].shape == (2, 2)


# ----------------------------------------------------------------------------- RACE
def test_race_signatures_refuse_inconsistent_inputs(served):
  signatures, model = served.signatures["race"], served.models.chooser
  inputs = token_inputs([2, 4, SEQ], seed=6)
  np.testing.assert_allclose(
      call(signatures["token_ids"], **inputs)["probabilities"].numpy(),
      model(inputs, training=False)["probabilities"].numpy(), atol=1e-5)
  three = token_inputs([2, 3, SEQ])
  assert_refused(signatures["token_ids"],
                 "input_ids has shape [2, 3, 24], expected [batch, 4, seq_len]", **three)
  assert_refused(signatures["token_ids"],
                 "segment_ids has shape [1, 4, 24], expected the shape of input_ids [2, 4, 24]",
                 **with_changes(inputs, segment_ids=np.zeros([1, 4, SEQ])))
  assert_refused(signatures["token_ids"],
                 "input_ids has shape [8, 24], expected [batch, 4, seq_len]",
                 **{k: v.reshape(8, SEQ) for k, v in inputs.items()})
  assert_refused(signatures["token_ids"], "input_ids has values from 5 to 1000, expected token "
                 "ids in [0, 1000) (vocab_size)",
                 **with_changes(inputs, input_ids=np.broadcast_to(
                     np.where(np.arange(SEQ) == 3, VOCAB, 5), [2, 4, SEQ])))
  short = {k: v.reshape(2, 4 * SEQ)[:, :-1].astype(np.int64) for k, v in inputs.items()}
  assert_refused(signatures["tf_example"], "tf_example record 0 has 95 input_ids values, "
                 "expected 96 (4 choices x max_seq_length)", examples=tf_examples(short))
  assert_refused(signatures["serving_default"],
                 "question has shape [2], expected the shape of article [1]",
                 **dict(RACE_TEXT, question=np.array(RACE_TEXT["question"] * 2, dtype=object)))
  assert_refused(signatures["serving_default"],
                 "options has shape [1, 3], expected [batch, 4]",
                 **dict(RACE_TEXT, options=np.array([RACE_TEXT["options"][0][:3]],
                                                    dtype=object)))
  assert_refused(signatures["serving_default"],
                 "options has shape [2, 4], expected the batch size of article [1]",
                 **dict(RACE_TEXT, options=np.array(RACE_TEXT["options"] * 2, dtype=object)))
  text = {k: np.array(v, dtype=object) for k, v in RACE_TEXT.items()}
  assert call(signatures["serving_default"], **text)["probabilities"].shape == (1, 4)


# ----------------------------------------------------------------------------- SQuAD
def test_squad_signature_refuses_inconsistent_inputs(served):
  signature, model = served.signatures["squad"]["serving_default"], served.models.squad
  inputs = token_inputs([2, SEQ], seed=7)
  inputs["p_mask"] = 1 - inputs["segment_ids"]
  expected = model(inputs, training=False)
  got = call(signature, **inputs)
  np.testing.assert_allclose(got["cls_logits"].numpy(), expected["cls_logits"].numpy(),
                             atol=1e-4)
  np.testing.assert_array_equal(got["start_top_index"].numpy(),
                                expected["start_top_index"].numpy())
  assert_refused(signature, "input_ids has shape [2, 16], expected [batch, 24] "
                 "(max_seq_length 24)", **{k: v[:, :16] for k, v in inputs.items()})
  assert_refused(signature, "p_mask has shape [1, 24], expected the shape of input_ids [2, 24]",
                 **with_changes(inputs, p_mask=inputs["p_mask"][:1]))
  assert_refused(signature, "p_mask has values from 0 to 2, expected 0 or 1",
                 **with_changes(inputs, p_mask=2 * inputs["p_mask"]))
  assert_refused(signature, "segment_ids has values from 0 to 2, expected segment ids in "
                 "[0, 2) (type_vocab_size)",
                 **with_changes(inputs, segment_ids=2 * inputs["segment_ids"]))
  assert_refused(signature, "input_ids has values from -1 to 999, expected token ids in "
                 "[0, 1000) (vocab_size)",
                 **with_changes(inputs, input_ids=np.where(np.arange(SEQ) == 0, -1, 999)
                                * np.ones([2, 1], np.int32)))


# ----------------------------------------------------------------------------- TF-Hub encoder
def test_hub_encoder_signatures_refuse_inconsistent_inputs(served):
  signatures, model = served.signatures["hub"], served.models.pretrainer
  inputs = token_inputs([2, 16], seed=8)
  positions = np.array([[1, 4, 6], [0, 2, 15]], np.int32)
  expected = model(dict(inputs, masked_lm_positions=tf.constant(positions)), training=False)
  got = call(signatures["mlm"], mlm_positions=positions, **inputs)
  np.testing.assert_allclose(got["mlm_logits"].numpy(), expected["mlm_logits"].numpy(),
                             atol=1e-4)
  for name in ("tokens", "sop", "mlm"):
    extra = {"mlm_positions": positions} if name == "mlm" else {}
    assert_refused(signatures[name], "input_mask has shape [2, 12], expected the shape of "
                   "input_ids [2, 16]",
                   **with_changes(inputs, input_mask=inputs["input_mask"][:, :12]), **extra)
    assert_refused(signatures[name], "segment_ids has values from 0 to 2, expected segment ids "
                   "in [0, 2) (type_vocab_size)",
                   **with_changes(inputs, segment_ids=2 * inputs["segment_ids"]), **extra)
  assert_refused(signatures["tokens"], "input_ids has seq_len 200, expected 1 to 128 "
                 "(max_position_embeddings)", **token_inputs([1, 200]))
  assert_refused(signatures["mlm"], "mlm_positions has values from 0 to 16, expected positions "
                 "in [0, 16) (the seq_len of input_ids)",
                 mlm_positions=np.where(positions == 15, 16, positions), **inputs)
  assert_refused(signatures["mlm"], "mlm_positions has values from -1 to 15, expected "
                 "positions in [0, 16) (the seq_len of input_ids)",
                 mlm_positions=np.where(positions == 0, -1, positions), **inputs)
  assert_refused(signatures["mlm"], "mlm_positions has shape [1, 3], expected the batch size "
                 "of input_ids [2, 16]", mlm_positions=positions[:1], **inputs)
  assert_refused(signatures["mlm"], "mlm_positions has shape [6], expected "
                 "[batch, num_positions]", mlm_positions=positions.ravel(), **inputs)


# ----------------------------------------------------------------------------- TFLite
def test_tflite_refuses_what_it_can(served, tmp_path):
  """LiteRT has no assert op (the converter drops tf.debugging asserts): a bad value must at
  least fail the call, through its bounds-checked GATHER, rather than change the answer."""
  from ai_edge_litert.interpreter import Interpreter  # pylint: disable=g-import-not-at-top
  model = served.models.squad
  path = str(write_tflite(model, tmp_path / "albert_model.tflite", SEQ))

  def run(**changes):
    inputs = token_inputs([1, SEQ], seed=9)
    inputs["p_mask"] = 1 - inputs["segment_ids"]
    inputs = with_changes(inputs, **changes)
    runner = Interpreter(model_path=path).get_signature_runner("serving_default")
    return inputs, runner(**inputs)

  inputs, got = run()
  expected = model(inputs, training=False)
  np.testing.assert_allclose(got["cls_logits"], expected["cls_logits"].numpy(), atol=1e-4)
  bad_values = {"input_mask": 2 * np.ones([1, SEQ]), "p_mask": 2 * np.ones([1, SEQ]),
                "input_ids": np.full([1, SEQ], VOCAB), "segment_ids": np.full([1, SEQ], 2)}
  for name, value in bad_values.items():
    with pytest.raises(RuntimeError, match="gather index out of bounds"):
      run(**{name: value})
  # Another shape: the runner resizes the inputs, and preparing the fixed-shape graph fails.
  for name in ("input_mask", "p_mask"):
    with pytest.raises(RuntimeError, match="failed to prepare"):
      run(**{name: np.ones([1, 16])})
