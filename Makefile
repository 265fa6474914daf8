# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# The demo needs only the base package; the test suite also needs the dev extras (SDKs,
# Playwright, hypothesis), so each has its own stamp and `make test` after `make demo` still
# installs them. `make install` puts the `tomc` command on your PATH.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
BASE_STAMP := $(VENV)/.installed-base
DEV_STAMP := $(VENV)/.installed-dev
CLI_STAMP := $(VENV)/.installed-cli
# LiteLLM's proxy with TOMC as its hook, in an environment of its own (LiteLLM pins SDK versions
# the test suite does not use): what tests/litellm_hook/ start as a process.
LITELLM_VENV := .venv-litellm
LITELLM_STAMP := $(LITELLM_VENV)/.installed
# The extras the command line can use: exact BPE counters and `tomc mcp`.
CLI_EXTRAS := bpe,mcp
# Where the fallback of `make install` links `tomc` when neither pipx nor uv is installed.
PREFIX ?= $(HOME)/.local
# pip prints what it collects and installs as it goes (with a progress bar on a terminal),
# so a first install is never silent for a minute.
PIP_INSTALL := $(BIN)/pip install --disable-pip-version-check

.PHONY: demo test lint docs docs-serve bench bench-quick install uninstall screenshot clean \
	test-previous-agents test-latest-agents test-windows

$(BIN)/python:
	@echo "make: creating $(VENV) with $(PY)"
	$(PY) -m venv $(VENV)

$(BASE_STAMP): pyproject.toml | $(BIN)/python
	@echo "make: installing tomc into $(VENV) (base package; pip's progress follows)"
	$(PIP_INSTALL) -e .
	touch $@

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	@echo "make: installing tomc with the dev extras into $(VENV) (SDKs, Playwright, hypothesis," \
		"ruff; about a minute on a fresh clone; pip's progress follows)"
	$(PIP_INSTALL) -e '.[dev]'
	touch $@

$(LITELLM_STAMP): pyproject.toml
	@echo "make: installing LiteLLM's proxy with tomc[litellm] into $(LITELLM_VENV) (about a" \
		"minute on a fresh clone; pip's progress follows)"
	$(PY) -m venv $(LITELLM_VENV)
	$(LITELLM_VENV)/bin/pip install --disable-pip-version-check -e '.[litellm]'
	touch $@

$(CLI_STAMP): pyproject.toml | $(BIN)/python
	@echo "make: installing tomc with the $(CLI_EXTRAS) extras into $(VENV) (pip's progress follows)"
	$(PIP_INSTALL) -e '.[$(CLI_EXTRAS)]'
	touch $@

demo: $(BASE_STAMP)
	$(BIN)/tomc compile examples/project_log.txt \
		--task "What is the current value of deploy_target?" --budget 120 --inspect

# `tomc` on your PATH, editable (it runs this clone's code), with the bpe and mcp extras:
# pipx if it is installed, else uv, else a link in $(PREFIX)/bin to $(VENV)/bin/tomc.
install:
	@if command -v pipx >/dev/null 2>&1; then \
		echo "make install: pipx install --force --editable '.[$(CLI_EXTRAS)]'"; \
		pipx install --force --editable '.[$(CLI_EXTRAS)]' || exit 1; \
		bindir=$$(pipx environment --value PIPX_BIN_DIR); fix="pipx ensurepath"; \
	elif command -v uv >/dev/null 2>&1; then \
		echo "make install: uv tool install --force --editable '.[$(CLI_EXTRAS)]'"; \
		uv tool install --force --editable '.[$(CLI_EXTRAS)]' || exit 1; \
		bindir=$$(uv tool dir --bin); fix="uv tool update-shell"; \
	else \
		echo "make install: neither pipx nor uv is installed, so $(PREFIX)/bin/tomc will link to" \
			"$(CURDIR)/$(BIN)/tomc (for an isolated install: python3 -m pip install --user pipx," \
			"then make install again)"; \
		$(MAKE) --no-print-directory $(CLI_STAMP) || exit 1; \
		mkdir -p "$(PREFIX)/bin" && ln -sfn "$(CURDIR)/$(BIN)/tomc" "$(PREFIX)/bin/tomc" || exit 1; \
		bindir="$(PREFIX)/bin"; fix="export PATH=\"$(PREFIX)/bin:\$$PATH\" in your shell profile"; \
	fi; \
	found=$$(command -v tomc || true); \
	if [ "$$found" = "$$bindir/tomc" ]; then \
		echo "make install: done: $$found ($$(tomc --version))"; \
	elif [ -n "$$found" ]; then \
		echo "make install: installed $$bindir/tomc, but $$found comes first on your PATH"; \
	else \
		echo "make install: installed $$bindir/tomc, but $$bindir is not on your PATH: $$fix"; \
	fi

