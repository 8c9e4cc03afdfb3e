#!/usr/bin/env bash
# Run the test suite against the oldest PyTorch accelbench supports (requirements-floor.txt),
# in .venv-floor, beside the pinned one that scripts/test.sh tests. A PyTorch older
# than this floor is refused at start-up (see src/accelbench/env/torch_floor.py).
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv-floor/bin/python ]; then
  python3 -m venv .venv-floor
fi
.venv-floor/bin/python -m pip install --quiet --upgrade pip
.venv-floor/bin/python -m pip install --quiet -r requirements-floor.txt
.venv-floor/bin/python -m pip install --quiet --no-deps -e .

.venv-floor/bin/python -c 'import torch; print("accelbench tests on PyTorch", torch.__version__)'
.venv-floor/bin/python -m pytest -p no:cacheprovider "$@"
