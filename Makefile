# Commands for a fresh machine:
#   make probe      # set up .venv, start the embedded Triton (CPU stand-ins), run the example suite, write a report
#   make serve      # the OpenAI-compatible routing service on the embedded Triton (after make probe)
#   make test       # set up .venv and run the whole test suite (starts its own tritonserver)
#   make test-fast  # the same without the tests marked `slow` (fault injection, whole probes, timing tests)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: probe serve test test-fast setup clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

probe: setup
	$(BIN)/advisor probe

serve: setup
	$(BIN)/advisor serve

test: setup
	$(BIN)/python -m pytest -q

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow"

clean:
	rm -rf $(VENV) advisor.duckdb advisor.duckdb.wal
