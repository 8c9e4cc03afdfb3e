"""A family with checks, validate levels, a suite of its own, a command and a Slurm job is
one package (tests/families/checksum) and one line in the registry's list: nothing in
accelbench names it, and every part of it works as accelbench's own families do."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from checksum.family import FAMILY

import accelbench.benchmarks
from accelbench.cli.main import build_parser, main
from accelbench.cli.validate_request import validate_request
from accelbench.core.registry import Registry
from accelbench.core.request import RunRequest
from accelbench.errors import EXIT_OK
from accelbench.runner.plan import load_suite, suite_names

HERE = Path(__file__).parent


@pytest.fixture
def with_checksum(monkeypatch) -> Registry:
    registry = Registry.of([*accelbench.benchmarks.REGISTRY.declared, FAMILY])  # the one line
    monkeypatch.setattr(accelbench.benchmarks, "REGISTRY", registry)
    # The worker imports the family's measure function by its name, as it does ours.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, (str(HERE), os.environ.get("PYTHONPATH")))))
    return registry


def test_the_family_is_named_after_its_package_and_says_what_it_is(with_checksum) -> None:
    assert FAMILY.name == "checksum" and with_checksum.family("checksum") is FAMILY
    assert "checksum" in with_checksum.checks()
    assert with_checksum.get("checksum").check  # its cases will say they are checks
    assert "checksum" in with_checksum.level_checks(1)
    assert "checksum" in suite_names(with_checksum)
    assert [e.bench for e in load_suite("checksum", with_checksum).entries] == ["checksum"]
    assert [c.NAME for c in with_checksum.commands()][-1] == "checksum"
    assert [job.name for job in with_checksum.slurm_jobs()][-1] == "checksum"


def test_list_shows_the_family_and_its_suite(with_checksum, capsys) -> None:
    assert main(["list", "--family", "checksum", "--json"]) == EXIT_OK
    listed = json.loads(capsys.readouterr().out)
    assert [b["name"] for b in listed["benchmarks"]] == ["checksum"]
    assert "checksum" in [s["name"] for s in listed["suites"]]


@pytest.mark.slow
def test_its_command_runs_its_request_and_stores_its_checks(with_checksum, tmp_path,
                                                            capsys) -> None:
    store = str(tmp_path / "results.sqlite")
    assert main(["checksum", "--device", "cpu", "--no-report", "--store", store,
                 "--json"]) == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert out["summary"] == {"pass": 2, "fail": 0, "skip": 0}
    assert sorted(c["case"] for c in out["checks"]) == [
        "checksum algorithm=blake2b bytes=65536 threads=1",
        "checksum algorithm=sha256 bytes=65536 threads=1"]
    # The run keeps the request it was made with: the command's, to be run again.
    assert main(["show", out["run_id"], "--request", "--store", store]) == EXIT_OK
    request = RunRequest.from_json(capsys.readouterr().out)
    assert request.command == "checksum" and request.suite == "checksum"


@pytest.mark.slow
def test_validate_runs_it_as_a_check_and_its_levels_include_it(with_checksum, tmp_path,
                                                               capsys) -> None:
    store = str(tmp_path / "results.sqlite")
    assert main(["validate", "--check", "checksum", "--device", "cpu", "--no-telemetry",
                 "--no-report", "--store", store, "--json"]) == EXIT_OK
    checks = json.loads(capsys.readouterr().out)["checks"]
    assert {c["check"] for c in checks} == {"checksum"}
    assert {c["verdict"] for c in checks} == {"pass"}
    for level in (1, 2, 3):
        args = build_parser().parse_args(["validate", "--level", str(level)])
        assert "checksum" in validate_request(args, with_checksum).benches


@pytest.mark.slow
def test_run_finds_its_suite(with_checksum, tmp_path, capsys) -> None:
    store = str(tmp_path / "results.sqlite")
    assert main(["run", "--suite", "checksum", "-p", "algorithm=md5", "--device", "cpu",
                 "--no-report", "--store", store, "--json"]) == EXIT_OK
    (measured,) = json.loads(capsys.readouterr().out)["measurements"]
    assert measured["case"]["check"] is True and measured["status"] == "ok"


def test_its_slurm_job_hands_every_node_its_command_s_request(with_checksum,
                                                               capsys) -> None:
    from accelbench.slurm.script import END_OF_REQUEST

    assert main(["slurm", "checksum", "--nodes", "2", "--partition", "p", "--print",
                 "--", "--algorithm", "md5", "--device", "cpu"]) == EXIT_OK
    script = capsys.readouterr().out
    # The JSON between the here-document's first line and its end line.
    lines = script.splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith(f"<<'{END_OF_REQUEST}'"))
    request = RunRequest.from_json("\n".join(lines[start + 1:lines.index(END_OF_REQUEST)]))
    assert (request.command, request.benches, request.values) == (
        "checksum", ("checksum",), {"algorithm": ("md5",)})
    assert "-m accelbench checksum" in script
