"""`accelbench ab`'s runner (runner.ab through app.ab): two stacks measured in pairs of
processes in alternating order, each case stopped once decided, both sides stored as runs
linked by the A/B's id, the verdicts read back from them; budget, failures and Ctrl-C.
The workers are fakes whose per-process figure is drawn: a known speed per side, a known
noise, so the verdicts are known."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from ab_fakes import Sides, factory
from accelbench import app
from accelbench.analysis.ab import AbCase, find_ab, pairs_in
from accelbench.core.registry import Benchmark, Registry
from accelbench.core.request import AbRequest, RunRequest, Stack
from accelbench.core.sequential import (
    FASTER,
    INCONCLUSIVE,
    PAIR_VALUES,
    SAME,
    SLOWER,
    PairedVerdict,
)
from accelbench.errors import EXIT_CASE_FAILED, EXIT_INCONCLUSIVE, EXIT_INTERRUPTED, UserError
from accelbench.runner.ab import _Case, run_ab
from accelbench.runner.plan import validate
from accelbench.store import Store
from accelbench.store.location import parse_location

REGISTRY = Registry([Benchmark(name, "micro", "test", "test_ab:_noop", ())
                     for name in ("a", "b", "c")])


def _noop(ctx, params):  # pragma: no cover - the fake worker measures instead
    raise AssertionError("not run")


@pytest.fixture(autouse=True)
def _sides():
    Sides.reset()
    yield
    Sides.reset()


def _case() -> _Case:
    """The runner's record of one case with no pairs yet, for its rules tested alone."""

    class Planned:
        class benchmark:
            distributed = False

    return _Case(Planned())  # type: ignore[arg-type]


def _verdict(case: AbCase) -> PairedVerdict:
    assert case.verdict is not None, case.reason
    return case.verdict


def _request(benches=("a", "b", "c"), **ab: Any) -> RunRequest:
    settings = {"max_rounds": 12, **ab}
    return RunRequest(command="ab", benches=benches, timing={"max_time": 0.01},
                      ab=AbRequest(**settings))


def _ab(store_path: Path, request: RunRequest, **kwargs: Any) -> app.AbFinished:
    request = request.replace(no_report=True)
    return app.ab(request, parse_location(store_path), registry=REGISTRY,
                  worker_factory=factory, **kwargs)


def test_identical_stacks_are_decided_same_and_stored_as_two_linked_runs(store_path) -> None:
    finished = _ab(store_path, _request())
    result = finished.result
    assert [c.outcome for c in result.cases] == [SAME, SAME, SAME]
    assert all(3 <= _verdict(c).pairs < 12 for c in result.cases)  # stopped once decided
    assert finished.outcome.stopped == "done"
    assert finished.exit_code() == 0 and finished.exit_code(gate=0.05) == 0
    with Store.open(store_path) as store:
        found = find_ab(store, result.b.record.id)
        assert found.id == result.id == finished.outcome.id
        assert (found.a.record.id, found.b.record.id) == (result.a.record.id,
                                                           result.b.record.id)
        for side in ("a", "b"):
            run = store.load_run(getattr(result, side).record.id)
            stored = run.record.request
            assert stored is not None and stored["command"] == "ab"
            assert stored["ab"]["id"] == result.id and stored["ab"]["side"] == side
            assert run.fingerprint["environment"]["PYTORCH_FAKE_STACK"] == side
            for m in run.measurements:
                values = m.details[PAIR_VALUES]
                assert len(values) == m.details["ab_rounds"] == m.details["processes"]
        # The verdicts read back are those printed.
        again = pairs_in([store.load_run(result.a.record.id),
                          store.load_run(result.b.record.id)])[0]
        assert [c.to_dict() for c in again.cases] == [c.to_dict() for c in result.cases]


