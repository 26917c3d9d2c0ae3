# memcert developer and CI entry points.
#   make test      lint, then the whole suite under xdist against a throwaway PostgreSQL,
#                  Prometheus and Pushgateway
#   make lint      ruff on everything, mypy --strict on the packages (memcert, invariants,
#                  reference_store, scenarios, chaos)
#   make certify   memcert certify (CERTIFY_ARGS=... passes options)
#   make bench     the benchmark (BENCH_ARGS=... passes options)
#   make clean     remove the virtualenv, caches (axe-core from npm in .cache) and build output
# PYTEST_ARGS=... is passed to pytest, e.g. PYTEST_ARGS='-k normalize -x'.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := test

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Reinstalled only when pyproject.toml is newer, so repeated runs stay quick. certify
# needs the base install only; the tests need every extra (adapters, the model).
BASE_STAMP := $(VENV)/.memcert-base-installed
STAMP := $(VENV)/.memcert-installed

PYTEST_ARGS ?=
CERTIFY_ARGS ?=
BENCH_ARGS ?=

.PHONY: venv lint test certify bench clean

venv: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(BASE_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

# torch first, pinned: the CPU build on this machine's disk. Left to the resolver, the
# semantic extra's torch would be a CUDA build of several GB.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

lint: $(STAMP)
	$(BIN)/ruff check . scripts/throwaway-pg scripts/throwaway-prometheus
	$(BIN)/mypy

# MEMCERT_REQUIRE_PG=1 turns a missing server or tool into a failure instead of a
# skip. Each throwaway script stops its servers whatever pytest does, and exits with
# pytest's status, so "no tests collected" (5) fails the target like any other failure.
# --dist worksteal: a worker that runs dry takes tests queued for the other, so the
# long certifications do not leave one core idle at the end.
test: lint
	MEMCERT_REQUIRE_PG=1 $(BIN)/python scripts/throwaway-prometheus run -- \
		$(BIN)/python scripts/throwaway-pg run -- \
		$(BIN)/python -m pytest -n auto --dist worksteal $(PYTEST_ARGS)

certify: $(BASE_STAMP)
	$(BIN)/memcert certify $(CERTIFY_ARGS)

bench: $(STAMP)
	$(BIN)/python -m benchmarks $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis .cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
