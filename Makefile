PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test install

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -r requirements.txt
	$(VPY) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VPY) -m run_scripts.quickstart --output_dir=demo_output

test: $(STAMP)
	$(VPY) -m pytest -q tests
