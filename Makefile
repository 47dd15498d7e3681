# loopwatch — every target bootstraps what it needs (virtualenv, packages) on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUNTIME_STAMP := $(VENV)/.installed-runtime
PYTEST_ARGS ?=

.PHONY: install install-runtime test test-unit test-integration test-openclaw lint fmt schemas schemas-check run bench bench-plugin soak clean

# `make run` needs only the runtime dependencies; tests and lint add the dev extra (pytest, mypy, ruff, …).
install: $(STAMP)

install-runtime: $(RUNTIME_STAMP)

$(RUNTIME_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing loopwatch and its runtime dependencies into $(VENV) (once)"
	$(BIN)/python -m pip install --disable-pip-version-check -e .
	@touch $(RUNTIME_STAMP)

$(STAMP): $(RUNTIME_STAMP)
	@echo "installing the test and lint tools (the dev extra) into $(VENV) (once)"
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar off -e '.[dev]'
	@touch $(STAMP)

# Two processes: the integration tests one after another in one, the quick tests beside them (tests/conftest.py).
test: install
	$(BIN)/python -m pytest -q -rs -n 2 --dist loadgroup $(PYTEST_ARGS)

test-unit: install
	$(BIN)/python -m pytest -q -m "not integration" $(PYTEST_ARGS)

test-integration: install
	$(BIN)/python -m pytest -q -m integration $(PYTEST_ARGS)

# Real OpenClaw gateways (Node 24 + openclaw@2026.7.35 and @2026.9.6 from npm, under .tools/) against loopwatch,
# call by call; the worker judges each by the semantics profile its stamped version selects.
OPENCLAW_VERSIONS ?= 2026.7.35 2026.9.6
test-openclaw: install
	@set -e; for v in $(OPENCLAW_VERSIONS); do \
	  echo "== openclaw@$$v"; \
	  LOOPWATCH_OPENCLAW_E2E=1 LOOPWATCH_OPENCLAW_VERSION=$$v $(BIN)/python -m pytest -q -s tests/openclaw_e2e \
	    --timeout 1200 $(PYTEST_ARGS); \
	done

lint: install
	$(BIN)/ruff check streams schemas tests bench
	$(BIN)/ruff format --check streams schemas tests bench
	$(BIN)/mypy

fmt: install
	$(BIN)/ruff format streams schemas tests bench
	$(BIN)/ruff check --fix streams schemas tests bench

schemas: install
	$(BIN)/python -m schemas.generate

schemas-check: install
	$(BIN)/python -m schemas.generate --check

# `make run RUN_ARGS="--duration 1800 --rate 120"`: the demo's own flags (python -m streams.demo --help).
RUN_ARGS ?=
run: install-runtime
	$(BIN)/python -m streams.demo $(RUN_ARGS)

bench: install
	$(BIN)/python -m bench.core_bench

# Soak (not part of `make test`): >= 10 min at half the measured max rate, >= 100,000 runs, short state TTL.
soak: install
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[soak]'
	$(BIN)/python -m bench.soak $(SOAK_ARGS)

bench-plugin:
	deploy/openclaw-plugin/scripts/ensure-deps.sh && node bench/plugin_bench.mjs

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .artifacts
