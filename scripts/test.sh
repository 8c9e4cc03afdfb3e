#!/usr/bin/env bash
# Set up the pinned development environment in .venv, lint, type-check, and run the test suite.
# Extra arguments go to pytest (e.g. scripts/test.sh tests/core -x).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -r requirements-dev.txt
.venv/bin/python -m pip install --quiet --no-deps -e .

.venv/bin/ruff check src tests bench
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
