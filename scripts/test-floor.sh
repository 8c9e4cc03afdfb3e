#!/usr/bin/env bash
# Run the tests that call PyTorch's APIs (marked torch_api) against the oldest PyTorch
# accelbench supports (requirements-floor.txt), in .venv-floor, beside the pinned one that
# scripts/test.sh tests in full; the slow flows whose PyTorch calls other tests make too
# (marked pinned_only) run on the pinned PyTorch alone. A PyTorch older than this floor is refused at start-up
# (see src/accelbench/env/torch_floor.py). Extra arguments go to pytest; the workers are
# chosen as in scripts/test.sh. `--setup` only sets up .venv-floor (CI does that while the
# pinned suite runs).
set -euo pipefail
cd "$(dirname "$0")/.."

setup_only=0
if [ "${1:-}" = "--setup" ]; then
  setup_only=1
  shift
fi

if [ ! -x .venv-floor/bin/python ]; then
  python3 -m venv .venv-floor
fi
stamp=.venv-floor/.accelbench-requirements
wanted=$(cat requirements-floor.txt requirements-common.txt pyproject.toml | sha256sum \
  | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  .venv-floor/bin/python -m pip install --quiet --upgrade pip
  .venv-floor/bin/python -m pip install --quiet -r requirements-floor.txt
  .venv-floor/bin/python -m pip install --quiet --no-deps -e .
  echo "$wanted" >"$stamp"
fi
[ "$setup_only" = 0 ] || exit 0

workers=${ACCELBENCH_TEST_WORKERS:-$(nproc)}
[ "$workers" -le 4 ] || workers=4
parallel=()
if [ "$workers" -gt 1 ]; then
  parallel=(-n "$workers" --dist loadfile)
fi

.venv-floor/bin/python -m compileall -q src >/dev/null  # as scripts/test.sh does
.venv-floor/bin/python -c 'import torch; print("accelbench tests on PyTorch", torch.__version__)'
# `accelbench ab` between two installed releases: the floor's (these tests' own) and the
# pinned one, where scripts/test.sh has set it up.
if [ -x .venv/bin/python ]; then
  export ACCELBENCH_TEST_OTHER_STACK="$PWD/.venv/bin/python"
fi
.venv-floor/bin/python -m pytest -p no:cacheprovider "${parallel[@]}" --durations=25 \
  -m "torch_api and not pinned_only" "$@"
