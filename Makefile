# `make demo` and `make test` do all the set-up on a fresh machine (see README.md).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT    := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get

.PHONY: install system-deps test demo lint bench clean

# journal and what its tests need, at the versions in constraints.txt.
$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[test]'
	touch $@

install: $(VENV)/.installed

# A real sshd for the SSH tests (the tests start their own, on loopback).
system-deps:
	@if [ ! -x /usr/sbin/sshd ]; then \
		$(APT) update -qq && $(APT) install -y -qq openssh-server openssh-client >/dev/null; \
	fi

test: install system-deps
	$(BIN)/ruff check journal tests bench migrations
	$(BIN)/python -m pytest

demo: install
	$(BIN)/journal demo

lint: install
	$(BIN)/ruff check journal tests bench migrations

bench: install system-deps
	$(BIN)/python bench/append.py
	$(BIN)/python bench/overhead.py

clean:
	rm -rf $(VENV) demo test-artifacts
