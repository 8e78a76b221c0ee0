"""run_classifier.py --export_dir, then the SavedModel served in a fresh interpreter that imports
only TensorFlow (+ tensorflow_text): inconsistent requests get a one-line InvalidArgumentError,
consistent ones probabilities."""

import numpy as np
import pytest

from tests.helpers import glue_fixtures, scripts
from tests.helpers.text import make_tiny_spm_model
from tests.helpers.tiny_config import write_tiny_config

SEQ = 24


@pytest.fixture(scope="module")
def export(tmp_path_factory):
  root = tmp_path_factory.mktemp("strict_serving")
  spm = make_tiny_spm_model(str(root))
  glue_fixtures.write_glue(str(root / "glue"))
  config = write_tiny_config(root / "albert_config.json")
  proc = scripts.run_script("run_classifier.py", [
      "--task_name=MRPC", "--data_dir=glue", "--output_dir=out", f"--albert_config_file={config}",
      f"--spm_model_file={spm}", "--do_train=true", "--do_lower_case=true",
      f"--max_seq_length={SEQ}", "--optimizer=adamw", "--warmup_step=0",
      "--learning_rate=1e-4", "--train_step=1", "--save_checkpoints_steps=1",
      "--train_batch_size=4", "--export_dir=serving"], cwd=str(root))
  assert proc.returncode == 0, scripts.describe(proc)
  return root, scripts.versioned_export(str(root / "serving"))


def _ids(batch, seq, value=5):
  return [[value] * seq for _ in range(batch)]


def test_exported_classifier_refuses_inconsistent_requests(export):
  root, version_dir = export
  good = {"input_ids": [[2] + [7] * 10 + [3] + [0] * 20] * 2,
          "input_mask": [[1] * 12 + [0] * 20] * 2, "segment_ids": _ids(2, 32, 0)}
  # (signature, inputs, the expected message line; None: probabilities expected)
  requests = [
      ("token_ids", dict(input_ids=_ids(1, 32), input_mask=_ids(1, 16, 1),
                         segment_ids=_ids(1, 32, 0)),
       "input_mask has shape [1, 16], expected the shape of input_ids [1, 32]"),
      ("token_ids", dict(input_ids=_ids(2, 32), input_mask=_ids(2, 32, 1),
                         segment_ids=_ids(1, 32, 0)),
       "segment_ids has shape [1, 32], expected the shape of input_ids [2, 32]"),
      ("token_ids", dict(good, input_ids=_ids(2, 32, 1000)),
       "input_ids has values from 1000 to 1000, expected token ids in [0, 1000) (vocab_size)"),
      ("tf_example", {"examples": scripts.tf_examples_b64(
          {"input_ids": np.array(_ids(1, 16)), "input_mask": np.ones([1, 16], int),
           "segment_ids": np.zeros([1, 16], int)})},
       "tf_example record 0 has 16 input_ids values, expected 24 (max_seq_length)"),
      ("serving_default", {"text_a": ["The quick brown fox.", "Paris is big."],
                           "text_b": ["The lazy dog."]},
       "text_b has shape [1], expected the shape of text_a [2]"),
      ("token_ids", good, None),
      ("serving_default", {"text_a": ["The quick brown fox.", "Paris is big."],
                           "text_b": ["The lazy dog.", ""]}, None),
  ]
  calls = [dict(export_dir=version_dir, signature=s, inputs=i) for s, i, _ in requests]
  # The core_ops copy (plain TensorFlow, no tensorflow_text) checks the same way.
  calls.append(dict(export_dir=f"{version_dir}/core_ops", signature="token_ids",
                    inputs=requests[0][1]))
  expectations = [e for _, _, e in requests] + [requests[0][2]]
  results = scripts.serve(str(root / "client"), calls)
  for call, expected, result in zip(calls, expectations, results):
    where = f"{call['signature']} {expected}"
    if expected is None:
      assert "__error__" not in result, f"{where}: {result.get('__error__')}"
      probabilities = result["probabilities"]
      assert probabilities.shape == (2, 2), where
      np.testing.assert_allclose(probabilities.sum(-1), 1.0, rtol=1e-5)
    else:
      error = result.get("__error__", "")
      assert error.startswith("InvalidArgumentError:"), f"{where}: {error or 'answered'}"
      assert f"assertion failed: [{expected}]" in error.splitlines(), f"{where}: {error}"
