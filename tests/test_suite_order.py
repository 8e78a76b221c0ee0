"""`make test` hands out files longest first by the committed CPU profile (tests/conftest.py):
the profile names existing files, and the collection order follows it."""

import os

from tests import conftest
from tests.helpers.paths import REPO


def test_the_profile_names_existing_test_files():
  seconds = conftest.profile_cpu_seconds()
  assert len(seconds) >= 50, "tests/suite_cpu_profile.txt lost its rows"
  missing = [path for path in seconds if not os.path.isfile(os.path.join(REPO, path))]
  assert not missing, f"the profile names files that no longer exist (regenerate it): {missing}"


def test_files_are_ordered_longest_first(tmp_path):
  profile = tmp_path / "profile.txt"
  profile.write_text("# made by tests.helpers.cpu_profile\n   cpu s   wall s tests  file\n"
                     "      90      95     2  tests/integration/test_b.py\n"
                     "      30      31     9  tests/test_a.py\n"
                     "    120     126    11  total (2 files)\n")
  seconds = conftest.profile_cpu_seconds(str(profile))
  assert seconds == {"tests/integration/test_b.py": 90.0, "tests/test_a.py": 30.0}

  class Item:
    def __init__(self, nodeid):
      self.nodeid = nodeid

  items = [Item(n) for n in ("tests/test_a.py::t1", "tests/test_new.py::t",
                             "tests/integration/test_new.py::t", "tests/integration/test_b.py::t",
                             "tests/test_a.py::t2")]
  original = conftest.PROFILE
  conftest.PROFILE = str(profile)
  try:
    conftest.pytest_collection_modifyitems(items)
  finally:
    conftest.PROFILE = original
  assert [i.nodeid for i in items] == [
      "tests/integration/test_b.py::t", "tests/test_a.py::t1", "tests/test_a.py::t2",
      "tests/integration/test_new.py::t", "tests/test_new.py::t"]
