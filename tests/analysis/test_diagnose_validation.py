"""`diagnose` treats a failed validation check like a failed rule: the node fails, with the
check, its error against its tolerance and the reason; a skipped check is no failure, and
rules of no family leave checks alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from analysis_data import add_run

from accelbench.analysis.diagnose import diagnose
from accelbench.analysis.rules import load_rules, parse_rules
from accelbench.analysis.select import select_runs
from accelbench.cli.main import main
from accelbench.errors import EXIT_CASE_FAILED
from accelbench.store import Store
from fakes import check_measurement

if TYPE_CHECKING:
    from accelbench.core.measurement import Measurement

STACK = "AMD Instinct MI300X | ROCm 6.3 | PyTorch 2.6.0"
WRONG = "wrong result: matmul in bf16: 4 of 65536 elements of out outside the tolerance"


def _checks(node: str) -> list[Measurement]:
    bf16 = ("failed", 0.5, WRONG) if node == "node2" else ("ok", 0.01, None)
    status, error, reason = bf16
    return [
        check_measurement("numerics", {"op": "matmul", "dtype": "fp32"}, error=1e-5,
                          tolerance=2e-4, device="cuda:0"),
        check_measurement("numerics", {"op": "matmul", "dtype": "bf16"}, status, error=error,
                          tolerance=0.2, reason=reason, device="cuda:0"),
        # Skipped everywhere but on node3, where torchvision is missing: no failure either.
        check_measurement("torchvision", {"check": "nms"},
                          "skipped" if node == "node3" else "ok", error=0.0, tolerance=0.0,
                          reason="torchvision is not installed" if node == "node3" else None,
                          device="cuda:0"),
    ]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    path = tmp_path_factory.mktemp("validated") / "results.sqlite"
    with Store.open(path) as store:
        for i, node in enumerate(("node1", "node2", "node3")):
            add_run(store, host=node, stack=STACK, started_at=1.8e9 + 60 * i,
                    measurements=_checks(node))
        runs = select_runs(store, [])
    return path, runs


def test_a_failed_check_fails_its_node_with_the_error_and_the_reason(fleet):
    _, runs = fleet
    result = diagnose(runs, load_rules())
    assert [n.node for n in result.failing] == ["node2"]
    [finding] = result.failing[0].findings
    assert (finding.rule, finding.category, finding.compare) == ("validation numerics",
                                                                 "validation", "verdict")
    assert finding.case == "numerics dtype=bf16 op=matmul"
    assert (finding.figure, finding.observed, finding.limit) == ("error", 0.5, "tolerance 0.2")
    assert finding.off_by == pytest.approx(1.5)
    assert finding.detail == WRONG


def test_a_skipped_check_is_no_failure_and_checks_count_what_ran(fleet):
    _, runs = fleet
    nodes = {n.node: n for n in diagnose(runs, load_rules()).nodes}
    assert not nodes["node3"].failed
    assert nodes["node3"].checks == nodes["node1"].checks - 1


def test_a_rule_for_the_validation_family_applies_to_checks(fleet):
    _, runs = fleet
    rules = parse_rules("""
rules:
  - name: margin
    metric: numerics
    family: validation
    figure: margin
    compare: value
    min: 96
    category: numerics
""")
    result = diagnose(runs, rules, strict=True)
    failing = {n.node: n for n in result.failing}
    assert set(failing) == {"node1", "node2", "node3"}  # fp32 matmul: a margin of 95%
    assert {f.rule for f in failing["node1"].findings} == {"margin"}
    assert {f.rule for f in failing["node2"].findings} == {"margin", "validation numerics"}


def test_diagnose_exits_1_for_a_node_with_a_failed_check(fleet, capsys):
    path, _ = fleet
    assert main(["diagnose", "--store", str(path)]) == EXIT_CASE_FAILED
    out = capsys.readouterr().out
    assert "node2" in out and "validation numerics" in out and "wrong result" in out
