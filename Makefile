# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/tensorc demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python tools/check_layers.py
	@# bytecode written once: every Ray worker process imports tensorc, and with
	@# PYTHONDONTWRITEBYTECODE set each would compile it again (0.6 s a process)
	$(BIN)/python -m compileall -q tensorc passes runtime grammar
	$(BIN)/python tools/run_tests.py

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info
