# iclr26 — the commands of the README. `make help` lists them; PAPER=<slug> narrows a target to one package.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

UV ?= $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")
PYTHON ?= python3
PAPER ?=
ARGS ?=
PYTEST_ARGS ?=
export UV_PYTHON ?= 3.11
export HF_HUB_OFFLINE ?= 1

SLUGS := $(sort $(notdir $(wildcard packages/*)))
ifneq ($(PAPER),)
  ifeq ($(wildcard packages/$(PAPER)/pyproject.toml),)
    $(error unknown PAPER=$(PAPER); packages: $(SLUGS))
  endif
  MEMBERS := packages/$(PAPER)
else
  MEMBERS := shared/core $(addprefix packages/,$(SLUGS))
endif
WHEEL_SLUGS := $(if $(PAPER),$(PAPER),$(SLUGS))
dist_of = $(if $(filter shared/core,$(1)),iclr26-core,iclr26-$(subst _,-,$(notdir $(1))))

.PHONY: help uv sync test test-slow lint reproduce build isolation wheels ci clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-11s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "  PAPER=<slug> narrows test/test-slow/reproduce/build/isolation/wheels to one package ($(SLUGS))"

uv: ## install uv with pip if it is missing
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet "uv>=0.9,<0.14"
	@$(UV) --version

sync: uv ## install every member and the dev tools into .venv (uv sync --locked)
	$(UV) sync --locked --all-packages

test: sync ## the tests of every member (or PAPER=<slug>), slow ones excluded
	$(UV) run --no-sync pytest $(addsuffix /tests,$(MEMBERS)) $(PYTEST_ARGS)

test-slow: sync ## only the tests marked slow
	$(UV) run --no-sync pytest $(addsuffix /tests,$(MEMBERS)) -m slow $(PYTEST_ARGS) || [ $$? -eq 5 ]  # 5: none marked slow

lint: sync ## ruff check, ruff format --check, the CI workflow against the GitHub schema
	$(UV) run --no-sync ruff check .
	$(UV) run --no-sync ruff format --check .
	$(UV) run --no-sync check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
	$(PYTHON) scripts/check_readme.py

reproduce: sync ## the paper's claims: make reproduce PAPER=<slug> [ARGS='scale=smoke seed=1']
	@test -n "$(PAPER)" || { echo "usage: make reproduce PAPER=<slug> [ARGS='key=value ...']  (slugs: $(SLUGS))"; exit 2; }
	$(UV) run --no-sync iclr26-$(subst _,-,$(PAPER)) reproduce $(ARGS)

build: uv ## wheels and sdists of every member (or PAPER=<slug>) into dist/
	rm -rf dist
	$(foreach m,$(MEMBERS),$(UV) build --quiet --no-sources --package $(call dist_of,$(m)) --out-dir dist;)

isolation: uv ## each member synced alone (uv sync --locked --package) and its own tests run
	for m in $(MEMBERS); do \
	  if [ "$$m" = shared/core ]; then dist=iclr26-core; else dist=iclr26-$$(basename $$m | tr _ -); fi; \
	  echo "== $$dist alone"; \
	  $(UV) sync --quiet --locked --package $$dist --group dev || exit 1; \
	  $(UV) run --no-sync pytest $$m/tests -q $(PYTEST_ARGS) || exit 1; \
	done
	$(UV) sync --quiet --locked --all-packages

wheels: build ## install the built wheels with pip in a fresh venv; each console script --help and reproduce scale=smoke
	UV=$(UV) bash scripts/check_wheels.sh dist $(WHEEL_SLUGS)

ci: lint test isolation wheels ## everything CI runs: lint, tests, per-member isolation, wheel check
	@echo "make ci: all green"

clean: ## remove build outputs, caches and runs/
	rm -rf dist build .pytest_cache .ruff_cache runs .wheel-venv
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
