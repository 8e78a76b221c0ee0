"""Every export carries TF Serving's warm-up requests (assets.extra/tf_serving_warmup_requests),
read back here with TF Serving's own protos (tensorflow_serving.apis.prediction_log_pb2) and
replayed through the loaded SavedModel's signatures, as TF Serving does when it loads a version.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  pylint: disable=unused-import  (the raw-text signatures' ops)
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow_serving.apis import prediction_log_pb2

from albert_tf.export import export_classifier, export_encoder, export_multiple_choice
from albert_tf.export import saved_model_writer
from albert_tf.export import warmup
from albert_tf.export.hub_preprocessor import export_preprocessor
from albert_tf.export.squad_serving import export_squad_model
from albert_tf.common.export_format import CORE_OPS_SUBDIR, WARMUP_REQUESTS
from albert_tf.models import AlbertClassifier, AlbertMultipleChoice, AlbertSquadModel
from albert_tf.models.pretrainer import AlbertPretrainer
from tests.helpers.model_inputs import randomize_weights
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_albert_config

SEQ = 24  # the serving exports' max_seq_length
VOCAB, TYPES = 1000, 2  # the tiny config's
TOKEN_INPUTS = ("input_ids", "input_mask", "segment_ids", "p_mask", "input_word_ids",
                "input_type_ids")


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
  """{name: (SavedModel directory, token shape after the batch or None, loaded)} of every kind of
  export: classifier (raw text pair), RACE, SQuAD v2, the TF Hub encoder and preprocessor;
  the serving versions' core_ops/ copies are SavedModels of their own."""
  root = tmp_path_factory.mktemp("warmup")
  spm = make_tiny_spm_model(str(root))
  config = tiny_albert_config()
  classifier = export_classifier(randomize_weights(AlbertClassifier(config, num_classes=3), 0),
                                 str(root / "mnli"), ["a", "b", "c"], SEQ, spm, True, "mnli",
                                 True, threshold=0.5)
  race = export_multiple_choice(randomize_weights(AlbertMultipleChoice(config, num_choices=4), 1),
                                str(root / "race"), SEQ, 8, spm, True)
  squad = export_squad_model(
      randomize_weights(AlbertSquadModel(config, version_2_with_negative=True), 2),
      str(root / "squad"), SEQ)
  hub = export_encoder(randomize_weights(AlbertPretrainer(config), 3), str(root / "hub"), spm)
  preprocessor = export_preprocessor(str(root / "preprocessor"), spm, seq_length=SEQ)
  found = {"classifier": (classifier, [SEQ]),
           "classifier core_ops": (os.path.join(classifier, CORE_OPS_SUBDIR), [SEQ]),
           "race": (race, [4, SEQ]),
           "race core_ops": (os.path.join(race, CORE_OPS_SUBDIR), [4, SEQ]),
           "squad": (squad, [SEQ]),
           # The hub encoder has no max_seq_length: DEFAULT_SEQ_LENGTH within the positions.
           "hub": (hub, [min(warmup.DEFAULT_SEQ_LENGTH, config.max_position_embeddings)]),
           "preprocessor": (preprocessor, None)}
  # Loaded once; the loaded objects own the variables their signatures read.
  return {name: (directory, shape, tf.saved_model.load(directory))
          for name, (directory, shape) in found.items()}


def read_warmup(directory):
  """The warm-up file of a SavedModel, parsed with TF Serving's PredictionLog."""
  path = os.path.join(directory, WARMUP_REQUESTS)
  assert os.path.isfile(path), f"no warm-up requests in {directory}"
  return [prediction_log_pb2.PredictionLog.FromString(raw.numpy())
          for raw in tf.data.TFRecordDataset(path)]


@pytest.mark.parametrize("name", ["classifier", "classifier core_ops", "race", "race core_ops",
                                  "squad", "hub", "preprocessor"])
def test_warmup_requests_match_the_signatures_and_replay(exports, name):
  directory, token_shape, loaded = exports[name]
  records = read_warmup(directory)
  # Signatures that take inputs (the hub encoder's tokenization_info takes none).
  signatures = {key: fn for key, fn in loaded.signatures.items()
                if fn.structured_input_signature[1]}
  assert signatures
  seen = {}
  for record in records:
    assert record.WhichOneof("log_type") == "predict_log"
    request = record.predict_log.request
    assert not request.output_filter and not request.model_spec.name
    signature = request.model_spec.signature_name
    assert signature in signatures, f"{name}: request for unknown signature {signature!r}"
    specs = signatures[signature].structured_input_signature[1]
    assert set(request.inputs) == set(specs), (name, signature)
    inputs = {key: tf.make_ndarray(tensor) for key, tensor in request.inputs.items()}
    batch = {value.shape[0] for value in inputs.values()}
    assert len(batch) == 1, (name, signature, {k: v.shape for k, v in inputs.items()})
    batch = batch.pop()
    for key, value in inputs.items():
      spec = specs[key]
      assert tf.as_dtype(request.inputs[key].dtype) == spec.dtype, (name, signature, key)
      assert spec.shape.is_compatible_with(value.shape), (name, signature, key, value.shape)
      if key in TOKEN_INPUTS:
        assert list(value.shape[1:]) == token_shape, (name, signature, key, value.shape)
    if "input_ids" in inputs or "input_word_ids" in inputs:
      ids = inputs.get("input_ids", inputs.get("input_word_ids"))
      mask = inputs["input_mask"].reshape(-1, ids.shape[-1])
      assert ids.min() >= 0 and ids.max() < VOCAB
      assert mask[0].all(), "the first row fills the sequence (the longest shape is warmed up)"
      if batch > 1:
        assert not mask.all(), "realistic rows: some shorter than the sequence"
    # Replayed as TF Serving replays it: the signature's input checks must pass.
    outputs = signatures[signature](**{k: tf.constant(v) for k, v in inputs.items()})
    for key, value in outputs.items():
      if isinstance(value, tf.Tensor) and value.shape.rank:
        assert value.shape[0] == batch, (name, signature, key, value.shape)
    seen.setdefault(signature, []).append(batch)
  assert set(seen) == set(signatures), name
  for signature, batches in seen.items():
    assert sorted(batches) == sorted(warmup.WARMUP_BATCH_SIZES), (name, signature, batches)