def test_pairs_run_back_to_back_in_alternating_order(store_path) -> None:
    # min effect 0: never "same" (hopeless from two pairs on, as nothing differs): the
    # first two rounds measure every case
    _ab(store_path, _request(max_rounds=4, min_effect=0.0))
    rounds = [Sides.asked[i:i + 6] for i in range(0, 12, 6)]
    assert len(Sides.asked) >= 12
    for number, asked in enumerate(rounds):
        for offset, bench in enumerate(("a", "b", "c")):
            pair = asked[2 * offset:2 * offset + 2]
            first = "a" if (number + offset) % 2 == 0 else "b"
            assert pair == [(first, bench), ({"a": "b", "b": "a"}[first], bench)]


def test_a_real_slowdown_is_slower_and_fails_the_gate(store_path) -> None:
    Sides.speed = {"b": 0.8, "c": 1.25}
    finished = _ab(store_path, _request(fail_on_regression=0.1))
    verdicts = {c.key.split(":")[0] if ":" in c.key else c.label.split()[0]: c
                for c in finished.result.cases}
    assert verdicts["a"].outcome == SAME
    assert verdicts["b"].outcome == SLOWER
    assert _verdict(verdicts["b"]).change == pytest.approx(-0.2, abs=0.03)
    assert verdicts["c"].outcome == FASTER
    assert finished.exit_code(gate=0.1) == EXIT_CASE_FAILED
    assert finished.exit_code(gate=0.3) == 0


def test_the_budget_ends_undecided_cases_as_inconclusive_with_what_would_decide(
        store_path) -> None:
    Sides.sigma = 0.2
    ticks = iter(range(0, 10_000, 10))
    finished = _ab(store_path, _request(budget=45.0), clock=lambda: float(next(ticks)))
    assert finished.outcome.stopped == "budget"
    cases = finished.result.cases
    assert all(c.outcome == INCONCLUSIVE for c in cases)
    assert all(_verdict(c).pairs_needed is None
               or (_verdict(c).pairs_needed or 0) > _verdict(c).pairs for c in cases)
    assert finished.exit_code(gate=0.05) == EXIT_INCONCLUSIVE
    # Only whole pairs are stored: both sides hold as many processes per case.
    a, b = finished.outcome.a.measurements, finished.outcome.b.measurements
    assert [m.details["ab_rounds"] for m in a] == [m.details["ab_rounds"] for m in b]


def test_a_case_failing_on_one_side_stops_there_and_the_others_go_on(store_path) -> None:
    Sides.fail_b = {"b"}
    finished = _ab(store_path, _request())
    by_bench = {c.label.split()[0]: c for c in finished.result.cases}
    assert by_bench["b"].verdict is None and "failed in B" in by_bench["b"].reason
    assert by_bench["a"].outcome == SAME and by_bench["c"].outcome == SAME
    assert sum(1 for side, bench in Sides.asked if bench == "b") == 2  # one pair only
    assert finished.exit_code() == EXIT_CASE_FAILED
    assert finished.exit_code(gate=0.05) == EXIT_INCONCLUSIVE  # no evidence is no pass


def test_ctrl_c_keeps_the_whole_pairs_and_ends_both_runs_interrupted(store_path) -> None:
    Sides.interrupt_at = 6 * 2 + 3  # in the third round, after its first case's pair
    finished = _ab(store_path, _request())
    assert finished.outcome.stopped == "interrupted"
    assert finished.exit_code() == EXIT_INTERRUPTED
    for outcome in (finished.outcome.a, finished.outcome.b):
        assert outcome.interrupted
        assert sorted(m.details["ab_rounds"] for m in outcome.measurements) == [2, 2, 3]


def test_each_side_gets_its_own_variables_over_the_cases(store_path) -> None:
    request = _request(benches=("a",), b=Stack(env=(("PYTORCH_TUNABLEOP_ENABLED", "1"),)))
    finished = _ab(store_path, request)
    with Store.open(store_path) as store:
        env_b = store.load_run(finished.result.b.record.id).fingerprint["environment"]
        env_a = store.load_run(finished.result.a.record.id).fingerprint["environment"]
    assert env_b.get("PYTORCH_TUNABLEOP_ENABLED") == "1"
    assert "PYTORCH_TUNABLEOP_ENABLED" not in env_a


