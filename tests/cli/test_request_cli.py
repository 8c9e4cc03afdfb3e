"""A run keeps its request: `show --request` prints it as JSON, `run --request FILE` runs
it again, `accelbench.run(...)` runs one from Python, and the reports show it; never a
secret. The worker is a scripted fake."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import accelbench
from accelbench.core.request import RequestError, RunRequest
from accelbench.errors import EXIT_USAGE, UserError
from accelbench.store import Store
from scripted_worker import ScriptedWorker, run_cli, scripted_sessions

RUN = ["run", "--bench", "launch", "--device", "cpu", "--no-report", "--max-time", "0.5"]


@pytest.fixture(autouse=True)
def scripted(monkeypatch, store_path):
    yield scripted_sessions(monkeypatch)
    ScriptedWorker.reset()


def _stored_request(capsys, monkeypatch, run: str = "latest") -> str:
    assert run_cli(monkeypatch, "show", run, "--request") == 0
    return str(capsys.readouterr().out)


def test_a_run_keeps_the_request_its_options_made(monkeypatch, capsys) -> None:
    assert run_cli(monkeypatch, *RUN) == 0
    capsys.readouterr()
    printed = _stored_request(capsys, monkeypatch)
    assert RunRequest.from_json(printed) == RunRequest(
        benches=("launch",), device="cpu", timing={"max_time": 0.5}, no_report=True)
    with Store.open(create=False) as store:
        (record,) = store.list_runs()
    assert record.argv[0] == "run"  # the command line is kept too, for people


def test_run_request_file_runs_the_same_request_again(monkeypatch, capsys,
                                                      tmp_path: Path) -> None:
    assert run_cli(monkeypatch, *RUN) == 0
    capsys.readouterr()
    first = _stored_request(capsys, monkeypatch)
    path = tmp_path / "request.json"
    path.write_text(first)
    ScriptedWorker.asked = []
    assert run_cli(monkeypatch, "run", "--request", str(path), "--json") == 0
    again = json.loads(capsys.readouterr().out)
    assert ScriptedWorker.asked == ["launch mode=eager"] * 3
    assert _stored_request(capsys, monkeypatch, again["run_id"]) == first

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(first.encode())))
    assert run_cli(monkeypatch, "run", "--request", "-") == 0


def test_a_request_file_is_checked_before_anything_runs(monkeypatch, capsys,
                                                        tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    cases = [
        ('{"format": 1, "benches": ["gemm"], "threads": 0}', "request.json.threads"),
        ('{"format": 1, "benches": ["nope"]}', "unknown benchmark 'nope'"),
        ("not json", "not a JSON request"),
        ('{"format": 1, "profile": {}}', "a profile request"),
    ]
    for text, message in cases:
        path.write_text(text)
        assert run_cli(monkeypatch, "run", "--request", str(path)) == EXIT_USAGE
        assert message in capsys.readouterr().err
    assert run_cli(monkeypatch, "run", "--request", str(tmp_path / "missing.json")) \
        == EXIT_USAGE
    assert "cannot read --request" in capsys.readouterr().err
    path.write_text(RunRequest(benches=("launch",)).to_json())
    assert run_cli(monkeypatch, "run", "--request", str(path), "--dtype", "fp32") \
        == EXIT_USAGE
    assert "leave out --dtype" in capsys.readouterr().err
    assert ScriptedWorker.asked == []
    with Store.open() as store:
        assert store.list_runs() == []


def test_show_request_of_a_run_without_one_says_so(monkeypatch, capsys) -> None:
    with Store.open() as store:
        store.begin_run(fingerprint={}, fingerprint_id="f", generation_key="g", device="cpu",
                        suite=None, argv=["validate"], host="h", accelbench_version="0")
    assert run_cli(monkeypatch, "show", "latest", "--request") == EXIT_USAGE
    assert "has no stored request" in capsys.readouterr().err


def test_no_secret_is_stored_with_a_request() -> None:
    secret = "s3cret-pw"
    request = RunRequest(overrides={"endpoint": (f"postgresql://u:{secret}@h/db",)})
    with Store.open() as store:
        run_id = store.begin_run(fingerprint={}, fingerprint_id="f", generation_key="g",
                                 device="cpu", suite=None, argv=["run"], host="h",
                                 accelbench_version="0", request=request.to_dict())
        stored = store.load_run(run_id).record.request
        raw = store._query("SELECT request FROM runs")[0][0]
    assert stored is not None and secret not in json.dumps(stored) and secret not in raw
    assert "***" in stored["overrides"]["endpoint"][0]


def test_the_python_api_runs_a_request_and_stores_it(tmp_path: Path) -> None:
    store = tmp_path / "api.sqlite"
    finished = accelbench.run(benches=("launch",), device="cpu", no_report=True, store=store)
    assert finished.outcome.status == "complete" and finished.report is None
    assert [m.case.benchmark for m in finished.outcome.measurements] == ["launch"]
    with Store.open(store, create=False) as opened:
        record = opened.load_run(finished.outcome.run_id).record
    assert record.request is not None
    assert RunRequest.from_dict(dict(record.request)).benches == ("launch",)
    assert accelbench.run(RunRequest(benches=("launch",), device="cpu", no_report=True),
                          store=store).outcome.run_id != finished.outcome.run_id


def test_the_python_api_refuses_bad_input_before_anything_runs(tmp_path: Path) -> None:
    store = tmp_path / "api.sqlite"
    with pytest.raises(UserError, match="unexpected keyword argument 'bench'"):
        accelbench.run(bench=("launch",), store=store)
    with pytest.raises(RequestError, match=r"request\.benches: expected a list"):
        accelbench.run(benches="launch", store=store)
    with pytest.raises(UserError, match="unknown benchmark 'nope'"):
        accelbench.run(benches=("nope",), store=store)
    assert not store.exists() and ScriptedWorker.asked == []


def test_the_report_shows_what_the_run_was_asked(monkeypatch, capsys, tmp_path) -> None:
    assert run_cli(monkeypatch, *RUN) == 0
    capsys.readouterr()
    page = tmp_path / "run.md"
    assert run_cli(monkeypatch, "report", "latest", "-o", str(page)) == 0
    text = page.read_text()
    assert "## Request" in text and '| benches | ["launch"] |' in text
    html = tmp_path / "run.html"
    assert run_cli(monkeypatch, "report", "latest", "-o", str(html)) == 0
    assert "<summary>Request</summary>" in html.read_text()
