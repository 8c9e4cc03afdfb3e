"""Stored text is shown as it is and never acts: no rich markup is parsed, no control
sequence reaches the terminal, no CSV cell runs as a formula."""

from __future__ import annotations

import csv
import io

import pytest

from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.core.measurement import Figure
from accelbench.report.text import printable
from accelbench.store import Store
from fakes import stored_measurement

NCCL_FILE = "[/tmp/nccl.%h.log]"  # an ordinary setting, and a rich closing tag
ESC_TITLE = "\x1b]0;owned\x07"  # sets the terminal's window title
CLEAR = "\x1b[2J"  # clears the screen
C1_CSI = "\x9b31m"  # the one-byte CSI
BIDI = "\u202eevil"  # right-to-left override
HOSTILE = (ESC_TITLE, CLEAR, C1_CSI, BIDI, "\x07", "\x08")
RAW = ("\x1b", "\x9b", "\u202e", "\x07", "\x08")


def test_printable_escapes_controls_and_keeps_text():
    assert printable("gfx942 [/bold] x") == "gfx942 [/bold] x"
    assert printable(CLEAR) == "\\x1b[2J"
    assert printable(C1_CSI) == "\\x9b31m"
    assert printable(BIDI) == "\\u202eevil"
    assert printable("a\nb\tc\r") == "a b c "
    assert printable("a\nb\tc", multiline=True) == "a\nb\tc"
    assert printable("MI300X ✓ é 日本") == "MI300X ✓ é 日本"


def _hostile_store(path) -> tuple[str, str]:
    stack = f"GPU {CLEAR}[/bold] | ROCm 6.3 [red]"
    fingerprint = {"format_version": 1, "platform": "rocm",
                   "device": {"name": f"MI300X{ESC_TITLE}", "type": "cuda"},
                   "host": {"hostname": f"node{BIDI}"},
                   "environment": {"NCCL_DEBUG_FILE": NCCL_FILE, "EVIL": CLEAR + C1_CSI}}
    case = Case.make("gemm", "g1", "micro", {"shape": f"1024{CLEAR}", "dtype": "bf16"}, "cpu")
    failed = Case.make("memory", "m1", "micro", {"op": "copy[/]", "size_mib": 8}, "cpu")
    ids = []
    with Store.open(path) as store:
        for i, value in enumerate((1.0e12, 0.9e12)):
            run_id = store.begin_run(
                fingerprint=fingerprint, fingerprint_id="fp-hostile", generation_key=stack,
                device="cpu", suite=f"quick{ESC_TITLE}[/]", argv=["run"],
                host=f"node{BIDI}", accelbench_version="0.1.0", started_at=1.75e9 + 60 * i)
            samples = [1e-3 * (1 + 0.001 * k) for k in range(20)]
            store.add_measurement(run_id, stored_measurement(
                case, samples=samples, number=10,
                figures=(Figure("throughput", value, "FLOP/s", True),),
                warnings=(f"=cmd|' /C calc'!A0 {CLEAR}",)))
            store.add_measurement(run_id, stored_measurement(
                failed, "failed", reason=f"{CLEAR}boom [/] {C1_CSI}{BIDI}\x07"))
            store.finish_run(run_id, "complete", finished_at=1.75e9 + 60 * i + 30)
            ids.append(run_id)
    return ids[0], ids[1]


@pytest.mark.parametrize("command", [
    ["runs"], ["show"], ["show", "--env"], ["compare", "A", "B"], ["history", "gemm"],
    ["report", "A", "--format", "md", "--output", "R"], ["diagnose", "--baseline", "A"],
])
def test_hostile_stored_text_is_shown_literally(command, store_path, tmp_path, capsys):
    first, second = _hostile_store(store_path)
    report = tmp_path / "report.md"
    names = {"A": first, "B": second, "R": str(report)}
    code = main([*(names.get(a, a) for a in command), "--store", str(store_path)])
    out, err = capsys.readouterr()
    if command[0] == "report":
        out = report.read_text(encoding="utf-8")
    assert code in (0, 1), err  # diagnose may find the failed case: still no crash
    for raw in RAW:
        assert raw not in out and raw not in err, (raw, out)
    if command[0] == "show":
        assert "\\x1b[2J" in out  # the escape is shown, not performed
    if command == ["show", "--env"]:
        assert NCCL_FILE in out
    if command == ["runs"]:
        assert "[/]" in out and "[red]" in out  # markup in stored text is text


def test_error_messages_quoting_stored_text_are_one_clean_line(store_path, capsys):
    _hostile_store(store_path)
    assert main(["show", f"nope{CLEAR}\nsecond line", "--store", str(store_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "\\x1b[2J" in err


def test_csv_export_neutralises_formula_cells(store_path, capsys):
    _hostile_store(store_path)
    assert main(["export", "--format", "csv", "--store", str(store_path)]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    warnings = {r["warnings"] for r in rows if r["warnings"]}
    assert warnings and all(w.startswith("'=cmd") for w in warnings)
    for r in rows:
        for cell in r.values():
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
            # A negative number is a number: only text that starts with "-" is marked.
            if cell.startswith("-"):
                float(cell)