def test_a_request_that_is_no_ab_is_refused_before_anything_starts(store_path) -> None:
    with pytest.raises(UserError, match="not an A/B request"):
        app.ab(RunRequest(benches=("a",)), parse_location(store_path),
               registry=REGISTRY)
    with pytest.raises(UserError, match="accelbench ab --request"):
        app.run(_request(), parse_location(store_path), registry=REGISTRY)
    with pytest.raises(UserError, match="leave out --repeat"):
        app.ab(_request().replace(repeat=2), parse_location(store_path),
               registry=REGISTRY)
    with pytest.raises(UserError, match="no such Python"):
        app.ab(_request(a=Stack(python="/nonexistent/python")),
               parse_location(store_path), registry=REGISTRY)
    assert not store_path.exists()


def test_run_ab_without_settings_is_refused(store_path) -> None:
    with Store.open(store_path, create=True) as store, pytest.raises(UserError):
        run_ab(validate(RunRequest(benches=("a",)), REGISTRY), store)


def test_the_ab_report_and_json_hold_the_verdicts(store_path, tmp_path) -> None:
    request = _request(benches=("a",)).replace(report=str(tmp_path / "ab.md"))
    finished = app.ab(request, parse_location(store_path), registry=REGISTRY,
                      worker_factory=factory)
    assert finished.report == tmp_path / "ab.md"
    text = (tmp_path / "ab.md").read_text()
    assert f"A/B {finished.result.id}" in text and "same" in text
    data = json.loads(json.dumps(finished.result.to_dict()))
    assert data["cases"][0]["verdict"] == SAME and data["run_b"] == finished.result.b.record.id


def test_a_secret_in_a_stacks_variables_is_never_stored_or_shown(store_path, tmp_path) -> None:
    secret = "s3cr3t-t0ken-value"
    request = _request(benches=("a",), b=Stack(env=(("HF_TOKEN", secret),
                                                    ("PYTORCH_X", "shown"))))
    finished = app.ab(request.replace(report=str(tmp_path / "ab.html")),
                      parse_location(store_path), registry=REGISTRY, worker_factory=factory)
    assert secret not in finished.result.label("b") and "PYTORCH_X=shown" in \
        finished.result.label("b")
    for path in store_path.parent.rglob("*"):  # the store, its journal, its reports
        assert not path.is_file() or secret.encode() not in path.read_bytes(), path
    assert secret not in (tmp_path / "ab.html").read_text()
    with Store.open(store_path) as store:
        stored = store.load_run(finished.result.b.record.id).record.request
    assert stored is not None
    env = stored["ab"]["b"]["env"]
    assert env == [["HF_TOKEN", "***"], ["PYTORCH_X", "shown"]]


def test_the_published_site_has_a_page_of_the_ab_pairs(store_path, tmp_path) -> None:
    from accelbench.report.site.build import publish

    Sides.speed = {"b": 0.8}
    finished = _ab(store_path, _request(benches=("a", "b")))
    with Store.open(store_path) as store:
        publish(store, tmp_path / "site")
    page = (tmp_path / "site" / "ab.html").read_text()
    assert f"A/B {finished.result.id}" in page
    assert "slower" in page and "same" in page
    assert f"runs/{finished.result.b.record.id}.html" in page or \
        finished.result.b.record.id in page
    assert '<svg' in page


def test_history_marks_each_side_of_an_ab(store_path) -> None:
    from accelbench.analysis.history import history
    from accelbench.report.analysis_tables import history_tables

    finished = _ab(store_path, _request(benches=("a",)))
    with Store.open(store_path) as store:
        runs = [store.load_run(r.id) for r in store.list_runs()]
    (series,) = history(runs, finished.result.cases[0].key)
    marks = {p.run_id: p.ab for p in series.points}
    assert marks == {finished.result.a.record.id: f"A of A/B {finished.result.id}",
                     finished.result.b.record.id: f"B of A/B {finished.result.id}"}
    (table,) = history_tables([series])
    assert all(f"of A/B {finished.result.id}" in row[-1] for row in table.rows)
    assert series.points[0].to_dict()["ab"] is not None


