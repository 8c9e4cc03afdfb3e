"""The health checks through the commands: `accelbench health` on this machine, bad input,
`validate --level`, and a fleet in which one node's health check failed: `diagnose` names
it and writes it to the drain list; `slurm qualify --level` runs the level on each node."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sysfs_tree import GPU0, GPU1, GPU2, gpu_node

from accelbench.benchmarks.health import host_checks, sysfs, topology
from accelbench.benchmarks.health.findings import conclude
from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.core.measurement import CaseFailed, Measurement, from_result
from accelbench.errors import EXIT_CASE_FAILED, EXIT_OK, EXIT_USAGE
from accelbench.slurm.drain import read_drain_list, write_drain_list
from accelbench.store import Store

NODES = ("gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04")
BAD = "gpu-a03"


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("accelbench: error: ")
    return err[0]


@pytest.mark.parametrize(("argv", "fragment"), [
    (["health", "--check", "ecc"], "unknown health check 'ecc' (did you mean gpu-ecc?)"),
    (["health", "--check", ""], "--check: expected a name"),
    (["validate", "--level", "5"], "--level: invalid choice: 5"),
    (["validate", "--level", "1", "--check", "numerics"],
     "--level chooses the checks: give --level or --check, not both"),
    (["validate", "--check", "pcie"], "unknown check 'pcie'"),
    (["slurm", "qualify", "--nodes", "n1", "--partition", "p", "--drain-list", "bad.txt"],
     "--drain-list needs --wait"),
])
def test_bad_input_is_one_line(argv, fragment, capsys, tmp_path) -> None:
    store = tmp_path / "results.sqlite"
    assert main([*argv, "--store", str(store)]) == EXIT_USAGE
    assert fragment in _one_line_error(capsys)
    assert not store.exists()


@pytest.mark.parametrize(("argv", "benches", "seconds", "level"), [
    ([], None, None, None),
    (["--level", "1"], ("health", "gate"), None, 1),
    (["--level", "2"], "suite+copy-matrix+gate+burn-in", 60.0, 2),
    (["--level", "3"], "suite+copy-matrix+gate+stress", 600.0, 3),
    (["--level", "3", "--burn", "900"], "suite+copy-matrix+gate+stress", 900.0, 3),
    (["--level", "4"], "suite+copy-matrix+gate+stress+burn-in", 900.0, 4),
])
def test_a_level_chooses_the_checks_and_the_load(argv, benches, seconds, level) -> None:
    from accelbench.benchmarks import REGISTRY
    from accelbench.benchmarks.qualify.catalog import FIGURES
    from accelbench.cli.main import build_parser
    from accelbench.cli.validate_request import validate_request
    from accelbench.runner.plan import load_suite

    suite = tuple(load_suite("validate").benchmarks())
    request = validate_request(build_parser().parse_args(["validate", *argv]), REGISTRY)
    if benches is None:
        assert request.benches == suite and "health" in suite and "gate" not in suite
    elif isinstance(benches, str):
        assert request.benches == (*suite, *benches.split("+")[1:])
    else:
        assert request.benches == benches
    assert request.values.get("seconds") == (None if seconds is None else (seconds,))
    # The gate check is asked for every figure at the level: the node's GPU model's
    # gates decide which are planned.
    if level is None:
        assert "figure" not in request.values
    else:
        assert request.values["figure"] == FIGURES and request.values["level"] == (level,)


@pytest.mark.slow
def test_health_reads_this_machine_and_stores_every_check(tmp_path) -> None:
    store = tmp_path / "results.sqlite"
    result = subprocess.run([sys.executable, "-m", "accelbench", "health", "--device", "cpu",
                             "--json", "--no-report", "--store", str(store)],
                            capture_output=True, text=True, timeout=600, check=False)
    data = json.loads(result.stdout)
    checks = {c["subject"]: c for c in data["checks"]}
    assert len(checks) == 13 and {c["check"] for c in checks.values()} == {"health"}
    # This host's state decides the verdicts; each is stated, and the exit code follows.
    failed = [c for c in checks.values() if c["verdict"] == "fail"]
    assert result.returncode == (EXIT_CASE_FAILED if failed else EXIT_OK), result.stderr
    assert checks["check=numa"]["verdict"] in ("pass", "fail")
    assert data["findings"] and all(
        f["rule"] and f["level"] in ("pass", "warn", "fail")
        for found in data["findings"].values() for f in found)
    for c in checks.values():
        assert c["verdict"] == "pass" or c["reason"], c
        # A check that ran judged what it read: its findings are stored (an error inside
        # a check would leave none).
        assert c["verdict"] == "skip" or data["findings"][c["case"]], c
    with Store.open(store, create=False) as opened:
        stored = opened.load_run("latest")
    assert {m.case.family for m in stored.measurements} == {"health"}


@pytest.mark.slow
def test_the_stress_and_the_copy_matrix_run_in_workers(tmp_path) -> None:
    store = tmp_path / "results.sqlite"
    result = subprocess.run([sys.executable, "-m", "accelbench", "run", "--bench", "stress",
                             "copy-matrix", "-p", "seconds=2", "-p", "size=128", "-p",
                             "copy_bytes=1M", "-p", "bytes=1M", "-p", "max_sag=0.99",
                             "--device", "cpu", "--json", "--no-report",
                             "--store", str(store)],
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == EXIT_OK, result.stderr
    measured = {m["case"]["benchmark"]: m for m in json.loads(result.stdout)["measurements"]}
    assert set(measured) == {"stress", "copy-matrix"}
    assert all(m["status"] == "ok" for m in measured.values())
    assert measured["stress"]["details"]["seconds"] >= 2


def _health(tmp_path: Path, broken: bool) -> Measurement:
    """A node's pcie check as the worker stores it, from a fake sysfs tree."""
    node = gpu_node(tmp_path)
    if broken:
        node.set(GPU1, "current_link_width", "8")
    case = Case.make("health", "h1", "health", {"check": "pcie"}, "cuda:0")
    checked = host_checks.pcie(str(node.sys))
    try:
        return from_result(case, conclude(checked.findings, checked.details, None), (),
                           1.8e9, 0.1)
    except CaseFailed as failed:
        return Measurement(case, "failed", str(failed), measured=tuple(failed.figures),
                           time_name="", details=dict(failed.details))


