#!/usr/bin/env bash
# Set up the pinned development environment in .venv, then lint, and run the whole test
# suite while the types are checked and the documentation site is built: what CI runs.
#
#   scripts/test.sh [--fast] [PYTEST_ARGS...]
#
# --fast is the edit-test loop: lint and the tests that need no real server (PostgreSQL,
# Slurm), no torchrun job, no browser and no subprocess-heavy run. Extra arguments go to
# pytest (e.g. scripts/test.sh --fast tests/core -x). The tests run on
# $ACCELBENCH_TEST_WORKERS processes (default: the cores, at most 4; 1 runs them in this
# process).
set -euo pipefail
cd "$(dirname "$0")/.."

fast=0
if [ "${1:-}" = "--fast" ]; then
  fast=1
  shift
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# Installed again only when the pinned requirements or the package's metadata change.
stamp=.venv/.accelbench-requirements
wanted=$(cat requirements-dev.txt requirements-common.txt requirements-torchrec.txt \
  pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -r requirements-dev.txt
  .venv/bin/python -m pip install --quiet --no-deps -r requirements-torchrec.txt
  .venv/bin/python -m pip install --quiet --no-deps -e .
  echo "$wanted" >"$stamp"
fi

workers=${ACCELBENCH_TEST_WORKERS:-$(nproc)}
[ "$workers" -le 4 ] || workers=4
parallel=()
if [ "$workers" -gt 1 ]; then
  # A test file's tests share one worker, so a module's fixtures (a real quick-suite run,
  # a Slurm cluster) are made once.
  parallel=(-n "$workers" --dist loadfile)
fi

# accelbench's own modules, byte-compiled once (up-to-date files are skipped): where the
# environment sets PYTHONDONTWRITEBYTECODE, each worker process and CLI the tests start
# would otherwise compile them again, a third of a second or more every time.
.venv/bin/python -m compileall -q src >/dev/null
.venv/bin/ruff check src tests bench docs/hooks
if [ "$fast" = 1 ]; then
  exec .venv/bin/python -m pytest "${parallel[@]}" \
    -m "not (slow or multinode or server or browser or gpu)" "$@"
fi

# The types and the documentation site are checked while the suite runs: mypy takes one
# core for minutes, and the suite's workers spend much of their time waiting on the
# processes and servers they start. What they print comes after the suite's result, and
# either failing fails the command.
static_checks() {
  .venv/bin/mypy  # src/ and bench/, strict (pyproject.toml)
  # tests/: strict too, except that tests and fixtures may leave their parameters
  # unannotated; their bodies are checked all the same. The test folders are not packages
  # (pytest puts each test's folder on the path), so the conftest.py files, which would
  # share one module name, are checked one at a time, and the frozen generators of the
  # committed fixtures (tests/fixtures/) are left as they were written.
  local tests_mypy=(--allow-untyped-defs --allow-incomplete-defs --allow-untyped-calls
    --check-untyped-defs)
  .venv/bin/mypy "${tests_mypy[@]}" --exclude '(^|/)conftest\.py$' \
    --exclude '^tests/fixtures/' tests
  local conftest
  for conftest in tests/conftest.py tests/*/conftest.py; do
    MYPYPATH="src:tests:$(dirname "$conftest")" .venv/bin/mypy "${tests_mypy[@]}" "$conftest"
  done
  NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$(mktemp -d)"
}
static_log=$(mktemp)
(set -euo pipefail; static_checks) >"$static_log" 2>&1 &
static=$!
suite=0
.venv/bin/python -m pytest "${parallel[@]}" --durations=40 "$@" || suite=$?
if ! wait "$static"; then
  cat "$static_log"
  echo "test.sh: the type check or the documentation build failed (above)" >&2
  exit 1
fi
cat "$static_log"
exit "$suite"
