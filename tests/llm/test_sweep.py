"""Sweeps of a serving case: parsing, the SLO judgement of a load, the knee and the
Pareto front, and the points' JSON as a record stores it."""

from __future__ import annotations

import json
import math

import pytest

from accelbench.benchmarks.llm.metrics import SLO
from accelbench.benchmarks.llm.sweep import (
    Sweep,
    SweepPoint,
    knee,
    meets_slo,
    pareto,
    parse_sweep,
    point,
)
from accelbench.core.measurement import Figure


def _p(load: float, user: float | None, device: float | None, meets: bool = True,
       kind: str = "concurrency") -> SweepPoint:
    figures = {k: v for k, v in (("tokens_per_user", user),
                                 ("output_tokens_per_device", device)) if v is not None}
    return SweepPoint(load, kind, figures, meets)


@pytest.mark.parametrize(("text", "sweep"), [
    ("concurrency=1,2,4,8", Sweep("concurrency", (1.0, 2.0, 4.0, 8.0))),
    ("rate=0.5, 1, 2", Sweep("rate", (0.5, 1.0, 2.0))),
    ("rate=1,inf", Sweep("rate", (1.0, math.inf))),
    ("Concurrency=16", Sweep("concurrency", (16.0,))),
    ("concurrency=8,1,4", Sweep("concurrency", (1.0, 4.0, 8.0))),  # lowest first
])
def test_parse_sweep_and_its_text_read_back(text: str, sweep: Sweep) -> None:
    assert parse_sweep(text) == sweep
    assert parse_sweep(str(sweep)) == sweep


@pytest.mark.parametrize("text", ["1,2,4", "load=1,2", "concurrency=1.5", "concurrency=0",
                                  "rate=-1", "rate=1,1", "rate=fast", "rate=", "rate=nan",
                                  "concurrency=inf"])
def test_parse_sweep_refuses_with_one_line(text: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_sweep(text)
    assert "\n" not in str(e.value) and "sweep" in str(e.value)


def test_a_load_meets_the_slo_at_its_p99_with_no_failure() -> None:
    slo = SLO(ttft=0.5, tpot=0.05)
    good = {"ttft_p99": 0.5, "tpot_p99": 0.04, "failed": 0.0}
    assert meets_slo(good, slo)
    assert not meets_slo({**good, "ttft_p99": 0.51}, slo)
    assert not meets_slo({**good, "failed": 1.0}, slo)
    assert not meets_slo({"ttft_p99": 0.1, "failed": 0.0}, slo)  # no TPOT to judge
    assert meets_slo({"failed": 0.0}, SLO())
    figures = [Figure("ttft_p99", 0.3, "s", False), Figure("tpot_p99", 0.06, "s", False),
               Figure("failed", 0.0, "request", False)]
    p = point(4, "concurrency", figures, slo)
    assert not p.meets_slo and p.figures["ttft_p99"] == 0.3 and p.load == 4


def test_the_knee_is_the_highest_load_meeting_the_slo() -> None:
    points = [_p(1, 10, 1), _p(2, 9, 2), _p(8, 5, 3, meets=False), _p(4, 7, 2.5)]
    best = knee(points)
    assert best is not None and best.load == 4
    assert knee([_p(1, 1, 1, meets=False)]) is None
    assert knee([]) is None


def test_the_pareto_front_keeps_the_points_no_other_beats_on_both_axes() -> None:
    a, b, c = _p(1, 100, 10), _p(2, 80, 30), _p(4, 40, 50)
    beaten = _p(3, 70, 25)  # b is better on both
    tie = _p(5, 40, 50)  # the same as c: neither beats the other
    lacking = _p(6, None, 999)
    front = pareto([c, beaten, a, lacking, b, tie])
    assert [p.load for p in front] == [4, 5, 2, 1]
    assert pareto([]) == []


def test_sweep_points_round_trip_through_json() -> None:
    points = [SweepPoint(2.0, "concurrency", {"ttft_p99": 0.25, "failed": 0.0}, True),
              SweepPoint(math.inf, "rate", {}, False)]
    stored = json.loads(json.dumps([p.to_dict() for p in points], allow_nan=False))
    assert [SweepPoint.from_dict(d) for d in stored] == points
    odd = SweepPoint(1.0, "rate", {"ttft_p99": math.nan, "requests": 2.0})
    assert odd.to_dict()["figures"] == {"requests": 2.0}


def test_a_sweep_point_has_a_known_kind() -> None:
    with pytest.raises(ValueError, match="kind"):
        SweepPoint(1.0, "users")
