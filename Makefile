# Two commands on a fresh machine: `make demo` (word count on the embedded broker) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint typecheck unit install clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,spark]'
	touch $@

install: $(BIN)/.installed

demo: install
	$(BIN)/python -m samsa.examples.wordcount.demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The repository root is the package `samsa`: mypy sees it through a link named samsa.
typecheck: install
	mkdir -p build/typecheck && ln -sfn ../.. build/typecheck/samsa
	cd build/typecheck && ../../$(BIN)/mypy --config-file ../../pyproject.toml -p samsa

test: lint typecheck
	$(BIN)/pytest -q

clean:
	rm -rf $(VENV) build .demo state
