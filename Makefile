# Quick start: `make demo` (the offline demo) and `make test` (the whole suite).
# Each target sets up .venv on first use, so a fresh machine needs only Python 3.11, pip and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUNTIME := $(VENV)/.runtime
PYTEST_WORKERS ?= 2
# pip's output goes to a log, shown only when an install fails.
QUIET = > $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }

.PHONY: demo test test-fast test-newest-sdk test-lowest lint format schemas bench docs clean

# The demo needs the package alone (with the SDK and its bundled CLI); tests and lint the extras.
$(RUNTIME): pyproject.toml
	@echo "setting up $(VENV) (the package and the Claude Agent SDK, first run only)"
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --upgrade pip $(QUIET)
	@$(BIN)/python -m pip install -q -e . $(QUIET)
	@touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	@echo "installing the test and development extras (first run only)"
	@$(BIN)/python -m pip install -q -e '.[dev]' $(QUIET)
	@touch $(STAMP)

# The Node clients the suite runs (tests/contract/test_gateway_node.py), as package-lock.json pins
# them; where npm is missing the tests say so (skipped without node).
NODE_CLIENTS := tests/fixtures/node
NODE_STAMP := $(NODE_CLIENTS)/node_modules/.installed
$(NODE_STAMP): $(NODE_CLIENTS)/package-lock.json $(STAMP)
	@if command -v npm > /dev/null; then \
		echo "installing the Node test clients (npm ci, first run only)"; \
		npm ci --prefix $(NODE_CLIENTS) --no-audit --no-fund $(QUIET) && touch $@; \
	else echo "npm not found: the Node client tests cannot run"; fi

demo: $(RUNTIME)
	@$(BIN)/sf-provider demo

# pytest exits 5 when it collects no test: reported, not hidden, but not a failure of the suite.
test: $(STAMP) $(NODE_STAMP)
	@$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --cov=sf_provider --cov-report=term \
		--cov-fail-under=85 $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; rc=0; fi; exit $$rc

# The fast lane for the inner loop: the unit tests only (no CLI runs), in about a minute.
test-fast: $(STAMP)
	@$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -q tests/unit $(PYTEST_ARGS)

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

# A third lane: the lowest releases pyproject.toml allows, each runtime dependency and each of the
# extras' exactly at its `>=` floor (tests/lowest_versions.py), in a venv built afresh under build/:
# the imports, then the unit tests and the contract tests (the real CLI) of what a floor decides:
# LiteLLM's, and the LangChain and pydantic-ai adapters' fidelity to their framework (about five
# minutes in all), which see what the unit tests cannot: LiteLLM 1.106 passed every unit test but
# billed each call 0; langchain-core 1.2 has no `ContextOverflowError` to raise, pydantic-ai 2.66
# frames a summary otherwise. A floor that another dependency rules out fails the install, naming
# it; a floor without a name the code imports fails the import check.
LOWEST := build/venv-lowest
LOWEST_EXTRAS := pydantic-ai langchain gateway litellm redis otel
LOWEST_CONTRACT := tests/contract/test_litellm.py tests/contract/test_langchain_fidelity.py \
	tests/contract/test_pydantic_ai_fidelity.py tests/contract/test_pydantic_ai_features.py
test-lowest:
	rm -rf $(LOWEST) && $(PYTHON) -m venv $(LOWEST)
	$(LOWEST)/bin/python tests/lowest_versions.py $(LOWEST_EXTRAS) > $(LOWEST)/floors.txt
	$(LOWEST)/bin/python -m pip install -q uv  # uv: 1 minute where pip takes 5
	$(LOWEST)/bin/uv pip install -q --python $(LOWEST)/bin/python -c $(LOWEST)/floors.txt \
		-e ".[$$(echo $(LOWEST_EXTRAS) | tr ' ' ,)]" \
		pytest pytest-xdist pytest-timeout hypothesis httpx opentelemetry-sdk
	LITELLM_LOCAL_MODEL_COST_MAP=True $(LOWEST)/bin/python -c 'import sf_provider, \
		sf_provider.adapters.pydantic_ai, sf_provider.adapters.langchain, \
		sf_provider.adapters.litellm, sf_provider.gateway'
	$(LOWEST)/bin/python -m pytest -n $(PYTEST_WORKERS) -q tests/unit $(LOWEST_CONTRACT) $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict sf_provider _sf_provider_pytest.py

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

schemas: $(STAMP)
	$(BIN)/sf-provider schemas --write contracts/schemas

bench: $(STAMP)
	$(BIN)/python bench/suite.py

# The docs site into site/, from docs/ and the public docstrings: a broken link, anchor or
# reference fails the build.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) $(NEWEST) $(LOWEST) site .pytest_cache .mypy_cache .ruff_cache .coverage .benchmarks