uninstall:
	@if command -v pipx >/dev/null 2>&1 && pipx list --short 2>/dev/null | grep -q '^tomc '; then \
		pipx uninstall tomc; \
	elif command -v uv >/dev/null 2>&1 && uv tool list 2>/dev/null | grep -q '^tomc '; then \
		uv tool uninstall tomc; \
	elif [ -L "$(PREFIX)/bin/tomc" ]; then \
		rm "$(PREFIX)/bin/tomc" && echo "make uninstall: removed the link $(PREFIX)/bin/tomc"; \
	else \
		echo "make uninstall: no tomc installed by make install was found"; \
	fi

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests benchmarks examples

test: $(DEV_STAMP) $(LITELLM_STAMP) lint docs
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

# The tests that drive the real agent CLIs (tool calls through the gateway, its defaults, the MCP
# server inside each host), against another install of the CLIs than package.json's.
AGENT_TESTS := tests/gateway/test_real_agents.py tests/gateway/test_real_agents_defaults.py \
	tests/mcp_server/test_hosts.py

# The previous pins (agents-previous/package.json), still tested while users run them.
test-previous-agents: $(DEV_STAMP)
	npm ci --prefix agents-previous --no-audit --no-fund
	TOMC_AGENTS_BIN=$(CURDIR)/agents-previous/node_modules/.bin $(BIN)/python -m pytest -q $(AGENT_TESTS)

# Whatever the registry serves today (@latest), so that a new CLI release is checked in minutes.
test-latest-agents: $(DEV_STAMP)
	rm -rf .agents-latest
	npm install --prefix .agents-latest --no-audit --no-fund --no-save \
		@anthropic-ai/claude-code@latest @openai/codex@latest
	.agents-latest/node_modules/.bin/claude --version
	.agents-latest/node_modules/.bin/codex --version
	TOMC_AGENTS_BIN=$(CURDIR)/.agents-latest/node_modules/.bin $(BIN)/python -m pytest -q $(AGENT_TESTS)

# The Windows suite: the tests below run by python.org's Windows CPython 3.12 (embeddable) under
# Wine, with Windows wheels; scripts/windows/setup.sh builds that once into ~/.cache/tomc-windows
# (apt-installs Wine if missing) and checks it in seconds after. Not Windows: see
# docs/development.md, "Windows". The wineserver of that prefix is stopped at the end.
WINDOWS_TESTS := tests/core tests/chat tests/surfaces tests/test_api.py tests/test_examples.py \
	tests/web/test_app.py tests/web/test_deadlines.py tests/mcp_server/test_server.py \
	tests/gateway/agents tests/gateway/local tests/gateway/proxy tests/gateway/test_serve_port.py \
	tests/gateway/test_serve_upstream.py tests/litellm_hook/test_requests.py \
	tests/litellm_hook/test_compaction.py --ignore=tests/gateway/proxy/test_status_page_browser.py \
	--ignore=tests/gateway/proxy/test_store_redis.py --ignore=tests/gateway/proxy/test_ledger_redis.py

test-windows: | $(BIN)/python
	PYTHON=$(BIN)/python scripts/windows/setup.sh
	@echo "make: the Windows suite under Wine (Windows CPython, not Windows; 3 s per process start)"
	scripts/windows/wpy -m pytest -q -p no:cacheprovider $(WINDOWS_TESTS); \
		status=$$?; scripts/windows/stop.sh; exit $$status

# Regenerates docs/web-inspector.png from the live page (a local server and Debian's Chromium).
screenshot: $(DEV_STAMP)
	$(BIN)/python tests/web_screenshot.py docs/web-inspector.png

clean:
	rm -rf $(VENV) build site *.egg-info src/*.egg-info .pytest_cache
