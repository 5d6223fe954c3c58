# The two commands of the README:
#   make demo   set up, then run the main job offline: the example notebooks, replayed from their recordings
#   make test   set up, then run every check and test (what .ci/run runs)
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: setup demo test lint bench notebooks

setup: $(VENV)/.installed

# The JupyterLab extension is built by the package's build hook (npm) when its sources changed.
$(VENV)/.installed: pyproject.toml labextension/package.json labextension/package-lock.json $(wildcard labextension/src/*.ts)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# The notebooks run under nbval in a separate pytest process: the nbval plugin makes that process's kernels replay
# and block model calls, which the unit tests must not inherit.
NBVAL := $(VENV)/bin/pytest --nbval -p no:cacheprovider -q notebooks/

demo: setup
	$(NBVAL)

lint: setup
	$(VENV)/bin/ruff check agl_notebook tests benchmarks examples notebooks docs
	$(VENV)/bin/mypy

test: lint
	$(VENV)/bin/pytest -q
	$(NBVAL)
	bash binder/check.sh

bench: setup
	$(PY) benchmarks/bench_import.py
	$(PY) benchmarks/bench_core.py
	$(PY) benchmarks/bench_replay.py
	$(PY) benchmarks/bench_notebook.py
	$(PY) benchmarks/bench_client_tools.py
	$(PY) benchmarks/bench_functions.py

# Rewrite and re-record the example notebooks (after changing notebooks/make_notebooks.py).
notebooks: setup
	cd notebooks && ../$(PY) make_notebooks.py
