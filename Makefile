# kpca-stream: two commands a new user needs.
#   make run   - create the virtual environment if missing, install, serve on 127.0.0.1:$(KPCA_PORT)
#   make test  - create the virtual environment if missing, install, run the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export KPCA_PORT ?= 8000
export KPCA_DATA_DIR ?= ./data

.PHONY: run test bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,bench]"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/python -m service --host 127.0.0.1 --port $(KPCA_PORT) --data-dir $(KPCA_DATA_DIR)

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/kernel_rows.py
	$(BIN)/python bench/convergence.py

clean:
	rm -rf $(VENV) .pytest_cache