def test_tf_example_requests_hold_the_official_records(exports):
  directory = exports["race"][0]
  for record in read_warmup(directory):
    request = record.predict_log.request
    if request.model_spec.signature_name != "tf_example":
      continue
    for serialized in tf.make_ndarray(request.inputs["examples"]):
      example = tf.train.Example.FromString(serialized)
      features = example.features.feature
      assert sorted(features) == ["input_ids", "input_mask", "segment_ids"]
      for feature in features.values():
        assert len(feature.int64_list.value) == 4 * SEQ
      segments = np.array(features["segment_ids"].int64_list.value)
      assert set(segments) <= set(range(TYPES))


def test_raw_text_requests_are_sentences(exports):
  directory = exports["classifier"][0]
  texts = [t for record in read_warmup(directory)
           if record.predict_log.request.model_spec.signature_name == "serving_default"
           for t in tf.make_ndarray(record.predict_log.request.inputs["text_a"])]
  assert all(t.decode("utf-8").endswith(".") and len(t.split()) >= 5 for t in texts)


@pytest.mark.parametrize("finalise", ["write_new_version", "write_atomically"])
def test_written_inside_the_temporary_export_before_the_rename(tmp_path, monkeypatch, finalise):
  """The warm-up file is part of the export TF Serving sees appear: written into the temporary
  directory, before it is renamed into place; if writing it fails, no export appears."""
  calls = []
  target = tmp_path / "base"

  def fake_warmup(directory, info):
    calls.append(directory)
    assert os.path.isfile(os.path.join(directory, "marker"))  # after write_fn
    assert not os.path.basename(directory).isdigit() and directory != str(target)
    raise RuntimeError("warm-up failed")

  monkeypatch.setattr(warmup, "write_warmup_requests", fake_warmup)

  def write(tmp_dir):
    os.makedirs(tmp_dir, exist_ok=True)
    with open(os.path.join(tmp_dir, "marker"), "w", encoding="utf-8") as f:
      f.write("x")

  with pytest.raises(RuntimeError, match="warm-up failed"):
    getattr(saved_model_writer, finalise)(str(target), {"kind": "test"}, write)
  assert len(calls) == 1
  published = target if finalise == "write_atomically" else None
  if published is not None:
    assert not published.exists()
  else:
    assert saved_model_writer.export_versions(str(target)) == []
  assert not [p for p in tmp_path.rglob("*") if p.name == "marker"], "temporary export left"


def test_unknown_input_is_an_error_not_a_skipped_signature():
  signature = meta_graph_pb2.SignatureDef()
  signature.inputs["pixels"].dtype = tf.float32.as_datatype_enum
  with pytest.raises(ValueError, match="'pixels'"):
    warmup.warmup_requests({"serving_default": signature},
                           {"albert_config": {"vocab_size": VOCAB, "type_vocab_size": TYPES,
                                              "max_position_embeddings": 128}})


def test_every_signature_takes_any_batch_size(exports):
  """TF Serving's batching merges requests along dimension 0: every signature leaves it free."""
  for name, (_, _, loaded) in exports.items():
    for key, fn in loaded.signatures.items():
      for input_name, spec in fn.structured_input_signature[1].items():
        assert spec.shape[0] is None, (name, key, input_name, spec.shape)


def test_tf_serving_padding_would_change_token_ids_answers(exports):
  """Why configs/serving/batching_parameters.txt sets pad_variable_length_inputs: false. TF
  Serving pads a request shorter than the others in a batch with the first value of each of
  its tensors (tensorflow_serving/batching/batching_util.cc, PadTensor); input_mask's first
  value is 1, so the padding positions would be attended. Zero padding changes nothing."""
  token_ids = exports["classifier core_ops"][2].signatures["token_ids"]
  rng = np.random.default_rng(5)
  real, longer = 10, SEQ
  request = {"input_ids": rng.integers(5, VOCAB, size=(1, real)),
             "input_mask": np.ones((1, real)),
             "segment_ids": (np.arange(real) >= 4)[None]}

  def probabilities(pad_value_of):
    inputs = {k: np.pad(v.astype(np.int32), [(0, 0), (0, longer - real)],
                        constant_values=pad_value_of(v)) for k, v in request.items()}
    return token_ids(**{k: tf.constant(v) for k, v in inputs.items()})["probabilities"].numpy()

  alone = token_ids(**{k: tf.constant(v.astype(np.int32)) for k, v in request.items()})
  zero_padded = probabilities(lambda v: 0)
  tf_serving_padded = probabilities(lambda v: v.flat[0])
  np.testing.assert_allclose(zero_padded, alone["probabilities"].numpy(), atol=1e-6)
  assert np.abs(tf_serving_padded - zero_padded).max() > 1e-3
