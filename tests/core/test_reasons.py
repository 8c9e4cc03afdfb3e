"""The table of reason codes: unique, well formed, covering every code the sources use,
and published as it is (docs/reasons.md, the JSON Schema of the checks' output)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.benchmarks.qualify.catalog import KINDS
from accelbench.core.reasons import AREAS, BENCH_CODES, BY_CODE, CODES, REASONS, known_codes
from accelbench.errors import UserError
from accelbench.report.reasons_doc import SCHEMA_PATH, checks_schema, reasons_table
from docs_pages import page

SRC = Path(__file__).parents[2] / "src" / "accelbench"
CODE = re.compile(r"^ACCEL_[A-Z0-9_]+$")
USED = re.compile(r"\bACCEL_[A-Z0-9_]*[A-Z0-9]\b")


def test_codes_are_unique_and_well_formed() -> None:
    assert len(CODES) == len(REASONS) == len(set(CODES))
    for r in REASONS:
        assert CODE.match(r.code), r.code
        assert r.severity in ("fail", "warn") and r.area in AREAS, r
        assert r.meaning and "\n" not in r.meaning and r.action, r
        assert r.dcgm is None or re.fullmatch(r"DCGM_FR_[A-Z0-9_]+", r.dcgm), r
        assert "|" not in r.meaning + r.action  # a cell of the docs' table


def test_every_code_the_sources_name_is_in_the_table() -> None:
    used: dict[str, str] = {}
    for path in SRC.rglob("*"):
        if path.suffix in (".py", ".yaml", ".toml", ".j2") and "__pycache__" not in path.parts:
            for code in USED.findall(path.read_text(encoding="utf-8")):
                used.setdefault(code, str(path.relative_to(SRC)))
    assert used, "no code found: the scan is broken"
    unknown = {c: where for c, where in used.items() if c not in BY_CODE}
    assert not unknown, unknown


def test_the_gate_figures_and_the_benchmarks_have_codes_of_the_table() -> None:
    assert {k.code for k in KINDS} <= set(CODES)
    assert set(BENCH_CODES.values()) <= set(CODES)
    checks = {b.name for b in REGISTRY if b.family in ("validation", "health")}
    assert set(BENCH_CODES) <= checks
    assert {"numerics", "determinism", "amp", "compile", "export", "onnx", "torchvision",
            "torchaudio", "torchtext", "torchrec", "memtest", "burn-in",
            "distributed"} <= set(BENCH_CODES)


def test_codes_are_read_in_any_case_and_an_unknown_one_names_the_nearest() -> None:
    assert known_codes(["accel_ecc_dbe", "PCIE_WIDTH", "ACCEL_ECC_DBE"]) == (
        "ACCEL_ECC_DBE", "ACCEL_PCIE_WIDTH")
    with pytest.raises(UserError, match=r"'ACCEL_ECC_DBX'.*nearest: ACCEL_ECC_DBE"):
        known_codes(["ACCEL_ECC_DBX"])


def test_the_docs_table_is_the_table() -> None:
    assert reasons_table() in page("reasons.md")
    for code in CODES:
        assert f"| `{code}` |" in page("reasons.md")


def test_the_shipped_schema_is_generated_from_the_table_and_valid() -> None:
    shipped = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert shipped == checks_schema(), (
        "regenerate with: python -m accelbench.report.reasons_doc --write")
    assert shipped["$defs"]["code"]["enum"] == list(CODES)
    jsonschema.Draft202012Validator.check_schema(shipped)
