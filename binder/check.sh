#!/usr/bin/env bash
# Prove binder/ on its own: build a fresh virtual environment the way Binder does (requirements.txt, then
# postBuild from the repository root) and run the example notebooks under nbval with it, offline.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
venv=$(mktemp -d "${TMPDIR:-/tmp}/agl-binder-check.XXXXXX")
trap 'rm -rf "$venv"' EXIT
"$python" -m venv "$venv"
export PATH="$venv/bin:$PATH"
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -r binder/requirements.txt
bash binder/postBuild > "$venv/postBuild.log" 2>&1 || { cat "$venv/postBuild.log"; exit 1; }
jupyter labextension list 2>&1 | grep -q "agl-notebook.*enabled" || { echo "the extension is not enabled" >&2; exit 1; }
# Run from a folder outside the repository, so the installed package is the one tested, not the source tree.
cd notebooks
python -m pytest -c ../binder/pytest.ini --nbval -p no:cacheprovider -q .