def test_a_case_too_noisy_for_the_rounds_left_stops_early_as_inconclusive(store_path) -> None:
    Sides.sigma = 0.5  # pairs that would need thousands of rounds
    finished = _ab(store_path, _request(benches=("a",), max_rounds=20))
    (case,) = finished.result.cases
    assert case.outcome == INCONCLUSIVE
    verdict = _verdict(case)
    # hopeless even at a quarter of its noise at two pairs, or half from three, before
    # the FUTILE_AFTER (5) rule would have stopped it
    assert 2 <= verdict.pairs < 5
    assert verdict.pairs_needed is None or verdict.pairs_needed > 80
    assert finished.outcome.stopped == "done"


def test_a_futile_case_the_rest_of_the_budget_could_decide_alone_goes_on() -> None:
    from accelbench.core.measurement import Figure
    from accelbench.runner.ab import _futile, _revive

    class Part:
        def __init__(self, value: float) -> None:
            self.primary = Figure("throughput", value, "item/s", True)

    def stopped(b: list[float], cost: float) -> _Case:
        case = _case()
        case.shares, case.cost = 1, cost
        parts: Any = {"a": [Part(1.0)] * len(b), "b": [Part(x) for x in b]}
        case.parts = parts
        case.done = True  # stopped as futile: done, not stored
        return case

    ab = AbRequest(max_rounds=20, min_effect=0.05, budget=100.0)
    # ±3% between pairs: about 8 pairs decide it. No round was left for it while the
    # others shared the budget (futile there); 60 s at 4 s a pair gives it alone 18
    quiet = stopped([1.03, 0.97, 1.0], cost=4.0)
    assert _futile(quiet, ab, reach=3)
    # ±40%: hopeless whatever it is given
    wild = stopped([1.5, 0.7, 1.0], cost=4.0)
    assert _revive([quiet, wild], ab, elapsed=40.0)
    assert (quiet.done, quiet.revived) == (False, True)
    assert (wild.done, wild.futile, wild.revived) == (True, True, False)
    # with the budget spent, or none given, nothing goes on
    again = stopped([1.03, 0.97, 1.0], cost=4.0)
    assert not _revive([again], ab, elapsed=99.0)
    assert not _revive([again], dataclasses.replace(ab, budget=None), elapsed=0.0)
    assert again.done and not again.revived


def test_a_noisy_case_that_more_rounds_could_decide_is_not_stopped_at_three_pairs() -> None:
    from accelbench.core.request import AbRequest
    from accelbench.runner.ab import _futile

    class Part:
        def __init__(self, value: float) -> None:
            from accelbench.core.measurement import Figure

            self.primary = Figure("throughput", value, "item/s", True)

    ab = AbRequest(max_rounds=20, min_effect=0.05)
    # ±3% between pairs: about 8 pairs decide it, within max_rounds
    case = _case()
    case.shares = 1
    parts: Any = {"a": [Part(1.0), Part(1.0), Part(1.0)],
                  "b": [Part(1.03), Part(0.97), Part(1.0)]}
    case.parts = parts
    assert not _futile(case, ab)
    # ±40%: hopeless within 20 rounds even were its noise half that
    parts["b"] = [Part(1.5), Part(0.7), Part(1.0)]
    assert _futile(case, ab)
    # at two pairs, only a case hopeless even at a quarter of its noise stops
    two: Any = {"a": [Part(1.0), Part(1.0)], "b": [Part(1.03), Part(0.97)]}
    case.parts = two
    assert not _futile(case, ab)
    two["b"] = [Part(1.5), Part(0.6)]
    assert _futile(case, ab)


