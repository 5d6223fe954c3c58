# The two commands of the README:
#   make demo   set up, then run the main job offline: the example notebooks, replayed from their recordings (needs no
#               Node.js: the JupyterLab extension is not built for it); it ends with what each notebook's kernel
#               replayed, the model calls made (0), and the command that opens them in JupyterLab
#   make test   set up, then run every check and test (what .ci/run runs)
# and `make reliability-report`, which rewrites docs/reliability.md from a run of the reliability tests.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3

.PHONY: setup demo test lint bench notebooks reliability-report

setup: $(VENV)/.installed

# Everything, the JupyterLab extension included: the package's build hook builds it with npm (Node.js 20) when its
# sources changed. The browser tests need it, so `make test` does too.
$(VENV)/.installed: pyproject.toml labextension/package.json labextension/package-lock.json $(wildcard labextension/src/*.ts)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed-python

# What the demo needs: the package without its JupyterLab extension (nbval replays the notebooks in kernels, no
# browser), so no Node.js. Up to date once either setup ran; a later `make test` still builds the extension.
$(VENV)/.installed-python: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	SKIP_JUPYTER_BUILDER=1 $(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# The notebooks run under nbval in a separate pytest process: the nbval plugin makes that process's kernels replay
# and block model calls, which the unit tests must not inherit.
NBVAL := $(VENV)/bin/pytest --nbval -p no:cacheprovider -q notebooks/

demo: $(VENV)/.installed-python
	$(NBVAL)

lint: setup
	$(VENV)/bin/ruff check agl_notebook tests benchmarks examples notebooks docs
	$(VENV)/bin/ruff format --check agl_notebook tests benchmarks examples notebooks docs
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

test: lint
	$(VENV)/bin/pytest -q --durations=25
	$(NBVAL)
	bash binder/check.sh

# Rewrite docs/reliability.md from a run of every test marked `reliability` (the browser ones too). Nothing else
# writes it: a plain `make test` or `pytest` modifies no tracked file.
reliability-report: setup
	$(VENV)/bin/pytest -q -p no:cacheprovider -m reliability --reliability-report

bench: setup
	$(PY) benchmarks/bench_import.py
	$(PY) benchmarks/bench_core.py
	$(PY) benchmarks/bench_replay.py
	$(PY) benchmarks/bench_cpu.py
	$(PY) benchmarks/bench_scrub.py
	$(PY) benchmarks/bench_notebook.py
	$(PY) benchmarks/bench_client_tools.py
	$(PY) benchmarks/bench_functions.py
	$(PY) benchmarks/bench_map.py
	$(PY) benchmarks/bench_batches.py
	$(PY) benchmarks/bench_openai.py
	$(PY) benchmarks/bench_thinking.py

# Rewrite and re-record the example notebooks (after changing notebooks/make_notebooks.py).
notebooks: setup
	cd notebooks && ../$(PY) make_notebooks.py
