"""Where the repository, its configs and the committed test fixtures are, for tests in any folder."""

import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
REPO = str(REPO_ROOT)  # for os.path / subprocess arguments
CONFIG_DIR = REPO_ROOT / "configs"
FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures"  # committed files: hf/, squad/
