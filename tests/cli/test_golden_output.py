"""What `accelbench show`, `accelbench compare`, `accelbench runs`, the Markdown report and
the OpenMetrics export print, word for word,
for a small store of fixed measurements: the golden files in tests/fixtures/golden/.

Only what changes from one store to the next is masked (run ids, which end in random
digits; time stamps; paths; version strings). Every number comes from fixed samples, so a
change in how a figure, a share, a parameter or a status is written shows up as a diff.

After an intended change of the output, regenerate the files and review the diff:

    ACCELBENCH_UPDATE_GOLDEN=1 pytest tests/cli/test_golden_output.py
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.store import Store
from fakes import stored_measurement

GOLDEN = Path(__file__).parents[1] / "fixtures" / "golden"
UPDATE = os.environ.get("ACCELBENCH_UPDATE_GOLDEN") == "1"
MI300X = "AMD Instinct MI300X | ROCm 6.3 | PyTorch 2.6.0"
H100 = "NVIDIA H100 80GB HBM3 | CUDA 12.4 | PyTorch 2.6.0"
SPREAD = (1.0, 1.01, 0.99, 1.004, 0.996, 1.002, 0.998, 1.006)  # relative, per sample
FLOP = 2 * 4096**3

_MASKS = (
    (re.compile(r"\b\d{8}-\d{6}-[0-9a-f]{4}\b"), "<RUN-ID>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2} \d{2}:\d{2}(?::\d{2})?"), "<TIME>"),
    (re.compile(r"(?:[A-Za-z]:)?[/\\]\S*results\.sqlite"), "<STORE>"),
    (re.compile(r"\b(accelbench|version) \d+\.\d+\.\d+[\w.+-]*"), r"\1 <VERSION>"),
)


def mask(text: str) -> str:
    """The output without what differs between two stores of the same measurements."""
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(mask(text), encoding="utf-8")
    assert path.exists(), f"{path} is missing: run with ACCELBENCH_UPDATE_GOLDEN=1"
    assert mask(text) == path.read_text(encoding="utf-8"), (
        f"{name} changed; if intended, regenerate with ACCELBENCH_UPDATE_GOLDEN=1")


# -- the store ---------------------------------------------------------------------------


def _timed(case: Case, per_call_s: float, figures: Sequence[Figure], **kw: object
           ) -> Measurement:
    return stored_measurement(case, "ok", samples=tuple(per_call_s * s for s in SPREAD),
                              number=10, figures=tuple(figures), **kw)


def _gemm(dtype: str, rate: float, peak: float) -> Measurement:
    case = Case.make("gemm", "g1", "micro", {"shape": "4096", "dtype": dtype, "batch": 1},
                     "cuda:0")
    t = FLOP / rate
    return _timed(case, t, [Figure("throughput", rate, "FLOP/s", True, peak),
                            Figure("time", t, "s", False)])


def _measurements(speed: float, peak: float) -> list[Measurement]:
    """One run's cases; `speed` scales the GEMMs and the copy (B against A)."""
    copy = Case.make("memory", "m1", "micro",
                     {"op": "h2d", "size_mib": 256, "pinned": True, "cast": False}, "cuda:0",
                     shown=("op", "size_mib", "pinned"))
    launch = Case.make("launch", "l1", "micro", {"mode": "eager", "warmup": 0}, "cuda:0",
                       shown=("mode",))
    fp8 = Case.make("gemm", "g1", "micro", {"shape": "4096", "dtype": "fp8", "batch": 1},
                    "cuda:0")
    out = [
        _gemm("bf16", 700e12 * speed, peak),
        _gemm("fp16", 690e12 * speed, peak),
        stored_measurement(fp8, "failed", reason="RuntimeError: fp8 GEMM needs torch._scaled_mm"),
        _timed(copy, 2**28 / (50e9 * speed), [Figure("bandwidth", 50e9 * speed, "B/s")]),
        _timed(launch, 4.2e-6, [Figure("latency", 4.2e-6, "s", False)],
               warnings=("noisy: IQR is 12% of the median",)),
    ]
    for size, busbw in ((1024, 2.1e9), (1 << 20, 180e9), (1 << 26, 310e9 * speed)):
        case = Case.make("collectives", "c1", "collective",
                         {"op": "all-reduce", "bytes": size, "dtype": "bf16", "world_size": 8,
                          "backend": "nccl"}, "cuda:0")
        t = size * 1.75 / busbw
        out.append(_timed(case, t, [Figure("busbw", busbw, "B/s"), Figure("time", t, "s", False)],
                          details={"bytes": size, "library": "RCCL 2.21.5", "nodes": 1}))
    gather = Case.make("collectives", "c1", "collective",
                       {"op": "all-gather", "bytes": 1024, "dtype": "bf16", "world_size": 1,
                        "backend": "nccl"}, "cuda:0")
    out.append(stored_measurement(gather, "skipped",
                                  reason="needs 2 or more ranks (--nproc-per-node)"))
    return out


