"""Stored text is shown as it is and never acts: no rich markup is parsed, no control
sequence reaches the terminal (nor an HTML report or a CSV export written to it), no
chart label makes matplotlib warn, no CSV cell runs as a formula."""

from __future__ import annotations

import csv
import io
import warnings

import pytest

from accelbench.cli.main import main
from accelbench.core.case import Case
from accelbench.core.measurement import Figure
from accelbench.core.request import RunRequest
from accelbench.report.text import printable
from accelbench.store import Store
from fakes import stored_measurement

NCCL_FILE = "[/tmp/nccl.%h.log]"  # an ordinary setting, and a rich closing tag
ESC_TITLE = "\x1b]0;owned\x07"  # sets the terminal's window title
CLEAR = "\x1b[2J"  # clears the screen
C1_CSI = "\x9b31m"  # the one-byte CSI
BIDI = "\u202eevil"  # right-to-left override
SEPARATORS = "\u2028\u2029\u200b"  # a line, a paragraph, a zero-width space
HOSTILE = (ESC_TITLE, CLEAR, C1_CSI, BIDI, "\x07", "\x08", SEPARATORS)
RAW = ("\x1b", "\x9b", "\u202e", "\x07", "\x08", "\r", "\u2028", "\u2029", "\u200b")


def test_printable_escapes_controls_and_keeps_text():
    assert printable("gfx942 [/bold] x") == "gfx942 [/bold] x"
    assert printable(CLEAR) == "\\x1b[2J"
    assert printable(C1_CSI) == "\\x9b31m"
    assert printable(BIDI) == "\\u202eevil"
    assert printable("a\nb\tc\r") == "a b c "
    assert printable("a\nb\tc", multiline=True) == "a\nb\tc"
    assert printable("MI300X ✓ é 日本") == "MI300X ✓ é 日本"
    for multiline in (False, True):
        assert printable("a\u2028b\u2029c\u200bd", multiline=multiline) == (
            "a\\u2028b\\u2029c\\u200bd")
        assert printable("a\rb", multiline=multiline) == ("a\\x0db" if multiline else "a b")
    # The bytes of a name that is not UTF-8, as Python decodes them (surrogateescape).
    assert printable(b"node\xff\xfe".decode("utf-8", "surrogateescape")) == "node\\xff\\xfe"


def test_a_store_and_report_named_in_bytes_that_are_not_utf8(tmp_path, capsys):
    """A path Python can only hold with lone surrogates (a folder named in Latin-1 on a
    UTF-8 system): the report written there names it with the byte escaped."""
    odd = b"r\xff".decode("utf-8", "surrogateescape")
    store_path = tmp_path / f"s{odd}.db"
    case = Case.make("gemm", "g1", "micro", {"shape": "64", "dtype": "fp32"}, "cpu")
    with Store.open(store_path) as store:
        run_id = store.begin_run(
            fingerprint={"format_version": 1, "platform": "cpu"}, fingerprint_id="fp-odd",
            generation_key="CPU | PyTorch 2.14", device="cpu", suite="quick",
            argv=["run", "--store", str(store_path), "--report", f"{odd}.md"],
            request=RunRequest(report=f"{odd}.md").to_dict(),
            host="node", accelbench_version="0.1.0", started_at=1.75e9)
        store.add_measurement(run_id, stored_measurement(
            case, samples=[1e-3] * 5, number=10, figures=[Figure("throughput", 1e9, "FLOP/s")]))
        store.finish_run(run_id, "complete")
    for name in (f"{odd}.md", f"{odd}.html"):
        assert main(["report", "--store", str(store_path), "-o", str(tmp_path / name)]) == 0
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert "r\\xff.md" in text or "r\\\\xff.md" in text  # the run's command line
    capsys.readouterr()


def _hostile_store(path) -> tuple[str, str]:
    stack = f"GPU {CLEAR}[/bold] | ROCm 6.3 [red]"
    fingerprint = {"format_version": 1, "platform": "rocm",
                   "device": {"name": f"MI300X{ESC_TITLE}", "type": "cuda"},
                   "host": {"hostname": f"node{BIDI}"},
                   "environment": {"NCCL_DEBUG_FILE": NCCL_FILE, "EVIL": CLEAR + C1_CSI}}
    case = Case.make("gemm", "g1", "micro", {"shape": f"1024{CLEAR}\r{SEPARATORS}",
                                             "dtype": "bf16"}, "cpu")
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
                failed, "failed", reason=f"{CLEAR}boom [/] {C1_CSI}{BIDI}\x07\r{SEPARATORS}"))
            store.finish_run(run_id, "complete", finished_at=1.75e9 + 60 * i + 30)
            ids.append(run_id)
    return ids[0], ids[1]


@pytest.mark.parametrize("command", [
    ["runs"], ["show"], ["show", "--env"], ["compare", "A", "B"], ["history", "gemm"],
    ["report", "A", "--format", "md", "--output", "R"], ["diagnose", "--baseline", "A"],
    ["report", "A", "--format", "html", "-o", "-"], ["report", "A", "B", "--format", "html",
                                                     "-o", "-"],
    ["export", "--format", "csv"],
])
def test_hostile_stored_text_is_shown_literally(command, store_path, tmp_path, capsys):
    first, second = _hostile_store(store_path)
    report = tmp_path / "report.md"
    names = {"A": first, "B": second, "R": str(report)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main([*(names.get(a, a) for a in command), "--store", str(store_path)])
    out, err = capsys.readouterr()
    assert not [str(w.message) for w in caught if "Glyph" in str(w.message)]
    if "R" in command:
        out = report.read_text(encoding="utf-8")
    if command[0] == "export":
        out = out.replace("\r\n", "\n")  # the CSV line ending
    assert code in (0, 1), err  # diagnose may find the failed case: still no crash
    for raw in RAW:
        assert raw not in out and raw not in err, (raw, out)
    if command[0] in ("show", "report", "export"):
        assert "\\x1b[2J" in out  # the escape is shown, not performed
    if "html" in command:
        assert "<svg" in out and "1024\\x1b[2J" in out.split("<svg", 1)[1]  # chart labels
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
    """Formula cells are marked as text, and every text cell is printable."""
    _hostile_store(store_path)
    assert main(["export", "--format", "csv", "--store", str(store_path)]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    notes = {r["warnings"] for r in rows if r["warnings"]}
    assert notes and all(w.startswith("'=cmd") and w.endswith("\\x1b[2J") for w in notes)
    reasons = {r["reason"] for r in rows if r["reason"]}
    assert reasons == {"\\x1b[2Jboom [/] \\x9b31m\\u202eevil\\x07\\x0d\\u2028\\u2029\\u200b"}
    for r in rows:
        for cell in r.values():
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
            # A negative number is a number: only text that starts with "-" is marked.
            if cell.startswith("-"):
                float(cell)
