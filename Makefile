# `make demo` and `make test` do all the set-up on a fresh machine (see README.md).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT    := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get

.PHONY: install system-deps test demo requirements lint bench clean

# journal and what its tests need, at the versions in constraints.txt.
$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[test]'
	touch $@ $(VENV)/.demo-installed

# htmx and its SSE extension for the web UI, at the versions in package-lock.json (served by
# Flask from node_modules/, never copied into the repository).
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

install: $(VENV)/.installed node_modules/.installed

# What the demo needs and no more: journal and uv (the test extras, playwright among them, are
# the tests' own).
$(VENV)/.demo-installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[demo]'
	touch $@

# Checked before anything slow, a line each: the Python journal runs on, its venv module, npm.
requirements:
	@$(PYTHON) -c 'import sys; v = sys.version_info; ok = v >= (3, 11); print(f"python {v.major}.{v.minor}.{v.micro} ({sys.executable}): " + ("ok" if ok else "journal needs 3.11 or newer: make demo PYTHON=python3.11 (or python3.12, ...)")); sys.exit(not ok)'
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null && echo "python venv: ok" || { echo "python venv: missing (Debian and Ubuntu: apt install python3-venv)"; exit 1; }
	@command -v npm >/dev/null 2>&1 && echo "npm $$(npm --version): ok" || { echo "npm: not found (the web UI installs htmx with it: apt install npm)"; exit 1; }
	@echo "uv: installed into $(VENV) from PyPI (the demo's installs run it)"

# A real sshd for the SSH tests (the tests start their own, on loopback), Debian's
# chromium for the browser tests (driven by playwright; its own browser download is never used),
# and Debian's PostgreSQL for the store's tests (they initdb and start their own on loopback, as
# the `postgres` user under root, and stop it after), zsh for `journal shell`'s zsh hooks, and jq
# (the secrets tests redact its real colour output).
system-deps:
	@missing=""; \
	[ -x /usr/sbin/sshd ] || missing="$$missing openssh-server openssh-client"; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	[ -x /usr/bin/zsh ] || missing="$$missing zsh"; \
	[ -x /usr/bin/jq ] || missing="$$missing jq"; \
	if [ -n "$$missing" ]; then \
		$(APT) update -qq && $(APT) install -y -qq $$missing >/dev/null; \
	fi

# Three workers (pytest-xdist) on the two cores of the machines this runs on (much of a test is
# waiting on a subprocess, sshd or chromium); tests are spread one by one, except that the tests
# sharing a module-scoped fixture run on one worker, which makes it once (tests/grouping.py).
# Each worker starts its own sshd, PostgreSQL and chromium on free loopback ports. Most tests run
# journal's main in their own process (tests/helpers.py); the rest start it as a process: with
# PYTHONDONTWRITEBYTECODE set (as some machines have it) each start compiles every module
# again, so it is unset.
test: install system-deps
	$(BIN)/ruff check journal tests bench migrations
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -n 3 --dist loadgroup

# The demo journal, then the web UI on it: its URL is printed; Ctrl-C stops it.
# The demo's own output goes to demo.log (shown if it fails); the URL is the last thing said.
PORT ?= 5000
demo: requirements
	@$(PYTHON) -c 'import socket, sys; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); sys.exit(s.connect_ex(("127.0.0.1", $(PORT))) == 0)' || { echo "port $(PORT) is taken (a demo served before? stop it with Ctrl-C, or make demo PORT=5050): nothing recorded"; exit 1; }
	@$(MAKE) --no-print-directory $(VENV)/.demo-installed node_modules/.installed
	@echo "recording the demo upgrade (its output: demo.log) ..."
	@$(BIN)/journal demo > demo.log 2>&1 || { cat demo.log; exit 1; }
	@$(BIN)/journal --db demo/journal.db --runbook demo/runbook.toml status || true
	$(BIN)/journal --db demo/journal.db --runbook demo/runbook.toml serve --port $(PORT)

lint: install
	$(BIN)/ruff check journal tests bench migrations

bench: install system-deps
	$(BIN)/python bench/append.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/overhead.py
	$(BIN)/python bench/pitfalls.py
	$(BIN)/python bench/web.py
	$(BIN)/python bench/fleet.py
	$(BIN)/python bench/history.py
	$(BIN)/python bench/output_size.py
	$(BIN)/python bench/web_clients.py
	$(BIN)/python bench/readers.py

clean:
	rm -rf $(VENV) node_modules demo test-artifacts
