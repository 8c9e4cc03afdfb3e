"""`accelbench explain` end to end on a real store, each profile replaced by a fake that
writes a trace: which case, which stacks, in what order, what is stored and what is
refused before anything is profiled."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from accelbench.core.case import Case
from accelbench.core.measurement import Figure
from accelbench.core.request import AbRequest, RunRequest, Stack
from accelbench.errors import EXIT_CASE_FAILED, EXIT_STORE, EXIT_USAGE, UserError
from accelbench.profile.explain_session import ExplainRequest, explain
from accelbench.profile.sides import Profiled, Side, installed_torch
from accelbench.report.explain_tables import digest, explain_tables
from accelbench.store import Store, parse_location
from fakes import stored_measurement

TORCH = installed_torch(None)
GEMM = Case.make("gemm", "v1", "micro", {"shape": 256, "dtype": "fp32", "batch": 1,
                                          "threads": 1}, "cpu")
LAUNCH = Case.make("launch", "v1", "micro", {"mode": "eager"}, "cpu")


def _fingerprint(torch: str | None = TORCH, **env: str) -> dict[str, Any]:
    return {"platform": "cpu", "torch": {"version": torch, "blas": "mkl"},
            "environment": env, "packages": {"numpy": "2.4"},
            "device": {"name": "CPU", "type": "cpu"}}


def _run(store: Store, fingerprint: dict[str, Any], values: dict[Case, float],
         request: RunRequest | None = None, tuning: dict[str, Any] | None = None) -> str:
    run_id = store.begin_run(
        fingerprint=fingerprint, fingerprint_id=json.dumps(fingerprint, sort_keys=True)[:60],
        generation_key="CPU | PyTorch", device="cpu", suite="quick", argv=["run"], host="h",
        accelbench_version="0", request=(request or RunRequest()).to_dict())
    for case, value in values.items():
        store.add_measurement(run_id, stored_measurement(
            case, figures=[Figure("throughput", value, "FLOP/s")],
            details={"tuning": tuning} if tuning else {}))
    store.finish_run(run_id, "complete")
    return run_id


class FakeProfiles:
    """Each call writes a trace in which aten::mm takes `mm_us[side]` per step."""

    def __init__(self, mm_us: dict[str, float]) -> None:
        self.mm_us = mm_us
        self.calls: list[tuple[str, dict[str, Any], dict[str, str]]] = []

    def __call__(self, side: Side, request_file: Path, location: Any, folder: Path,
                 timeout_s: float) -> Profiled:
        self.calls.append((side.name, json.loads(request_file.read_text()),
                           side.environment({"PATH": "/bin", "MKL_CBWR": "AUTO"})))
        path = folder / f"{side.name}{len(self.calls)}.pt.trace.json.gz"
        mm = self.mm_us[side.name]
        events = []
        for step in range(3):
            start = step * 10_000
            events += [
                {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                 "pid": 1, "tid": 1, "ts": start, "dur": mm + 200},
                {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                 "ts": start + 1, "dur": mm,
                 "args": {"Input Dims": [[256, 256], [256, 256]],
                          "Input type": ["float", "float"]}},
                {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1,
                 "ts": start + mm + 2, "dur": 100, "args": {}},
            ]
        path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
        return Profiled(f"profile-{len(self.calls)}", (path,), "complete")


@pytest.fixture
def store(store_path: Path):
    with Store.open(store_path) as opened:
        yield opened


def test_the_case_is_profiled_under_each_runs_stack_in_balanced_order(store, store_path):
    a = _run(store, _fingerprint(), {GEMM: 2e9, LAUNCH: 1.0})
    b = _run(store, _fingerprint(MKL_CBWR="COMPATIBLE"), {GEMM: 1e9, LAUNCH: 1.0})
    fake = FakeProfiles({"a": 1000.0, "b": 3000.0})
    done = explain(ExplainRequest(a, b, rounds=2), store, parse_location(store_path),
                   profile=fake)
    assert [c[0] for c in fake.calls] == ["a", "b", "b", "a"]
    # The run's recorded switches replace this process's: A has none, B its own.
    env = {side: e for side, _, e in fake.calls}
    assert "MKL_CBWR" not in env["a"] and env["b"]["MKL_CBWR"] == "COMPATIBLE"
    assert env["a"]["PATH"] == "/bin"
    # Not told which case: the one B measured worst against A.
    assert done.chosen == "B's largest slowdown against A"
    request = RunRequest.from_dict(fake.calls[0][1], "request")
    assert request.command == "profile" and request.benches == ("gemm",)
    assert request.values["shape"] == (256,) and request.dtypes == ("fp32",)
    assert request.threads == 1 and request.device == "cpu"

    found = done.findings
    assert found["largest"]["name"] == "aten::mm"
    assert found["largest"]["ratio"] == pytest.approx(3.0)
    assert found["largest"]["consistent"] is True
    assert found["stored"]["b_worse"] is True
    assert {d["key"] for d in found["stack"]} == {"environment.MKL_CBWR"}
    assert found["profiles"] == {"a": ["profile-1", "profile-4"],
                                 "b": ["profile-2", "profile-3"]}
    assert "MKL_CBWR=COMPATIBLE" in found["repro"]["b"]["run"]
    assert "aten::mm" in found["summary"]
    (stored,) = store.explanations([b])
    assert stored.findings["largest"]["name"] == "aten::mm" and stored.id == done.id
    assert store.explanations(["nope"]) == []
    assert [type(x).__name__ for x in store.found_for_run(a)] == ["StoredExplanation"]
    # The request files reproduce each side: they read as requests.
    run_file = Path(found["repro"]["b"]["run"].split("--request ")[1])
    assert RunRequest.from_dict(json.loads(run_file.read_text()), "f").command == "run"
    assert (done.folder / "findings.json").is_file()


def test_a_case_given_by_its_label_and_one_that_matches_none(store, store_path):
    a = _run(store, _fingerprint(), {GEMM: 2e9, LAUNCH: 1.0})
    b = _run(store, _fingerprint(), {GEMM: 1e9, LAUNCH: 2.0})
    fake = FakeProfiles({"a": 100.0, "b": 100.0})
    done = explain(ExplainRequest(a, b, case="launch", rounds=1), store,
                   parse_location(store_path), profile=fake)
    assert done.chosen == "given" and fake.calls[0][1]["benches"] == ["launch"]
    assert done.findings["stack"] == []
    with pytest.raises(UserError, match="names no case measured in both runs") as e:
        explain(ExplainRequest(a, b, case="attention"), store, parse_location(store_path),
                profile=fake)
    assert e.value.exit_code == EXIT_USAGE
    with pytest.raises(UserError, match="matches 2 cases"):
        explain(ExplainRequest(a, b, case="m"), store, parse_location(store_path),
                profile=fake)


def test_a_side_whose_interpreter_holds_another_pytorch_is_refused_first(store, store_path):
    a = _run(store, _fingerprint(torch="1.13.0+rocm5.2"), {GEMM: 2e9})
    b = _run(store, _fingerprint(), {GEMM: 1e9})
    fake = FakeProfiles({"a": 1.0, "b": 1.0})
    with pytest.raises(UserError, match=r"PyTorch 1\.13\.0\+rocm5\.2.*give --a") as e:
        explain(ExplainRequest(a, b), store, parse_location(store_path), profile=fake)
    assert e.value.exit_code == EXIT_USAGE
    assert fake.calls == [] and store.explanations() == []


def test_the_sides_of_an_ab_keep_their_stacks(store, store_path):
    stacks = AbRequest(a=Stack(None, ()), b=Stack(None, (("ONEDNN_MAX_CPU_ISA", "SSE41"),)),
                       id="ab-1")
    a = _run(store, _fingerprint(), {GEMM: 2e9},
             RunRequest(command="ab", ab=AbRequest(**{**stacks.__dict__, "side": "a"})))
    b = _run(store, _fingerprint(), {GEMM: 1e9},
             RunRequest(command="ab", ab=AbRequest(**{**stacks.__dict__, "side": "b"})))
    fake = FakeProfiles({"a": 100.0, "b": 200.0})
    done = explain(ExplainRequest(b, rounds=1), store, parse_location(store_path),
                   profile=fake)
    assert done.findings["runs"] == {"a": a, "b": b} and done.findings["ab"] == "ab-1"
    env = {side: e for side, _, e in fake.calls}
    # An A/B's variables go over this process's environment, as `ab` set them.
    assert env["b"]["ONEDNN_MAX_CPU_ISA"] == "SSE41" and env["a"]["MKL_CBWR"] == "AUTO"


def test_tuning_that_differs_is_in_the_findings(store, store_path):
    a = _run(store, _fingerprint(), {GEMM: 2e9},
             tuning={"blas": "hipblaslt", "tunableop": {"applies": True, "enabled": False}})
    b = _run(store, _fingerprint(), {GEMM: 1e9},
             tuning={"blas": "hipblaslt", "tunableop": {"applies": True, "enabled": True}})
    done = explain(ExplainRequest(a, b, rounds=1), store, parse_location(store_path),
                   profile=FakeProfiles({"a": 100.0, "b": 200.0}))
    assert done.findings["tuning"], done.findings
    assert done.findings["gemm"]["b"]["backend"] == "hipblaslt through TunableOp"
    assert done.findings["gemm"]["a"]["backend"] == "hipblaslt"
    gemm_table = next(t for t in explain_tables(done.findings) if t.title.startswith("GEMMs"))
    assert ("B", "back end", "hipblaslt through TunableOp", "") in gemm_table.rows
    assert digest(done.findings).differs == "tuning"


def test_a_failed_profile_stores_no_explanation(store, store_path):
    a = _run(store, _fingerprint(), {GEMM: 2e9})
    b = _run(store, _fingerprint(), {GEMM: 1e9})

    def failing(side: Side, *args: Any) -> Profiled:
        raise UserError(f"the profile of side {side.name.upper()} failed: boom", exit_code=1)

    with pytest.raises(UserError, match="boom") as e:
        explain(ExplainRequest(a, b), store, parse_location(store_path), profile=failing)
    assert e.value.exit_code == EXIT_CASE_FAILED and store.explanations() == []

    def traceless(side: Side, *args: Any) -> Profiled:
        return Profiled("p", (), "failed", ("the case failed",))

    with pytest.raises(UserError, match=r"\(run p\) failed: the case failed"):
        explain(ExplainRequest(a, b), store, parse_location(store_path), profile=traceless)


def test_two_runs_with_no_case_in_common_are_refused(store, store_path):
    a = _run(store, _fingerprint(), {GEMM: 2e9})
    b = _run(store, _fingerprint(), {LAUNCH: 1.0})
    with pytest.raises(UserError, match="no case measured in both"):
        explain(ExplainRequest(a, b), store, parse_location(store_path),
                profile=FakeProfiles({}))
    with pytest.raises(UserError, match="both are"):
        explain(ExplainRequest(a, a), store, parse_location(store_path),
                profile=FakeProfiles({}))


def test_a_run_of_no_ab_alone_is_refused(store, store_path):
    a = _run(store, _fingerprint(), {GEMM: 2e9})
    with pytest.raises(UserError, match="not a side of an A/B"):
        explain(ExplainRequest(a), store, parse_location(store_path), profile=FakeProfiles({}))


def test_stored_findings_that_do_not_read_still_render() -> None:
    hostile: dict[str, Any] = {"case": "x", "runs": [1], "operators": [{"name": 5,
                               "delta_s_per_step": "nan", "ratio": float("inf")}, 3],
                               "stack": {"a": 1}, "repro": {"a": {"run": 7}},
                               "summary": "\udcff", "tuning": "abc", "largest": [1]}
    tables = explain_tables(hostile)
    assert tables[0].rows[0][0] == "5"
    line = digest(hostile)
    assert line.mover == "-" and line.slower is None


def test_explaining_into_a_missing_store_creates_none(tmp_path):
    from accelbench.app import explain as app_explain

    missing = tmp_path / "none.db"
    with pytest.raises(UserError) as e:
        app_explain(ExplainRequest("latest", "latest"), parse_location(missing))
    assert e.value.exit_code == EXIT_STORE and not missing.exists()
