# The two commands of the README:
#   make demo   set up, then run the main job offline
#   make test   set up, then run every check and test (what .ci/run runs)
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: setup demo test lint bench

setup: $(VENV)/.installed

# The JupyterLab extension is built by the package's build hook (npm) when its sources changed.
$(VENV)/.installed: pyproject.toml labextension/package.json labextension/package-lock.json $(wildcard labextension/src/*.ts)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

demo: setup
	$(PY) examples/first_step.py

lint: setup
	$(VENV)/bin/ruff check agl_notebook tests benchmarks examples
	$(VENV)/bin/mypy

test: lint
	$(VENV)/bin/pytest -q

bench: setup
	$(PY) benchmarks/bench_import.py
	$(PY) benchmarks/bench_core.py
	$(PY) benchmarks/bench_replay.py
	$(PY) benchmarks/bench_notebook.py
