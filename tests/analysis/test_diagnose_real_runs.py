"""`diagnose` on real runs: four hosts (each run under a host name of its own, in a UTS
namespace) measure a small GEMM on the CPU into one store, one of them with its BLAS on
a slow code path and another beside a busy process on every core, and `diagnose
--drain-list` names the slow node and drains no other; a case only one node was asked to
run fails no other node."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from accelbench.core.request import RunRequest
from accelbench.errors import EXIT_CASE_FAILED, EXIT_INCONCLUSIVE
from accelbench.store import Store

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

HOSTS = ("node0", "node1", "node2", "node3")
SLOW = "node3"
BUSY = "node1"
# MKL's conditional numerical reproducibility mode "COMPATIBLE" runs its SSE2 code path:
# GEMM at a third of the speed or less where PyTorch's BLAS is MKL on an AVX2 CPU.
SLOW_ENV = {"MKL_CBWR": "COMPATIBLE"}
# Generous, so that a healthy node's run-to-run spread never fails it; the slowed node
# runs at a third of the others' speed or less.
RULES = """
version: 1
rules:
  - name: failed-case
    metric: "*"
    compare: status
    category: failure
  - name: gemm-throughput
    metric: gemm
    compare: ratio_to_baseline
    min: 0.75
    category: compute
"""
PROBE = """
import time, torch
torch.set_num_threads(1)
a, b = torch.randn(256, 256), torch.randn(256, 256)
for _ in range(10):
    a @ b
best = float("inf")
for _ in range(10):
    start = time.thread_time()
    for _ in range(20):
        a @ b
    best = min(best, time.thread_time() - start)
print(best)
"""


def _as_host(name: str, argv: list[str]) -> list[str]:
    """argv run under the host name `name` (a UTS namespace of its own)."""
    return ["unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', name, *argv]


def _require_host_names() -> None:
    try:
        done = subprocess.run(_as_host("probe", ["true"]), capture_output=True, timeout=30,
                              check=False)
    except FileNotFoundError:
        done = None
    if done is None or done.returncode != 0:
        why = "cannot run a command under another host name (unshare --uts needs root)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)


def _gemm_cpu_seconds(env: dict[str, str]) -> float:
    """CPU time of a fixed batch of GEMMs in a fresh process with `env` (CPU time, so
    that other work on the host does not count)."""
    done = subprocess.run([sys.executable, "-c", PROBE], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=120, check=True)
    return float(done.stdout.strip())


def test_diagnose_drains_the_slowed_node_and_no_other(tmp_path, capsys) -> None:
    from accelbench.cli.main import main

    _require_host_names()
    if _gemm_cpu_seconds(SLOW_ENV) < 1.6 * _gemm_cpu_seconds({}):
        pytest.skip("MKL_CBWR=COMPATIBLE does not slow GEMM here (PyTorch's BLAS is not MKL)")
    store = tmp_path / "fleet.sqlite"
    request = tmp_path / "request.json"
    request.write_text(RunRequest(
        benches=("gemm",), overrides={"shape": ("256",)}, dtypes=("fp32",), device="cpu",
        threads=1, timing={"processes": 1, "max_time": 0.1, "telemetry_interval": 0.0},
        no_report=True).to_json())
    extra = tmp_path / "extra.json"  # a case only node0 is asked to run
    extra.write_text(RunRequest(
        benches=("launch",), device="cpu", threads=1,
        timing={"processes": 1, "max_time": 0.1, "telemetry_interval": 0.0},
        no_report=True).to_json())
    runs_of = [(host, request) for host in HOSTS] + [("node0", extra)]
    for host, asked in runs_of:
        env = {**os.environ, **(SLOW_ENV if host == SLOW else {})}
        # node1 measures while every core is kept busy: its figure cannot be trusted.
        spinners = ([subprocess.Popen([sys.executable, "-c", "while True: pass"])
                     for _ in range(os.cpu_count() or 2)] if host == BUSY else [])
        try:
            done = subprocess.run(
                _as_host(host, [sys.executable, "-m", "accelbench", "run", "--request",
                                str(asked), "--store", str(store), "--quiet"]),
                env=env, capture_output=True, text=True, timeout=300, check=False)
        finally:
            for spinner in spinners:
                spinner.kill()
                spinner.wait()
        assert done.returncode == 0, done.stderr

    with Store.open(store) as opened:
        runs = [opened.load_run(r.id) for r in opened.list_runs()]
    assert sorted(r.record.host for r in runs) == sorted(h for h, _ in runs_of)
    gemm = {r.record.host: r.measurements[0] for r in runs
            if r.measurements[0].case.benchmark == "gemm"}
    assert gemm[BUSY].contended, "a run beside a busy process on every core is contended"
    assert len({m.case.key for m in gemm.values()}) == 1 and all(m.ok for m in gemm.values())
    quiet = {host for host, m in gemm.items() if not (m.contended or m.throttled)}

    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    drain = tmp_path / "drain.txt"
    code = main(["diagnose", "--store", str(store), "--rules", str(rules), "--json",
                 "--drain-list", str(drain)])
    data = json.loads(capsys.readouterr().out)
    drained = [line.split()[0] for line in drain.read_text().splitlines()]
    # A node measured on a busy host may be inconclusive, but no healthy node is drained,
    # and the case only node0 was asked to run is missing on no other node.
    assert set(drained) <= {SLOW}, data
    assert BUSY not in data["failing"], data
    assert not [f for n in data["nodes"] for f in n["findings"] if "launch" in str(f)], data
    if SLOW in quiet and quiet - {SLOW}:
        # The evidence allows: the slowed node and another measured on a quiet host.
        assert (code, drained, data["failing"]) == (EXIT_CASE_FAILED, [SLOW], [SLOW]), data
        [finding] = next(n for n in data["nodes"] if n["node"] == SLOW)["findings"]
        assert finding["rule"] == "gemm-throughput" and finding["observed"] < 0.75
    else:
        # The host was too busy to tell: nothing is drained, and the verdict says why.
        assert drained == [] and code in (0, EXIT_INCONCLUSIVE), data
        slow = next(n for n in data["nodes"] if n["node"] == SLOW)
        assert slow["verdict"] == "inconclusive" or any(
            "busy host" in note for note in data["notes"]), data
