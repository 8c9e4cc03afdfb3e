"""Scenario settings, durations, the LoadGen detail log and the system under test."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import SimpleNamespace

import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.benchmarks.serving import loadgen, scenarios
from accelbench.benchmarks.serving.scenarios import ServeParams
from accelbench.benchmarks.serving.sut import QueueSUT
from accelbench.errors import UserError

BENCH = REGISTRY.get("serve")


def _params(**given: str) -> ServeParams:
    return ServeParams(**BENCH.resolve(given))


@pytest.mark.parametrize(("text", "seconds"), [
    ("100ms", 0.1), ("2s", 2.0), ("500us", 5e-4), ("250ns", 2.5e-7), ("1.5", 1.5),
    ("1min", 60.0), (" 20 ms ", 0.02), ("1e-3s", 1e-3),
])
def test_durations_read_with_their_unit(text, seconds) -> None:
    assert scenarios.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["0ms", "-5ms", "fast", "10 parsecs", "", "nan", "inf",
                                  "1e9s", "ms"])
def test_a_latency_bound_that_is_not_a_positive_duration_is_a_usage_error(text) -> None:
    with pytest.raises(UserError, match="latency_bound"):
        BENCH.resolve({"latency_bound": text})


def test_unknown_scenarios_are_usage_errors_and_empty_durations_mean_loadgens() -> None:
    with pytest.raises(UserError, match="scenario='cloud' is not one of: single-stream"):
        BENCH.resolve({"scenario": "cloud"})
    settings = scenarios.settings_from_params(_params())
    assert settings.min_duration_s == scenarios.LOADGEN_MIN_DURATION_S == 10.0
    assert settings.min_queries == scenarios.LOADGEN_MIN_QUERIES == 100
    assert settings.latency_bound_s == pytest.approx(0.1)


@pytest.mark.parametrize(("scenario", "batch", "per_query"), [
    ("single-stream", 1, 1), ("server", 1, 1), ("multi-stream", 8, 8), ("offline", 8, 1),
])
def test_each_scenario_calls_the_engine_with_its_batch(scenario, batch, per_query) -> None:
    s = scenarios.settings_from_params(_params(scenario=scenario))
    assert (s.batch, s.samples_per_query) == (batch, per_query)
    assert s.to_dict()["loadgen_scenario"] == scenarios.LOADGEN_NAMES[scenario]


def test_settings_for_another_scenario_are_named() -> None:
    params = _params(scenario="offline", samples_per_query="4")
    assert scenarios.unused_settings(params) == ("samples_per_query applies to multi-stream, "
                                                 "not offline")
    assert scenarios.unused_settings(_params(scenario="server", target_qps="5")) is None


def test_the_detail_log_is_read_key_by_key() -> None:
    text = "\n".join([
        ':::MLLOG {"key": "result_validity", "value": "INVALID", "time_ms": 1}',
        ':::MLLOG {"key": "early_stopping_met", "value": false}',
        ':::MLLOG {"key": "result_99.00_percentile_latency_ns", "value": 2500000}',
        ':::MLLOG {"key": "early_stopping_result", "value": " * Run unsuccessful.  * More."}',
        "a line that is not a log entry",
        ":::MLLOG {broken json",
    ])
    outcome = loadgen.Outcome(loadgen.parse_detail(text))
    assert not outcome.valid and not outcome.early_stopping_met
    assert outcome.seconds("result_99.00_percentile_latency_ns") == pytest.approx(2.5e-3)
    assert outcome.early_stopping == "* Run unsuccessful. * More."
    assert outcome.kept()["result_validity"] == "INVALID"


class FakeLoadGen:
    """What the SUT calls of mlperf_loadgen: responses and their completion."""

    def __init__(self) -> None:
        self.completed: list[int] = []
        self.done = threading.Event()

    def QuerySampleResponse(self, sid, data, size):
        return sid

    def QuerySamplesComplete(self, responses):
        self.completed.extend(responses)


def _samples(ids):
    return [SimpleNamespace(id=i, index=i % 4) for i in ids]


def test_the_sut_serves_queries_in_batches_and_pads_none_of_the_work_away() -> None:
    lg = FakeLoadGen()
    calls: list[Sequence[int]] = []
    ticks = iter(range(1000))
    with QueueSUT(lg, calls.append, batch=3, clock=lambda: float(next(ticks))) as sut:
        sut.issue(_samples([10, 11, 12, 13, 14]))  # an offline-style query of five
        sut.issue(_samples([20]))
    assert lg.completed == [10, 11, 12, 13, 14, 20]
    assert calls == [[2, 3, 0], [1, 2], [0]]  # batches of at most three
    assert len(sut.query_latencies) == 2 and len(sut.service_times) == 3
    assert all(t > 0 for t in sut.query_latencies) and sut.error is None


def test_an_engine_error_still_completes_every_sample_and_is_kept() -> None:
    lg = FakeLoadGen()

    def broken(indices):
        raise RuntimeError("device lost")

    with QueueSUT(lg, broken, batch=1) as sut:
        sut.issue(_samples([1, 2]))
    assert lg.completed == [1, 2]
    assert isinstance(sut.error, RuntimeError) and str(sut.error) == "device lost"
