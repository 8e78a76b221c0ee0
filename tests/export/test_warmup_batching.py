"""configs/serving/batching_parameters.txt (the README's `--batching_parameters_file`) parses
with TF Serving's own BatchingParameters (its session_bundle_config.proto, compiled once into
tests/fixtures/tf_serving/ by tests/fixtures/make_tf_serving_descriptors.py) and agrees with the
exports: its batch sizes are the warm-up requests' and it does not pad token inputs."""

import pytest
from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf import message_factory
from google.protobuf import text_format
# The imports of session_bundle_config.proto, registered by the tensorflow package.
from tensorflow.core.protobuf import config_pb2, named_tensor_pb2  # noqa: F401  pylint: disable=unused-import

from albert_tf.export import warmup
from tests.helpers.paths import REPO_ROOT

PARAMETERS = REPO_ROOT / "configs" / "serving" / "batching_parameters.txt"
DESCRIPTOR = REPO_ROOT / "tests" / "fixtures" / "tf_serving" / "session_bundle_config.desc"


@pytest.fixture(scope="module")
def batching_parameters_class():
  files = descriptor_pb2.FileDescriptorSet.FromString(DESCRIPTOR.read_bytes())
  pool = descriptor_pool.Default()
  for file in files.file:
    pool.Add(file)
  return message_factory.GetMessageClass(
      pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters"))


def parse(cls, text):
  return text_format.Parse(text, cls())


def test_example_file_parses_with_tf_serving_proto(batching_parameters_class):
  params = parse(batching_parameters_class, PARAMETERS.read_text(encoding="utf-8"))
  for field in ("max_batch_size", "batch_timeout_micros", "max_enqueued_batches",
                "num_batch_threads"):
    assert params.HasField(field), field
  allowed = list(params.allowed_batch_sizes)
  assert allowed == sorted(set(allowed)) and allowed[0] >= 1
  # TF Serving refuses a file whose allowed_batch_sizes do not end at max_batch_size.
  assert allowed[-1] == params.max_batch_size.value
  # The model runs only at the allowed sizes: the warm-up requests cover exactly those.
  assert tuple(allowed) == warmup.WARMUP_BATCH_SIZES
  # Padding would repeat input_mask's first value (1) into token_ids' padding positions.
  assert params.pad_variable_length_inputs is False
  assert params.batch_timeout_micros.value >= 0 and params.num_batch_threads.value >= 1


def test_the_proto_is_strict(batching_parameters_class):
  """The check above means something: a misspelled field or a wrong type does not parse."""
  with pytest.raises(text_format.ParseError, match="max_batch_sise"):
    parse(batching_parameters_class, "max_batch_sise { value: 32 }")
  with pytest.raises(text_format.ParseError):
    parse(batching_parameters_class, "max_batch_size: 32")  # a wrapper message, not an int
  with pytest.raises(text_format.ParseError):
    parse(batching_parameters_class, 'allowed_batch_sizes: "8"')
