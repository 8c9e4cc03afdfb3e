#!/usr/bin/env bash
# Set up accelbench in .venv and run the quick suite on whatever device is here.
# The results go to the embedded store; a Markdown report is written beside it.
# A PyTorch already installed for python3 (a ROCm or CUDA build) is used as it is.
# Extra arguments go to `accelbench run` (e.g. scripts/quickstart.sh --device cpu).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  if python3 -c "import torch" >/dev/null 2>&1; then
    python3 -m venv --system-site-packages .venv
  else
    python3 -m venv .venv
  fi
fi
# The quick suite's serving case needs MLPerf LoadGen (the [serving] extra). It is taken
# only as a prebuilt wheel; where none is published for this platform the case is
# skipped, and the run says so, rather than the set-up failing on a C++ build.
if ! .venv/bin/python -m pip install --quiet --only-binary mlcommons-loadgen -e '.[serving]'; then
  echo "quickstart: no MLPerf LoadGen wheel for this platform; the serving case will be skipped" >&2
  .venv/bin/python -m pip install --quiet -e .
fi
# Byte-compiled once, so that no worker process compiles accelbench again (where the
# environment sets PYTHONDONTWRITEBYTECODE, each one would).
.venv/bin/python -m compileall -q src >/dev/null

exec .venv/bin/accelbench run --suite quick "$@"
