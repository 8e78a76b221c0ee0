# The two commands a newcomer types (see README.md):
#   make quickstart   the main job end to end on a built-in corpus
#   make test         the test suite
# Both create .venv and install requirements.txt into it first (only once).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup test quickstart bench

setup: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

test: setup
	$(PY) -m pytest -q --durations=15 tests

quickstart: setup
	PYTHON=$(PY) bash scripts/quickstart.sh