def _fleet(store_path: Path, tmp_path: Path,
           measured: Callable[[str], Measurement] | None = None,
           wired: Callable[[str], dict[str, Any]] | None = None) -> None:
    """One run on each node: its pcie check (the BAD node's link narrowed), or what
    `measured` gives for the host; `wired` gives the topology its fingerprint keeps."""
    with Store.open(store_path) as store:
        for i, host in enumerate(NODES):
            extra = {"topology": wired(host)} if wired else {}
            run_id = store.begin_run(
                fingerprint={"format_version": 1, "platform": "cuda",
                             "device": {"name": "NVIDIA H200", "type": "cuda"},
                             "host": {"hostname": host}, **extra},
                fingerprint_id=f"fp-{host}", generation_key="NVIDIA H200 | CUDA 12.6",
                device="cuda:0", suite="health", argv=["health"], host=host,
                accelbench_version="0.1.0", started_at=1.8e9 + i)
            store.add_measurement(run_id, measured(host) if measured else
                                  _health(tmp_path / host, broken=host == BAD))
            store.finish_run(run_id, "complete", finished_at=1.8e9 + i + 1)


def test_diagnose_names_the_unhealthy_node_and_writes_the_drain_list(tmp_path, capsys) -> None:
    store_path, drain = tmp_path / "fleet.sqlite", tmp_path / "drain.txt"
    _fleet(store_path, tmp_path)
    code = main(["diagnose", "--store", str(store_path), "--json", "--drain-list", str(drain)])
    captured = capsys.readouterr()
    assert code == EXIT_CASE_FAILED
    data = json.loads(captured.out)
    assert data["failing"] == [BAD] and data["drain"] == [BAD]
    [node] = [n for n in data["nodes"] if n["failed"]]
    [finding] = node["findings"]
    assert finding["category"] == "health" and finding["rule"] == "health health"
    assert f"{GPU1}" in finding["detail"] and "PCIe x8, both ends support x16" in (
        finding["detail"])
    assert finding["codes"] == node["codes"] == ["ACCEL_PCIE_WIDTH"]
    assert drain.read_text() == f"{BAD} Reason=accelbench:ACCEL_PCIE_WIDTH\n"
    assert read_drain_list(drain) == [BAD]
    assert "State=DRAIN" in captured.err