def _add_run(store: Store, stack: str, host: str, started_at: float,
             measurements: Sequence[Measurement]) -> str:
    fingerprint = {
        "format_version": 1, "platform": "rocm" if "ROCm" in stack else "cuda",
        "device": {"name": stack.split(" | ")[0], "type": "cuda", "memory_bytes": 206158430208},
        "driver": {"driver_version": "6.8.5"},
        "torch": {"version": "2.6.0", "debug": False},
        "host": {"hostname": host, "logical_cores": 128},
        "environment": {"HIP_VISIBLE_DEVICES": "0|1"},
    }
    run_id = store.begin_run(fingerprint=fingerprint, fingerprint_id=f"fp-{host}",
                             generation_key=stack, device="cuda:0", suite="quick",
                             argv=["run"], host=host, accelbench_version="0.1.0",
                             started_at=started_at)
    for m in measurements:
        store.add_measurement(run_id, m)
    store.finish_run(run_id, "complete", finished_at=started_at + 60)
    return run_id


@pytest.fixture(scope="module")
def golden_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The store and the id of its first run."""
    path = tmp_path_factory.mktemp("golden") / "results.sqlite"
    with Store.open(path) as store:
        first = _add_run(store, MI300X, "mi300x-01", 1.75e9, _measurements(1.0, 1307e12))
        _add_run(store, H100, "h100-01", 1.75e9 + 3600, _measurements(1.12, 989e12))
    return path, first


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """One page width and no colour, whatever the terminal running the tests."""
    monkeypatch.setenv("COLUMNS", "160")
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return capsys.readouterr().out


# -- the outputs -------------------------------------------------------------------------


def test_show(golden_store: tuple[Path, str], wide: None,
              capsys: pytest.CaptureFixture[str]) -> None:
    path, first = golden_store
    out = _run(capsys, "show", first, "--env", "--store", str(path))
    check_golden("show.txt", out)


def test_compare(golden_store: tuple[Path, str], wide: None,
                 capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(capsys, "compare", "*MI300X*", "*H100*", "--store", str(golden_store[0]))
    check_golden("compare.txt", out)


def test_markdown_report(golden_store: tuple[Path, str],
                         capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(capsys, "report", "*MI300X*", "*H100*", "--format", "md", "-o", "-",
               "--store", str(golden_store[0]))
    check_golden("report.md", out)


def test_runs(golden_store: tuple[Path, str], wide: None,
              capsys: pytest.CaptureFixture[str]) -> None:
    """Each run with the node it ran on: two nodes of one stack look alike otherwise."""
    out = _run(capsys, "runs", "--store", str(golden_store[0]))
    check_golden("runs.txt", out)
    header = next(line for line in out.splitlines() if "Run" in line and "Stack" in line)
    assert "Host" in header
    assert "│ h100-01 " in out and "│ mi300x-01 " in out
    listed = json.loads(_run(capsys, "runs", "--json", "--store", str(golden_store[0])))
    assert [r["host"] for r in listed] == ["h100-01", "mi300x-01"]


def test_openmetrics_export(golden_store: tuple[Path, str],
                            capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(capsys, "export", "--format", "openmetrics", "--node", "mi300x-01",
               "--store", str(golden_store[0]))
    check_golden("export.om", out)


def test_masks_hide_only_what_changes_between_stores() -> None:
    text = ("Run 20260101-120000-3fa2 started 2026-01-01 12:00:00 UTC, by accelbench 0.1.0, "
            "stored in /tmp/x/results.sqlite; 55.2 GFLOP/s")
    assert mask(text) == ("Run <RUN-ID> started <TIME> UTC, by accelbench <VERSION>, "
                          "stored in <STORE>; 55.2 GFLOP/s\n")
