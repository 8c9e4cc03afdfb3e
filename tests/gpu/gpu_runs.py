"""Running accelbench for real on the GPU: through the runner as `accelbench run` does
(the Python API the CLI calls), or through the CLI itself in a fresh process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from accelbench.store import StoredRun

DEVICE = "cuda"  # the first GPU: ROCm GPUs are cuda devices in PyTorch
# One worker process per case and a short budget: these tests check behaviour, not speed.
TIMING = {"processes": 1, "max_time": 0.2, "warmup_time": 0.02}


def run_on_gpu(store: Path, benches: Sequence[str], params: Mapping[str, str] | None = None,
               dtypes: Sequence[str] = ()) -> StoredRun:
    """One run of `benches` on the GPU, stored in `store`, read back from it. `params` are
    `-p NAME=VALUES` as written on the command line (commas make a grid); together they
    replace every axis of the quick suite's grid for these benchmarks."""
    from accelbench.benchmarks import REGISTRY
    from accelbench.core.request import RunRequest
    from accelbench.runner.plan import validate
    from accelbench.runner.session import run_session
    from accelbench.store import Store

    request = RunRequest(benches=tuple(benches),
                      overrides={name: (text,) for name, text in (params or {}).items()},
                      dtypes=tuple(dtypes), device=DEVICE, timing=TIMING)
    with Store.open(store) as opened:
        outcome = run_session(validate(request, REGISTRY), opened, argv=["run", *benches])
        return opened.load_run(outcome.run_id)


def accelbench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh process."""
    return subprocess.run([sys.executable, "-m", "accelbench", *args], capture_output=True,
                          text=True, timeout=timeout)
