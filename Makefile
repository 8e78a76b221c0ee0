# The two commands a newcomer types (see README.md):
#   make quickstart   the main job end to end on a built-in corpus
#   make test         the test suite
# Both create .venv and install requirements.txt into it first (only once), with the optional
# Apache Beam runner's requirements-beam.txt (the ".[beam]" extra) so its tests run.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# make test: pytest-xdist processes (2 = the cores of the CI machine; TEST_WORKERS=0 runs in one process);
# files are handed out slowest first (tests/conftest.py), not xdist's most-tests-first
TEST_WORKERS ?= 2

.PHONY: setup test quickstart bench bench-peers

setup: $(VENV)/.installed

# Beam (requirements-beam.txt) declares protobuf < 7 and so pulls protobuf and sentencepiece back;
# the last step puts the core install's versions back, so the suite tests the core as a core install
# has it (Beam's DirectRunner runs on them too, as its tests show).
$(VENV)/.installed: requirements.txt requirements-beam.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip freeze | grep -iE '^(protobuf|sentencepiece)==' > $(VENV)/core-pins.txt
	$(PY) -m pip install --quiet -r requirements-beam.txt
	$(PY) -m pip install --quiet --no-deps -r $(VENV)/core-pins.txt
	touch $@

test: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 tests

quickstart: setup
	PYTHON=$(PY) bash scripts/quickstart.sh

# One speed or memory benchmark of bench/speed/ in the main venv, as a module:
#   make bench BENCH=speed.pretrain_step ARGS="--rounds 4"   (python -m bench.speed.pretrain_step)
bench: setup
	@test -n "$(BENCH)" || { echo "error: BENCH is not set: make bench BENCH=speed.<name> (a module of bench/speed/)" >&2; exit 2; }
	$(PY) -m bench.$(BENCH) $(ARGS)

# Ours vs ONNX Runtime, HF transformers (PyTorch) and the model garden, one run (bench/peers/run.py).
# Its own venv: torch, transformers and onnxruntime are bench-only (bench/peers/requirements.txt).
BENCH_VENV ?= .venv-bench

$(BENCH_VENV)/.installed: requirements.txt bench/peers/requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -r requirements.txt -r bench/peers/requirements.txt
	touch $@

# The size axis of issue 41 (bench/peers/sizes.py: base/large/xxlarge x seq 128/512 x batch 1/32,
# each variant in its own subprocess, peak memory, ISA class); PEERS_ARGS= runs the one-process
# ALBERT-base seq-128 table instead, PEERS_ARGS=--early_exit early exit beside ORT fp32 and the model
# garden (issue 50). ARGS adds flags, e.g. ARGS=--isa=AVX2 (see run.py --help).
PEERS_ARGS ?= --sizes=base,large,xxlarge --seq_lens=128,512 --batches=1,32

bench-peers: $(BENCH_VENV)/.installed
	$(BENCH_VENV)/bin/python -m bench.peers.run $(PEERS_ARGS) $(ARGS)
