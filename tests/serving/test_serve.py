"""LoadGen's four scenarios, run for real on the CPU with short settings. Only what a run
must hold is asserted: no latency or rate threshold."""

from __future__ import annotations

import pytest

from accelbench.benchmarks import REGISTRY

BENCH = REGISTRY.get("serve")
SHORT = {"model": "bert-tiny", "config": "layers=1", "seq": 8, "min_duration": "200ms",
         "min_queries": 20}

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("scenario", "headline", "goodput"), [
    ("single-stream", "p90", True),
    ("multi-stream", "p99", True),
    ("offline", "throughput", False),
])
def test_the_stream_and_offline_scenarios_run_under_loadgen(execute, scenario, headline,
                                                            goodput) -> None:
    m = execute(BENCH, scenario=scenario, **SHORT)
    assert m.status == "ok", m.reason
    assert m.primary.name == headline and m.primary.value > 0
    assert m.figure("throughput").value > 0
    assert (m.figure("goodput") is not None) == goodput
    if goodput:
        assert 0 <= m.figure("goodput").value <= m.figure("throughput").value
    log = m.details["loadgen"]
    assert log["loadgen_version"].startswith("6.")
    assert log["effective_scenario"] == {"single-stream": "SingleStream",
                                         "multi-stream": "MultiStream",
                                         "offline": "Offline"}[scenario]
    assert log["result_validity"] in ("VALID", "INVALID")
    assert log["effective_min_duration_ms"] == 200 and log["result_min_queries_met"]
    settings = m.details["loadgen_settings"]
    assert settings["min_duration_s"] == pytest.approx(0.2) and settings["min_queries"] == 20
    assert m.details["parity"]["ok"]
    assert m.samples and all(t > 0 for t in m.samples)  # service time per engine call


def test_the_server_search_runs_loadgen_tests_and_keeps_their_verdicts(execute) -> None:
    m = execute(BENCH, scenario="server", latency_bound="1s", max_trials=2, **SHORT)
    assert m.status == "ok", m.reason
    qps = m.figure("qps")
    assert qps is m.primary and qps.unit == "query/s" and qps.value > 0
    trials = m.details["trials"]
    assert 1 <= len(trials) <= 2
    assert qps.value == max(t["qps"] for t in trials if t["within_bound"])
    assert m.details["qps_search"] in ("converged", "trials", "no trial missed the bound")
    assert isinstance(m.details["early_stopping"]["met"], bool)
    assert m.details["early_stopping"]["verdict"]
    assert m.details["loadgen"]["effective_scenario"] == "Server"
    assert m.details["loadgen"]["effective_target_qps"] == pytest.approx(qps.value, rel=1e-3)
    assert 0 <= m.figure("goodput").value <= m.figure("throughput").value * 1.000001
    assert m.figure("p99").value > 0


def test_a_wrong_engine_never_reaches_loadgen(execute, monkeypatch) -> None:
    from dataclasses import replace

    from accelbench.benchmarks.models import engines

    real = engines.get

    class Doubled:
        def __init__(self, inner):
            self.inner, self.name = inner, inner.name

        def problem(self, job):
            return None

        def prepare(self, job):
            return replace(self.inner.prepare(job), output=lambda out: out * 2)

    monkeypatch.setattr(engines, "get", lambda name: Doubled(real(name)))
    m = execute(BENCH, scenario="single-stream", **SHORT)
    assert m.status == "failed" and m.reason.startswith("parity with eager fp32 failed")
    assert "loadgen" not in m.details
