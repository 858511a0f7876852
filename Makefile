PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
RUNTIME_STAMP := $(VENV)/.runtime-installed
STAMP := $(VENV)/.installed
TEST_ORACLES := $(VENV)/test-oracles
REPORT := $(VENV)/report
PEERS := $(VENV)/peers
PEERS_STAMP := $(PEERS)/.installed
# What requirements-peers.txt pins that requirements-dev.txt has put in site-packages already.
PEERS_IN_SITE_PACKAGES := torch transformers
BEAM := $(VENV)/beam
BEAM_STAMP := $(BEAM)/.installed
ONNX := $(VENV)/onnx
ONNX_STAMP := $(ONNX)/.installed

# Test processes run side by side (pytest-xdist): most tests are bound by one thread (tracing, subprocesses), and
# a worker waiting for a test's subprocess or its files leaves a core idle, so three workers on the 2 CI cores
# finish sooner than two; a worker that runs out of tests takes some of another's (worksteal) instead of waiting
# (BUILD_NOTES.md, "The tests"). Each worker imports TensorFlow (about 0.6 GB), and the suite's memory peaked at
# 8.5 GB with three: raise with care.
TEST_WORKERS ?= 3
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist worksteal

.PHONY: demo test test-fast install peers beam onnx

# What `make demo` needs: the runtime requirements alone. The tests, the peers and the paper runs need the rest
# (and the built-in corpus of a paper run is the docstrings of everything `make install` puts in site-packages).
$(RUNTIME_STAMP): requirements.txt constraints.txt
	@echo "Installing the runtime requirements into $(VENV) (TensorFlow and its libraries, about 2 GB; minutes)."
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet pip==26.3
	$(VPY) -m pip install --quiet -r requirements.txt -c constraints.txt
	touch $(RUNTIME_STAMP)

$(STAMP): $(RUNTIME_STAMP) requirements-dev.txt requirements-test-oracles.txt requirements-report.txt constraints.txt
	@echo "Installing the development requirements into $(VENV) (PyTorch, Transformers, the test oracles; minutes)."
	$(VPY) -m pip install --quiet -r requirements-dev.txt -c constraints.txt
	$(VPY) -m pip uninstall --quiet --yes scikit-learn scipy  # site-packages held them before requirements-test-oracles.txt
	$(VPY) -m pip install --quiet --upgrade --no-deps --target $(TEST_ORACLES) -r requirements-test-oracles.txt
	$(VPY) -m pip install --quiet --upgrade --no-deps --target $(REPORT) -r requirements-report.txt
	touch $(STAMP)

install: $(STAMP)

# The benchmark's peers (requirements-peers.txt) beside the environment, not in it: see that file.
$(PEERS_STAMP): $(STAMP) requirements-peers.txt
	grep -v -e '^#' $(foreach name,$(PEERS_IN_SITE_PACKAGES),-e '^$(name)==') requirements-peers.txt \
		> $(VENV)/requirements-peers-target.txt
	$(VPY) -m pip install --quiet --upgrade --no-deps --target $(PEERS) -r $(VENV)/requirements-peers-target.txt
	touch $(PEERS_STAMP)

peers: $(PEERS_STAMP)

# The `beam` extra (requirements-beam.txt) beside the environment, with its dependencies, not in it: apache-beam
# moves protobuf and pyarrow, so only the Beam pipeline's processes and its tests put .venv/beam on their path.
$(BEAM_STAMP): $(STAMP) requirements-beam.txt
	$(VPY) -m pip install --quiet --upgrade --target $(BEAM) -r requirements-beam.txt
	touch $(BEAM_STAMP)

beam: $(BEAM_STAMP)

# The `onnx` extra (requirements-onnx.txt) beside the environment, without dependencies: the environment has them,
# and pip would otherwise put second copies of numpy and protobuf there. PYTHONPATH=.venv/onnx where it is used.
$(ONNX_STAMP): $(STAMP) requirements-onnx.txt
	$(VPY) -m pip install --quiet --upgrade --no-deps --target $(ONNX) -r requirements-onnx.txt
	touch $(ONNX_STAMP)

onnx: $(ONNX_STAMP)

demo: $(RUNTIME_STAMP)
	$(VPY) -m run_scripts.quickstart --output_dir=demo_output

# Progress as [done/total] per line, and the slowest tests at the end.
PYTEST_REPORTING := -o console_output_style=count --durations=15

# The extras install side by side: each goes to a directory of its own.
test: $(STAMP)
	@$(MAKE) --no-print-directory -j3 peers beam onnx
	@echo "Running the whole suite with $(TEST_WORKERS) workers (about 10 minutes on 2 cores)."
	$(VPY) -m pytest -q $(PYTEST_PARALLEL) $(PYTEST_REPORTING) tests

test-fast: $(STAMP)
	@echo "Running the suite without the slow end-to-end tests, $(TEST_WORKERS) workers."
	$(VPY) -m pytest -q $(PYTEST_PARALLEL) $(PYTEST_REPORTING) -m "not slow" tests
