# Set-up and test entry points; the README's two commands are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
# Backends the test suite must find; a missing one fails the run instead of skipping.
REQUIRED_BACKENDS ?= cpu

PACKAGES := -e . -e ./plugins/cpu

.PHONY: demo test install install-test typecheck bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml plugins/cpu/pyproject.toml
	$(PIP) install -q $(PACKAGES) rich scikit-learn
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

demo: install
	$(BIN)/python examples/demo.py

test: install-test
	$(BIN)/python -m mypy
	OPKERNEL_STRICT_PLUGINS=1 $(BIN)/python -m pytest -q --opkernel-backends=$(REQUIRED_BACKENDS) $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build dist *.egg-info core/*.egg-info plugins/*/*.egg-info plugins/*/build