def test_a_case_the_gate_could_still_pass_goes_on_where_same_is_out_of_reach() -> None:
    from accelbench.core.measurement import Figure
    from accelbench.runner.ab import _futile

    class Part:
        def __init__(self, value: float) -> None:
            self.primary = Figure("latency", value, "s", False)

    def case_of(b: list[float]) -> _Case:
        case = _case()
        case.shares = 15  # one of the fifteen cases of a quick suite's A/A
        parts: Any = {"a": [Part(1.0)] * len(b), "b": [Part(x) for x in b]}
        case.parts = parts
        return case

    same_only = AbRequest(max_rounds=10, min_effect=0.02)
    gated = AbRequest(max_rounds=10, min_effect=0.02, fail_on_regression=0.05)
    # ±5% between pairs: "same within 2%" needs far more than ten pairs, "not 5% slower"
    # (the gate's question) fewer
    noisy = case_of([1.06, 0.95, 1.0])
    assert _futile(noisy, same_only) and not _futile(noisy, gated)
    # ±10%: the gate cannot be passed within ten pairs either
    noisier = case_of([1.10, 0.90, 1.01])
    assert _futile(noisier, same_only) and _futile(noisier, gated)


def test_the_time_left_is_the_rounds_left_at_the_pace_so_far_within_the_budget() -> None:
    from accelbench.runner.ab import _left

    assert _left(AbRequest(max_rounds=10), 2, 60.0, done=False) == 240.0
    assert _left(AbRequest(max_rounds=10, budget=100.0), 2, 60.0, done=False) == 40.0
    assert _left(AbRequest(max_rounds=10, budget=50.0), 2, 60.0, done=False) == 0.0
    assert _left(AbRequest(max_rounds=10), 2, 60.0, done=True) == 0.0


def test_a_benchmark_with_a_protocol_of_its_own_is_paired_in_sequence_unpinned(
        store_path) -> None:
    from ab_fakes import FakeStackWorker
    from accelbench.core.sequential import IN_SEQUENCE, IN_TURNS, PAIRING
    from accelbench.report.ab_tables import ab_tables

    turns: list[tuple[str, object]] = []

    class TakingTurns(FakeStackWorker):
        """A worker that can be sent a case and asked later, as real ones are."""

        def send(self, message: Any) -> None:
            turns.append((message.planned.case.benchmark, message.turns))
            self._reply = self.ask(message, 5.0)

        def ready(self) -> bool:
            return True

        def receive(self, timeout: float) -> Any:
            return self._reply

    registry = Registry([Benchmark("a", "micro", "test", "test_ab:_noop", ()),
                         Benchmark("own", "micro", "test", "test_ab:_noop", (),
                                   interleaves=False)])
    request = _request(benches=("a", "own"), max_rounds=3).replace(no_report=True)
    finished = app.ab(request, parse_location(store_path), registry=registry,
                      worker_factory=lambda side: lambda env: TakingTurns(side, env))
    assert {bench for bench, spec in turns} == {"a"}  # "own" was asked, one after the other
    assert all(spec is not None for _, spec in turns)
    asked_own = [side for side, bench in Sides.asked if bench == "own"]
    assert len(asked_own) == 2 * finished.result.cases[1].verdict.pairs  # type: ignore[union-attr]
    pairing = {c.label.split()[0]: c.pairing for c in finished.result.cases}
    assert pairing == {"a": IN_TURNS, "own": IN_SEQUENCE}
    with Store.open(store_path) as store:
        run = store.load_run(finished.result.a.record.id)
        assert {m.case.benchmark: m.details[PAIRING] for m in run.measurements} == {
            "a": IN_TURNS, "own": IN_SEQUENCE}
    (table, *_) = ab_tables(finished.result)
    assert any("one after the other" in note and "own" in note for note in table.notes)


def test_the_budget_left_is_costed_at_each_undecided_cases_last_pair() -> None:
    from accelbench.runner.ab import _reachable

    cases = [_case() for _ in range(3)]
    for case, cost in zip(cases, (10.0, 20.0, 30.0), strict=True):
        case.cost = cost
    assert _reachable(cases, AbRequest(max_rounds=20), 3, 100.0) == 20  # no budget
    # 300 s left, a round of the three costs 60 s: five more rounds
    assert _reachable(cases, AbRequest(max_rounds=20, budget=400.0), 3, 100.0) == 8
    cases[2].done = True  # a round of the others costs 30 s: ten more
    assert _reachable(cases, AbRequest(max_rounds=20, budget=400.0), 3, 100.0) == 13
    assert _reachable(cases, AbRequest(max_rounds=10, budget=400.0), 3, 100.0) == 10
    assert _reachable(cases, AbRequest(max_rounds=10, budget=50.0), 3, 100.0) == 3


