# Quick start: `make demo` (the offline demo) and `make test` (the whole suite).
# Each target sets up .venv on first use, so a fresh machine needs only Python 3.11, pip and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_WORKERS ?= 2

.PHONY: demo test test-newest-sdk lint format schemas bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/sf-provider demo

# pytest exits 5 when it collects no test: reported, not hidden, but not a failure of the suite.
test: $(STAMP)
	@$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --cov=sf_provider --cov-report=term \
		--cov-fail-under=85 $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; rc=0; fi; exit $$rc

# A second lane: the newest releases pyproject.toml allows (claude-agent-sdk, pydantic-ai, mcp, ...),
# upgraded on every run in a venv of its own, against the contract tests and the drift checks
# (private names, SDK options). A release inside the pins that breaks something fails here first.
# The venv lives under build/, which git and ruff already ignore.
NEWEST := build/venv-newest
test-newest-sdk:
	test -x $(NEWEST)/bin/python || $(PYTHON) -m venv $(NEWEST)
	$(NEWEST)/bin/python -m pip install -q --upgrade pip
	$(NEWEST)/bin/python -m pip install -q -e '.[dev]' --upgrade --upgrade-strategy eager
	@$(NEWEST)/bin/python -m pip list --format=freeze \
		| grep -iE '^(claude-agent-sdk|mcp|anyio|pydantic|pydantic-ai-slim|langchain-core)=='
	$(NEWEST)/bin/python -m pytest -n $(PYTEST_WORKERS) tests/contract \
		tests/unit/test_private_apis.py tests/unit/test_options_coverage.py $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict sf_provider

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

schemas: $(STAMP)
	$(BIN)/sf-provider schemas --write contracts/schemas

bench: $(STAMP)
	$(BIN)/python bench/suite.py

clean:
	rm -rf $(VENV) $(NEWEST) .pytest_cache .mypy_cache .ruff_cache .coverage
