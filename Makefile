# iclr26 — the commands of the README. `make help` lists them; PAPER=<slug> narrows a target to one package.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# uv from PATH; where there is none, `make uv` installs it with pip into .venv-uv (the system Python untouched)
UV ?= $(shell command -v uv 2>/dev/null || echo "$(CURDIR)/.venv-uv/bin/uv")
PYTHON ?= python3
PAPER ?=
ARGS ?=
PYTEST_ARGS ?=
export UV_PYTHON ?= 3.11
export HF_HUB_OFFLINE ?= 1
# Bytecode is written as Python imports (its default): where PYTHONDONTWRITEBYTECODE=1 is set, every process
# would compile the imports of torch/transformers again (~20 s CPU each). Measured: this writes only what is
# imported, once per environment (~20 s CPU); UV_COMPILE_BYTECODE=1 compiles all of site-packages at install
# (~120 s CPU for the dev environment, ~80 s for the wheel venv) and re-checks 28k files at every `uv sync`.
unexport PYTHONDONTWRITEBYTECODE

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
export UV

.PHONY: help uv sync test test-slow lint reproduce build requirements isolation wheels release ci clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-11s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "  PAPER=<slug> narrows test/test-slow/reproduce/build/isolation/wheels to one package ($(SLUGS))"

uv: ## install uv (pip, into .venv-uv) if it is not on PATH
	@$(UV) --version >/dev/null 2>&1 || { $(PYTHON) -m venv .venv-uv && .venv-uv/bin/python -m pip install --quiet "uv>=0.9,<0.14"; }
	@$(UV) --version

sync: uv ## install every member and the dev tools into .venv (uv sync --locked)
	$(UV) sync --locked --all-packages

# both cores (pytest-xdist): each test module stays on one worker (--dist loadscope), so a module's shared
# fixtures (one smoke run per test_cli.py) are built once; TEST_JOBS=1 runs in one process
TEST_JOBS ?= 2
test: sync ## the tests of every member (or PAPER=<slug>), slow ones excluded, on TEST_JOBS (2) processes
	$(UV) run --no-sync pytest $(addsuffix /tests,$(MEMBERS)) $(if $(filter-out 1,$(TEST_JOBS)),-n $(TEST_JOBS) --dist loadscope) $(PYTEST_ARGS)

# collects every member's tests in one session in the full environment (as `make test` does: no two test
# modules or conftests clash; ~20 s CPU for 819 tests) and runs only the slow ones
test-slow: sync ## only the tests marked slow (every member's tests collected together, in .venv)
	$(UV) run --no-sync pytest $(addsuffix /tests,$(MEMBERS)) -m slow $(PYTEST_ARGS) || [ $$? -eq 5 ]  # 5: none selected

lint: sync ## ruff check, ruff format --check, the CI workflow schema, the README table, no import cycles, the layout contract
	$(UV) run --no-sync ruff check .
	$(UV) run --no-sync ruff format --check .
	$(UV) run --no-sync check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml
	$(PYTHON) scripts/check_readme.py
	$(PYTHON) scripts/check_imports.py
	$(PYTHON) scripts/conformance.py

reproduce: sync ## the paper's claims: make reproduce PAPER=<slug> [ARGS='scale=smoke seed=1']
	@test -n "$(PAPER)" || { echo "usage: make reproduce PAPER=<slug> [ARGS='key=value ...']  (slugs: $(SLUGS))"; exit 2; }
	$(UV) run --no-sync iclr26-$(subst _,-,$(PAPER)) reproduce $(ARGS)

build: uv ## wheels and sdists of every member (or the core and PAPER=<slug>) into dist/
	rm -rf dist
ifeq ($(PAPER),)
	$(UV) build --quiet --no-sources --all-packages --out-dir dist
else
	$(UV) build --quiet --no-sources --package iclr26-core --out-dir dist
	$(UV) build --quiet --no-sources --package iclr26-$(subst _,-,$(PAPER)) --out-dir dist
endif

requirements: uv ## the locked versions for pip users: dist/requirements-<slug>.txt (every member, or PAPER=<slug>)
	@mkdir -p dist
	@for slug in $(WHEEL_SLUGS); do \
	  $(UV) export --frozen --quiet --package iclr26-$${slug//_/-} --all-extras --no-default-groups \
	    --no-emit-workspace --no-hashes -o dist/requirements-$$slug.txt && echo "dist/requirements-$$slug.txt"; \
	done

isolation: uv ## each member synced alone (uv sync --locked --package, its own venv) and its own tests run; 2 lanes
	$(UV) run --quiet --no-project python scripts/isolation.py $(if $(PAPER),packages/$(PAPER))

wheels: build ## the built wheels in one fresh venv with pip; each console script --help and reproduce scale=smoke
	bash scripts/check_wheels.sh dist $(WHEEL_SLUGS)

release: build sync ## dry run of a release: build every wheel and sdist, twine check, versions and changelogs
	$(UV) run --no-sync python scripts/release_check.py dist

# every member's tests run once, in `isolation` (each member synced alone): no separate `make test` in CI
CI_STAGES := lint isolation test-slow wheels
ci: uv ## everything CI runs: lint, every member's tests synced alone (2 lanes), slow tests, wheels; timed
	@t0=$$SECONDS; for stage in $(CI_STAGES); do \
	  TIMEFORMAT="== make $$stage: %0R s wall, CPU %0U s user + %0S s sys"; \
	  time $(MAKE) --no-print-directory $$stage || { echo "make ci: $$stage FAILED"; exit 1; }; \
	done; \
	times >.ci-times; echo "make ci: all green in $$((SECONDS - t0)) s wall; CPU user sys: $$(tail -1 .ci-times); loadavg $$(cut -d' ' -f1-3 /proc/loadavg)"; rm -f .ci-times

clean: ## remove build outputs, caches, runs/ and the isolation venvs
	rm -rf dist build .pytest_cache .ruff_cache runs .wheel-venv .venv-iso-* .venv-uv
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