def test_diagnose_judges_only_the_findings_of_the_codes_asked(tmp_path, capsys) -> None:
    store_path, drain = tmp_path / "fleet.sqlite", tmp_path / "drain.txt"
    _fleet(store_path, tmp_path)
    # Another code: the narrow link is left out, and no node fails or is drained.
    assert main(["diagnose", "--store", str(store_path), "--json", "--code", "ACCEL_EDAC_UE",
                 "ACCEL_ECC_DBE", "--drain-list", str(drain)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["failing"] == [] and drain.read_text() == ""
    assert any("ACCEL_EDAC_UE, ACCEL_ECC_DBE" in note for note in data["notes"])
    # Its own code (in any case, ACCEL_ left off): the node fails on it.
    assert main(["diagnose", "--store", str(store_path), "--json", "--code",
                 "pcie_width"]) == EXIT_CASE_FAILED
    assert json.loads(capsys.readouterr().out)["failing"] == [BAD]
    # The terminal's diagnosis names the failing node's codes.
    assert main(["diagnose", "--store", str(store_path)]) == EXIT_CASE_FAILED
    assert f"{BAD} ACCEL_PCIE_WIDTH" in " ".join(capsys.readouterr().out.split())


def test_an_unknown_reason_code_is_refused_naming_the_nearest(tmp_path, capsys) -> None:
    store_path = tmp_path / "fleet.sqlite"
    _fleet(store_path, tmp_path)
    assert main(["diagnose", "--store", str(store_path), "--code",
                 "ACCEL_PCIE_WIDHT"]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ACCEL_PCIE_WIDHT" in err[0] and "ACCEL_PCIE_WIDTH" in err[0]


def _wiring(tmp_path: Path, odd: bool) -> Measurement:
    """A node's topology check from a fake sysfs tree; `odd`: GPU1 gone from the bus."""
    node = gpu_node(tmp_path)
    if odd:
        (node.sys / "bus" / "pci" / "devices" / GPU1).unlink()
    wiring = topology.topology(sysfs.pci_devices(node.sys))
    case = Case.make("health", "h1", "health", {"check": "topology"}, "cuda:0")
    return from_result(case, conclude([topology.visible_gpus(3, 3, {})],
                                      {"topology": wiring.to_dict()}, None), (), 1.8e9, 0.1)


def test_a_node_wired_unlike_its_peers_is_a_finding(tmp_path) -> None:
    from accelbench.analysis.diagnose import diagnose
    from accelbench.analysis.rules import load_rules
    from accelbench.analysis.select import select_runs

    store_path = tmp_path / "fleet.sqlite"
    _fleet(store_path, tmp_path, lambda host: _wiring(tmp_path / host, odd=host == BAD))
    with Store.open(store_path, create=False) as store:
        result = diagnose(select_runs(store, []), load_rules())
    assert [n.node for n in result.failing] == [BAD]
    [finding] = result.failing[0].findings
    assert finding.rule == "health wiring" and finding.category == "health"
    assert "GPU0: X PIX SYS PIX" in finding.detail and "GPU2" in finding.detail


def test_a_node_wired_unlike_its_peers_is_found_from_its_runs_fingerprint(tmp_path) -> None:
    def wired(host: str) -> dict[str, Any]:
        found: dict[str, Any] = _wiring(tmp_path / "wired" / host,
                                        odd=host == BAD).details["topology"]
        return found

    store_path = tmp_path / "fleet.sqlite"
    _fleet(store_path, tmp_path, lambda host: _health(tmp_path / host, broken=False), wired)
    result = _diagnosed(store_path)
    assert [n.node for n in result.failing] == [BAD]
    [finding] = result.failing[0].findings
    assert finding.rule == "health wiring" and finding.case == "the run's fingerprint"
    assert "GPU0: X PIX SYS PIX" in finding.detail
    with Store.open(store_path, create=False) as store:
        bad_run = next(r.id for r in store.list_runs() if r.host == BAD)
    assert finding.run == bad_run


def test_a_topology_check_is_preferred_to_the_fingerprints_wiring(tmp_path) -> None:
    def wired(host: str) -> dict[str, Any]:  # every fingerprint says the node is odd
        found: dict[str, Any] = _wiring(tmp_path / "wired" / host, odd=True).details["topology"]
        return found

    store_path = tmp_path / "fleet.sqlite"
    _fleet(store_path, tmp_path, lambda host: _wiring(tmp_path / host, odd=host == BAD), wired)
    assert [n.node for n in _diagnosed(store_path).failing] == [BAD]


def _linked(tmp_path: Path, lost: bool = False, read: bool = True) -> Measurement:
    """A node's topology check with its GPUs joined by 4 NVLinks a pair; `lost`: GPU1 has
    one fewer, so its pairs read NV3; `read`: whether NVML could be read at all."""
    node = gpu_node(tmp_path)
    pairs = tuple(topology.GpuPair(a, b, "nvlink", 3 if lost and GPU1 in (a, b) else 4)
                  for a, b in ((GPU0, GPU1), (GPU0, GPU2), (GPU1, GPU2)))
    direct = (topology.DirectLinks("nvml", pairs) if read else
              topology.DirectLinks("nvml", (), "No module named 'pynvml'"))
    wiring = topology.topology(sysfs.pci_devices(node.sys), direct)
    case = Case.make("health", "h1", "health", {"check": "topology"}, "cuda:0")
    return from_result(case, conclude([topology.visible_gpus(3, 3, {})],
                                      {"topology": wiring.to_dict()}, None), (), 1.8e9, 0.1)


def _diagnosed(store_path: Path) -> Any:
    from accelbench.analysis.diagnose import diagnose
    from accelbench.analysis.rules import load_rules
    from accelbench.analysis.select import select_runs

    with Store.open(store_path, create=False) as store:
        return diagnose(select_runs(store, []), load_rules())


def test_a_node_that_lost_an_nvlink_is_wired_unlike_its_peers(tmp_path) -> None:
    store_path = tmp_path / "fleet.sqlite"
    _fleet(store_path, tmp_path, lambda host: _linked(tmp_path / host, lost=host == BAD))
    result = _diagnosed(store_path)
    assert [n.node for n in result.failing] == [BAD]
    [finding] = result.failing[0].findings
    assert finding.rule == "health wiring"
    # only the rows that differ: GPU0 X NV3 NV4 PIX against GPU0 X NV4 NV4 PIX, ...
    assert "GPU1: NV3 X NV3 PIX" in finding.detail and "GPU1: NV4 X NV4 PIX" in finding.detail
    assert "NIC0" not in finding.detail


def test_a_node_whose_links_were_not_read_is_judged_by_its_pci_wiring(tmp_path) -> None:
    store_path = tmp_path / "fleet.sqlite"
    _fleet(store_path, tmp_path, lambda host: _linked(tmp_path / host, read=host != BAD))
    assert _diagnosed(store_path).failing == []


def test_health_verdicts_and_findings_are_exported_as_metrics(tmp_path, capsys) -> None:
    store_path = tmp_path / "fleet.sqlite"
    _fleet(store_path, tmp_path)
    assert main(["export", "--format", "openmetrics", "--store", str(store_path)]) == 0
    text = capsys.readouterr().out
    assert ('accelbench_validation_check_passed{case="health check=pcie",check="health",'
            f'device="cuda:0",node="{BAD}"}} 0.0') in text
    assert ('accelbench_figure_findings{benchmark="health",case="health check=pcie",'
            f'device="cuda:0",figure="failed",node="{BAD}"}} 1.0') in text


def test_a_drain_list_keeps_only_plain_host_names(tmp_path) -> None:
    path = tmp_path / "drain.txt"
    written, refused = write_drain_list(path, ["n1", "n1", "n2;rm -rf /", "n3\nn4", "n5"])
    assert written == ["n1", "n5"] and refused == ["n2;rm -rf /", "n3\nn4"]
    assert path.read_text() == "n1 Reason=accelbench\nn5 Reason=accelbench\n"
    # Each line names its node's codes; a code outside the table is never written.
    write_drain_list(path, ["n1", "n5"], {"n1": ["ACCEL_ECC_DBE", "ACCEL_ECC_DBE",
                                                 "ACCEL_PCIE_WIDTH"],
                                          "n5": ['X" ; reboot']})
    assert path.read_text() == ("n1 Reason=accelbench:ACCEL_ECC_DBE,ACCEL_PCIE_WIDTH\n"
                                "n5 Reason=accelbench\n")
    assert read_drain_list(path) == ["n1", "n5"]


def test_qualify_runs_the_level_on_each_node(capsys) -> None:
    assert main(["slurm", "qualify", "--nodes", "n[1-2]", "--partition", "p", "--level", "2",
                 "--print"]) == 0
    script = capsys.readouterr().out
    assert '-m accelbench validate --request "$requests/validate.json"' in script
    from accelbench.benchmarks import REGISTRY
    from accelbench.cli.main import build_parser
    from accelbench.cli.validate_request import validate_request

    # The job is handed the request `validate --level 2` makes.
    level_2 = validate_request(build_parser().parse_args(["validate", "--level", "2"]),
                               REGISTRY)
    assert level_2.to_json() in script
