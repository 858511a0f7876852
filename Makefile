PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_ORACLES := $(VENV)/test-oracles

.PHONY: demo test test-fast install

$(STAMP): requirements.txt requirements-dev.txt requirements-test-oracles.txt
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -r requirements.txt
	$(VPY) -m pip install --quiet -r requirements-dev.txt
	$(VPY) -m pip uninstall --quiet --yes scikit-learn scipy  # site-packages held them before requirements-test-oracles.txt
	$(VPY) -m pip install --quiet --upgrade --no-deps --target $(TEST_ORACLES) -r requirements-test-oracles.txt
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VPY) -m run_scripts.quickstart --output_dir=demo_output

test: $(STAMP)
	$(VPY) -m pytest -q tests

test-fast: $(STAMP)
	$(VPY) -m pytest -q -m "not slow" tests