def test_a_case_the_budget_cannot_decide_gives_its_rounds_to_one_it_can(store_path) -> None:
    ticks = iter(range(0, 100_000))

    def clock() -> float:  # every call a second later: a pair takes a few
        return float(next(ticks))

    noisy = Sides.rng

    class Noisier:  # "a": ±0.7% a pair, decided in a few; "b", "c": ±5%, about 14
        def gauss(self, mu: float, sigma: float) -> float:
            return noisy.gauss(mu, 0.035 if Sides.asked[-1][1] in ("b", "c") else 0.005)

    Sides.rng = Noisier()  # type: ignore[assignment]
    finished = _ab(store_path, _request(max_rounds=20, budget=45.0), clock=clock)
    outcome = {c.label.split()[0]: c for c in finished.result.cases}
    assert outcome["a"].outcome == SAME
    for name in ("b", "c"):
        # more pairs than the budget leaves, though at half their noise fewer than
        # max_rounds: stopped before FUTILE_AFTER (5), their rounds left to "a"
        assert outcome[name].outcome == INCONCLUSIVE
        assert _verdict(outcome[name]).pairs < 5


def test_a_case_whose_set_up_dominates_its_pair_samples_longer_from_its_second() -> None:
    from accelbench.core.sequential import IN_SEQUENCE
    from accelbench.runner.ab import SAMPLING_CAP, _sampling_time

    class Part:
        def __init__(self, duration: float) -> None:
            self.duration_s = duration

    def case_of(duration: float) -> _Case:
        case = _case()
        parts: Any = {"a": [Part(duration)], "b": [Part(duration + 0.5)]}
        case.parts = parts
        return case

    assert _sampling_time(_case(), 1.0) == 1.0  # the first pair: as asked
    # each process took both set-ups (in turn) and the 1 s both sampled over
    quick = case_of(1.6)
    assert _sampling_time(quick, 1.0) == 1.0
    model = case_of(9.0)  # 4 s of set-up a process
    assert _sampling_time(model, 1.0) == pytest.approx(4.0)
    model.parts["a"].append(Part(30.0))  # type: ignore[arg-type]
    assert _sampling_time(model, 1.0) == pytest.approx(4.0)  # fixed from then on
    assert _sampling_time(case_of(100.0), 1.0) == SAMPLING_CAP
    apart = case_of(9.0)
    apart.pairing = IN_SEQUENCE  # its processes do not share a sampling time
    assert _sampling_time(apart, 1.0) == 1.0


def test_generations_take_an_ab_between_two_installed_releases_as_its_pairs(
        store_path) -> None:
    from accelbench.analysis.generations import PAIRED_METHOD, generations
    from accelbench.report.analysis_tables import generations_table

    Sides.torch = {"a": "2.9.1", "b": "2.14.1"}
    Sides.speed = {"a": 1.25, "b": 1.0}
    finished = _ab(store_path, _request(benches=("a", "b")))
    with Store.open(store_path) as store:
        runs = [store.load_run(r.id) for r in store.list_runs()]
    result = generations(runs, family="micro", mode=None)
    old, new = result.keys
    assert old.endswith("PyTorch 2.9.1") and new.endswith("PyTorch 2.14.1")
    verdicts = {c.label.split()[0]: _verdict(c) for c in finished.result.cases}
    rows = {r.case.benchmark: r for r in result.rows}
    for bench in ("a", "b"):
        cell = rows[bench].cells[new]
        estimate = cell.versus_baseline
        assert estimate is not None and estimate.method == PAIRED_METHOD
        v = verdicts[bench]
        assert (estimate.ratio, estimate.low, estimate.high) == (v.speed, v.speed_low,
                                                                 v.speed_high)
        assert cell.note.startswith(f"A/B {finished.result.id}: {v.pairs} pairs")
    speed = rows["a"].cells[new].versus_baseline
    assert speed is not None and speed.ratio == pytest.approx(1.25, rel=0.03)
    # the baseline the other way round: the A/B's speed turned round
    other = generations(runs, family="micro", mode=None, baseline="*2.14.1")
    back = {r.case.benchmark: r for r in other.rows}["a"].cells[old].versus_baseline
    assert back is not None and back.ratio == pytest.approx(1 / verdicts["a"].speed)
    table = generations_table(result)
    assert "(paired)" in " ".join(str(cell) for row in table.rows for cell in row)
    assert any(finished.result.id in note for note in table.notes)


