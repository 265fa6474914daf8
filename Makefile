# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# The demo needs only the base package; the test suite also needs the dev extras (SDKs,
# Playwright, hypothesis), so each has its own stamp and `make test` after `make demo` still
# installs them.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
BASE_STAMP := $(VENV)/.installed-base
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: demo test lint docs docs-serve bench bench-quick clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(BASE_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --disable-pip-version-check -e .
	touch $@

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --disable-pip-version-check -e '.[dev]'
	touch $@

demo: $(BASE_STAMP)
	$(BIN)/tomc compile examples/project_log.txt \
		--task "What is the current value of deploy_target?" --budget 120 --inspect

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests benchmarks examples

test: $(DEV_STAMP) lint docs
	$(BIN)/python -m pytest -q

# The documentation site (mkdocs.yml, docs/) into site/, which git ignores. --strict turns every
# warning (a broken link or anchor, a page missing from the navigation) into a failure.
# NO_MKDOCS_2_WARNING silences a banner Material for MkDocs prints on every build.
docs: $(DEV_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

docs-serve: $(DEV_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

bench: $(DEV_STAMP)
	$(BIN)/python -m benchmarks.run

bench-quick: $(DEV_STAMP)
	$(BIN)/python -m benchmarks.run --quick

clean:
	rm -rf $(VENV) build site *.egg-info src/*.egg-info .pytest_cache
