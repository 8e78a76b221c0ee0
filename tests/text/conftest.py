"""SentencePiece models shared by the text tests (trained once per module that asks for them)."""

import pytest

from tests.helpers import text as text_helpers


@pytest.fixture(scope="module")
def spm_dir(tmp_path_factory):
  return tmp_path_factory.mktemp("spm")


@pytest.fixture(scope="module")
def spm_model(spm_dir):
  return text_helpers.make_tiny_spm_model(spm_dir)


@pytest.fixture(scope="module")
def digit_comma_model(spm_dir):
  return text_helpers.make_digit_comma_spm_model(spm_dir)
