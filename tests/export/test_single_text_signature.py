"""A single-text classifier's export (SST-2, CoLA, a custom task without --text_b_column) takes
`text_a` alone, as docs/serving.md and the README's serving job say; a request that also sends
`text_b` is refused with an error that names the signature's inputs, never answered from
`text_a` alone.

One tiny export (H=32, L=2, sequence 16) is shared by the tests of this file.
"""

import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf.errors import AlbertError
from albert_tf.export.exporters import export_classifier
from albert_tf.models import AlbertClassifier
from albert_tf.tools import savedmodel_query
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import tiny_config_dict


@pytest.fixture(scope="module")
def single_text_export(tmp_path_factory):
  root = tmp_path_factory.mktemp("single_text")
  spm = make_tiny_spm_model(str(root))
  model = AlbertClassifier(AlbertConfig.from_dict(tiny_config_dict()), num_classes=2)
  version = export_classifier(model, str(root / "sst"), ["neg", "pos"], 16, spm, True, "sst-2",
                              False)
  return str(root / "sst"), tf.saved_model.load(version).signatures["serving_default"]


def test_the_raw_text_signature_takes_text_a_alone(single_text_export):
  _, serve = single_text_export
  assert set(serve.structured_input_signature[1]) == {"text_a"}
  label = serve(text_a=tf.constant(["a cat sat"]))["label"].numpy()
  assert label.tolist()[0] in (b"neg", b"pos")


def test_text_b_is_refused_naming_the_signature_inputs(single_text_export):
  _, serve = single_text_export
  with pytest.raises(TypeError) as raised:
    serve(text_a=tf.constant(["a cat sat"]), text_b=tf.constant(["it slept"]))
  message = str(raised.value)
  assert "unexpected keyword argument 'text_b'" in message, message
  assert "text_a: TensorSpec" in message, message  # the inputs the signature does take


def test_the_query_command_refuses_text_b_in_one_line(single_text_export):
  base_path, _ = single_text_export
  with pytest.raises(AlbertError, match=r"takes text_a only\); drop --text_b"):
    savedmodel_query.query(base_path, ["a cat sat"], ["it slept"])
  answer = savedmodel_query.query(base_path, ["a cat sat"], None)
  assert answer["probabilities"].shape == (1, 2)