def test_each_call_frees_its_share_of_alpha_for_the_cases_still_undecided(
        monkeypatch) -> None:
    from accelbench.core.measurement import Figure
    from accelbench.core.sequential import judge
    from accelbench.runner import ab as runner_ab

    class Part:
        status = "ok"

        def __init__(self, value: float) -> None:
            self.primary = Figure("throughput", value, "item/s", True)

    def case(b: list[float]) -> _Case:
        made = _case()
        parts: Any = {"a": [Part(1.0) for _ in b], "b": [Part(x) for x in b]}
        made.parts = parts
        return made

    # of four cases, "x" and "y" clearly slower; "z" a little, its pairs calling it at
    # α / 2 but not at α / 4; "w" undecided
    slow = [0.50, 0.51, 0.49, 0.50]
    z = [0.95, 0.96, 0.97, 0.955]
    assert judge([1.0] * 4, z, True, 0.02, 0.05, cases=4, horizon=12).verdict != SLOWER
    assert judge([1.0] * 4, z, True, 0.02, 0.05, cases=2, horizon=12).verdict == SLOWER
    cases = [case(slow), case(slow), case(z), case([1.0, 1.2, 0.8, 1.1])]
    stored: list[int] = []

    def record(index: int, c: _Case, sides: Any, valid: Any) -> None:
        stored.append(index)
        c.done = True

    monkeypatch.setattr(runner_ab, "_record", record)
    runner_ab._judge(cases, [], None, AbRequest(max_rounds=12, min_effect=0.02))  # type: ignore[arg-type]
    assert stored == [0, 1, 2]
    assert [c.called for c in cases] == [True, True, True, False]
    assert [c.shares for c in cases] == [4, 4, 2, 1]


def test_each_case_is_stored_with_the_shares_it_was_judged_with(store_path) -> None:
    from accelbench.core.sequential import SHARES

    Sides.speed = {"a": 0.5, "b": 0.5, "c": 0.96}
    finished = _ab(store_path, _request(max_rounds=12, min_effect=0.02))
    assert [c.outcome for c in finished.result.cases] == [SLOWER, SLOWER, SLOWER]
    with Store.open(store_path) as store:
        runs = [store.load_run(getattr(finished.result, side).record.id)
                for side in ("a", "b")]
    shares = [m.details[SHARES] for m in runs[0].measurements]
    assert all(isinstance(n, int) and 1 <= n <= 3 for n in shares)
    # read back, each case is judged with the shares it was judged with
    again = pairs_in(runs)[0]
    assert [c.to_dict()["call_alpha"] for c in again.cases] == [
        pytest.approx(0.05 / n) for n in shares]
    assert [x.to_dict() for x in again.cases] == [
        x.to_dict() for x in finished.result.cases]


@pytest.mark.parametrize("stored", [None, 0, 4, True, 2.0, "2", -1])
def test_shares_that_no_ab_of_these_cases_could_have_judged_with_are_all_of_them(
        stored) -> None:
    from types import SimpleNamespace

    from accelbench.analysis.ab import _shares
    from accelbench.core.sequential import SHARES

    measured: Any = SimpleNamespace(details={} if stored is None else {SHARES: stored})
    assert _shares(measured, 3) == 3
    measured.details[SHARES] = 2
    assert _shares(measured, 3) == 2
