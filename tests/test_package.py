"""Package-level behaviour: the public names, and TensorFlow-free tools staying TensorFlow-free."""

import subprocess
import sys

from tests.helpers.paths import REPO_ROOT


def test_public_api_names():
  import albert_tf  # pylint: disable=g-import-not-at-top
  for name in albert_tf.__all__:
    assert getattr(albert_tf, name) is not None


def test_tokenizer_import_does_not_load_tensorflow():
  code = ("import sys, albert_tf, albert_tf.tokenization; "
          "print('tensorflow' in sys.modules)")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=REPO_ROOT, timeout=120)
  assert out.returncode == 0, out.stderr[-1000:]
  assert out.stdout.strip() == "False"


def test_moved_modules_keep_their_public_import_paths():
  """What users and the README import from the older paths is the same object as the new one."""
  from albert_tf import tokenization  # pylint: disable=g-import-not-at-top
  from albert_tf.text import tokenization as text_tokenization  # pylint: disable=g-import-not-at-top
  for name in tokenization.__all__:
    assert getattr(tokenization, name) is getattr(text_tokenization, name), name
  assert tokenization.FullTokenizer is text_tokenization.FullTokenizer
