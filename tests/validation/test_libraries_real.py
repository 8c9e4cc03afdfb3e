"""The ecosystem libraries' checks with the real libraries, where a build for this torch
is installed: torchrec with fbgemm-gpu's CPU build beside the pinned torch of
requirements-dev.txt (installed from requirements-torchrec.txt), torchaudio beside the
floor torch (requirements-floor.txt). Elsewhere they skip, except in CI on the torch that
pins them, where they must run."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest
import torch
from validation_helpers import run_check

from accelbench.benchmarks.validation import audio, recsys

ROOT = Path(__file__).parents[2]


def _pinned_torch(requirements: str) -> str:
    text = (ROOT / requirements).read_text()
    match = re.search(r"^torch==(\S+)$", text, re.M)
    assert match, requirements
    return match.group(1)


def _require(modules: tuple[str, ...], requirements: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return
    pinned = torch.__version__.split("+")[0] == _pinned_torch(requirements)
    why = f"{', '.join(missing)} not installed (see {requirements})"
    if os.environ.get("CI") == "true" and pinned:
        pytest.fail(f"{why}: CI installs it beside torch {torch.__version__}")
    pytest.skip(why)


@pytest.mark.parametrize("check", recsys.RECSYS_CHECKS)
def test_torchrec_passes_for_real(check: str) -> None:
    _require(("torchrec", "fbgemm_gpu"), "requirements-dev.txt")
    m = run_check(recsys.BENCHMARK, check=check)
    assert m.status == "ok", m.reason
    builds = {b["library"]: b for b in m.details["builds"]}
    assert set(builds) == {"torchrec", "fbgemm-gpu"}
    if check == "embedding-bag-collection":
        names = [c["name"] for c in m.details["compared"]]
        assert names == ["pooled f0", "grad of t0", "pooled f1", "grad of t1"]
        assert all(c["outside"] == 0 and c["nonfinite"] == 0 for c in m.details["compared"])


@pytest.mark.parametrize("check", audio.AUDIO_CHECKS)
def test_torchaudio_passes_for_real(check: str) -> None:
    _require(("torchaudio",), "requirements-floor.txt")
    m = run_check(audio.BENCHMARK, check=check)
    assert m.status == "ok", m.reason
