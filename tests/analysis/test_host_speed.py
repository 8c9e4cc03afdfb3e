"""The host's own speed, timed on a reference beside every case: a CPU case that moved as
the host did is not called faster or slower, one that moved against it or well beyond it
is; GPU cases are left alone."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from analysis_data import add_run, in_processes

from accelbench.analysis.compare import (
    FASTER,
    INCONCLUSIVE,
    SAME,
    SLOWER,
    CaseComparison,
    compare,
)
from accelbench.analysis.host_speed import HostShift, host_shift, readings
from accelbench.analysis.select import select_group
from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.env.host import HostProbe, HostReport, HostSampler
from accelbench.env.host.reference import REFERENCE, reference_seconds
from accelbench.errors import EXIT_INCONCLUSIVE
from accelbench.store import Store

STACK = "AMD EPYC | CPU | PyTorch 2.14.1"
FLOP = 2 * 512**3
# Speed of B over A of each CPU case, as measured (host and code together).
MEASURED = {"fp32": 0.92, "fp64": 0.60, "bf16": 1.07, "int8": 1.00}


def cpu_case(dtype: str, device: str = "cpu") -> Case:
    return Case.make("gemm", "g1", "micro", {"shape": "512", "dtype": dtype, "batch": 1,
                                             "threads": 1}, device)


def hosts(rng: np.random.Generator, seconds: float, processes: int = 3
          ) -> list[dict[str, Any]]:
    """What the sampler stores beside each process: the reference before and after."""
    return [HostReport(reference_s=tuple(seconds * float(np.exp(0.01 * rng.standard_normal()))
                                         for _ in range(2)),
                       reference=REFERENCE).to_dict() for _ in range(processes)]


def store_pair(path, host_b: float, device: str = "cpu") -> tuple[str, str]:
    """Run A on a host whose reference takes 10 ms; run B where it takes 10 ms / host_b
    (host_b > 1: B's host ran faster), each case measured as MEASURED says."""
    rng = np.random.default_rng(5)
    ids = []
    with Store.open(path) as store:
        for i, (side, reference_s) in enumerate((("a", 0.01), ("b", 0.01 / host_b))):
            ms = [in_processes(cpu_case(dtype, device),
                               FLOP / (20e9 * (speed if side == "b" else 1.0)), FLOP,
                               "FLOP/s", rng=rng, process_noise=0.01,
                               hosts=hosts(rng, reference_s))
                  for dtype, speed in MEASURED.items()]
            ids.append(add_run(store, host="vm", stack=STACK, started_at=1.76e9 + 60 * i,
                               measurements=ms, device=device))
    return ids[0], ids[1]


def verdicts(path, a, b) -> tuple[dict[str, CaseComparison], HostShift | None]:
    with Store.open(path, create=False) as store:
        result = compare(select_group(store, a), select_group(store, b))
    return {c.b.case.param_dict["dtype"]: c for c in result.cases}, result.host


def test_the_reference_is_the_fastest_of_its_repeats_on_a_fake_clock() -> None:
    ticks = iter([0.0, 0.012, 1.0, 1.010, 2.0, 2.011])
    assert reference_seconds(lambda: next(ticks)) == pytest.approx(0.010)
    assert REFERENCE.startswith("SHA-256 of 8 MiB") and "fastest of 3" in REFERENCE
    assert 0 < reference_seconds() < 1.0  # the real work, here


def test_the_sampler_times_it_before_and_after_and_keeps_it() -> None:
    times = iter([0.010, 0.011])
    probe = HostProbe(processes=None, gpu=None, reference=lambda: next(times))
    sampler = HostSampler(probe).start(background=False)
    report = sampler.stop()
    assert report.reference_s == (0.010, 0.011) and report.reference == REFERENCE
    again = HostReport.from_dict(report.to_dict())
    assert again.reference_s == (0.010, 0.011) and again.reference == REFERENCE
    older = {k: v for k, v in report.to_dict().items()
             if k not in ("reference_s", "reference")} | {"format_version": 1}
    assert HostReport.from_dict(older).reference_s == ()
    untimed = HostSampler(HostProbe(processes=None, gpu=None)).start(background=False).stop()
    assert untimed.reference_s == () and untimed.reference is None


def test_a_case_that_moved_as_the_host_did_is_inconclusive(tmp_path) -> None:
    path = tmp_path / "s.sqlite"
    a, b = store_pair(path, host_b=0.92)  # B's host 8% slower
    cases, host = verdicts(path, a, b)
    assert host is not None and host.moved(0.05)
    assert host.ratio == pytest.approx(0.92, abs=0.01) and host.readings == (12, 12)
    fp32 = cases["fp32"]  # -8%, as the host: the host may explain all of it
    assert fp32.verdict == INCONCLUSIVE
    assert fp32.reason.startswith("the host ran its reference work -7.8% in B (0.922 [")
    assert fp32.host == host
    assert cases["fp64"].verdict == SLOWER  # -40%: far beyond the host
    assert cases["bf16"].verdict == FASTER  # against the host: it only hid some of it
    # Unchanged figures on a host 8% slower: the code may have got faster; not "same".
    assert cases["int8"].verdict == INCONCLUSIVE and cases["int8"].host == host


def test_a_steady_host_changes_nothing(tmp_path) -> None:
    path = tmp_path / "s.sqlite"
    a, b = store_pair(path, host_b=1.0)
    cases, host = verdicts(path, a, b)
    assert host is not None and not host.moved(0.05)
    assert cases["fp32"].verdict == SLOWER and cases["int8"].verdict == SAME
    assert all(c.host is None for c in cases.values())


def test_gpu_cases_do_not_follow_the_host(tmp_path) -> None:
    path = tmp_path / "s.sqlite"
    a, b = store_pair(path, host_b=0.92, device="cuda:0")
    cases, host = verdicts(path, a, b)
    assert host is None  # readings are taken from CPU cases only
    assert cases["fp32"].verdict == SLOWER


def test_the_gate_cannot_pass_a_case_the_host_may_have_hidden(tmp_path, capsys) -> None:
    path = tmp_path / "s.sqlite"
    a, b = store_pair(path, host_b=1.10)  # B's host 10% faster
    argv = ["compare", a, b, "--store", str(path), "--case", "gemm dtype=int8"]
    # int8 looks unchanged, but on a host 10% faster it may be 10% slower.
    assert main([*argv, "--fail-on-regression", "5"]) == EXIT_INCONCLUSIVE
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["host_reference"]["ratio"] == pytest.approx(1.10, abs=0.01)
    (case,) = data["cases"]
    assert case["verdict"] == INCONCLUSIVE and case["host_shift"] is not None
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Host reference: the host ran its reference work +10." in out


def test_readings_need_a_named_reference_and_positive_times() -> None:
    m = in_processes(cpu_case("fp32"), 1e-3, FLOP, "FLOP/s", rng=np.random.default_rng(1),
                     hosts=[{"reference_s": [0.01, 0.0121], "reference": REFERENCE},
                            {"reference_s": [0.01, -1.0, "x"], "reference": REFERENCE},
                            {"reference_s": [0.01]}, {}])
    (first, second) = readings(m)
    assert first[0] == second[0] == REFERENCE
    assert first[1] == pytest.approx(1 / math.sqrt(0.01 * 0.0121))
    assert second[1] == pytest.approx(100.0)


def test_sides_that_timed_other_references_are_not_compared(tmp_path) -> None:
    path = tmp_path / "s.sqlite"
    a, b = store_pair(path, host_b=0.9)
    with Store.open(path, create=False) as store:
        ga, gb = select_group(store, a), select_group(store, b)
    for run in gb.runs:
        for m in run.measurements:
            for h in m.hosts:
                h["reference"] = "another reference"
    assert host_shift(ga.runs, gb.runs) is None
