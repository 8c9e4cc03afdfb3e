"""`accelbench explain`'s findings (profile.explain) as plain tables, which the terminal,
a run's report and the published site each render their own way.

Findings are read back from a store, which may come from anywhere: every value is checked
for its type here, and a finding that does not read is shown as missing, never trusted."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.core.units import MISSING, format_value
from accelbench.core.view import BAD, GOOD, Table
from accelbench.report.text import printable

TOP = 8


@dataclass(frozen=True)
class Digest:
    """An explanation in a line: what a list of them (the site's Regressions page)
    shows; `slower` is None where the stored figures do not say."""

    benchmark: str
    mover: str
    change: str
    differs: str
    summary: str
    slower: bool | None


def digest(found: Mapping[str, Any]) -> Digest:
    largest = _mapping(found.get("largest"))
    stored = _mapping(found.get("stored"))
    worse = stored.get("b_worse")
    differs = [_text(d.get("label")) for d in _rows(found.get("stack"))]
    differs += ["tuning"] if _texts(found.get("tuning")) else []
    return Digest(_text(_mapping(found.get("case")).get("benchmark"), ""),
                  _text(largest.get("name")) if largest else MISSING,
                  _signed(_number(largest.get("delta_s_per_step"))) if largest else MISSING,
                  ", ".join(differs[:4]) + (f" and {len(differs) - 4} more"
                                            if len(differs) > 4 else "") or "nothing recorded",
                  _text(found.get("summary")), worse if isinstance(worse, bool) else None)


def explain_tables(found: Mapping[str, Any], top: int = TOP) -> list[Table]:
    """The findings of one explanation: what moved, what differs, how to reproduce."""
    case = _mapping(found.get("case"))
    runs = _mapping(found.get("runs"))
    title = f"Why {_text(case.get('label'))} moved: run {_text(runs.get('a'))} (A) → " \
        f"{_text(runs.get('b'))} (B)"
    notes = [_text(found.get("summary"))]
    stored = _mapping(found.get("stored"))
    if stored:
        unit = _text(stored.get("unit"), "")
        notes.insert(0, f"Stored {_text(stored.get('figure'))}: "
                        f"{format_value(_number(stored.get('a')), unit)} (A) → "
                        f"{format_value(_number(stored.get('b')), unit)} (B)")
    profiles = _mapping(found.get("profiles"))
    shown_runs = ", ".join(f"{side.upper()}: {', '.join(_texts(profiles.get(side)))}"
                           for side in ("a", "b"))
    chance = _number(found.get("separation_chance"))
    odds = (f" (where nothing changed, an operator is so marked by chance 1 time in "
            f"{1 / chance:.0f})" if chance else "")
    notes.append(f"Times are per profiled step, the median of each side's profiles "
                 f"({shown_runs}); ✓ marks a change beyond every profile of the other "
                 f"side{odds}.")
    tables = [_movers(title, found.get("operators"), notes, top, "Operator")]
    shapes = _rows(found.get("shapes"))
    if shapes:
        tables.append(_movers("Operators by input shapes and types", shapes, [], top,
                              "Operator", detail=True))
    kernels = _rows(found.get("kernels"))
    if kernels:
        tables.append(_movers("Device kernels", kernels, [], top, "Kernel"))
    gemm = _gemm(found.get("gemm"))
    if gemm is not None:
        tables.append(gemm)
    stack = _rows(found.get("stack"))
    tuning = _texts(found.get("tuning"))
    if stack or tuning:
        rows = [(_text(d.get("label")), _text(d.get("a")), _text(d.get("b"))) for d in stack]
        rows += [("Tuning", t, "") for t in tuning]
        tables.append(Table("What differs between the two runs' stacks",
                            ("What", "A", "B"), rows))
    else:
        tables.append(Table("What differs between the two runs' stacks", ("What",),
                            [("nothing recorded differs: same versions, switches and "
                              "tuning",)]))
    repro = _mapping(found.get("repro"))
    rows = []
    for side in ("a", "b"):
        lines = _mapping(repro.get(side))
        for kind in ("run", "profile"):
            if isinstance(lines.get(kind), str):
                rows.append((side.upper(), kind, lines[kind]))
    if rows:
        tables.append(Table("Reproduce", ("Side", "What", "Command"), rows))
    return tables


def _movers(title: str, found: Any, notes: list[str], top: int, what: str,
            detail: bool = False) -> Table:
    header = (what, *(("Shapes", "Types") if detail else ()), "A / step", "B / step",
              "Change / step", "B/A", "✓")
    rows, styles = [], []
    for row in _rows(found)[:top]:
        delta = _number(row.get("delta_s_per_step"))
        ratio = _number(row.get("ratio"))
        only = row.get("only_in")
        shown_ratio = ("only in B" if only == "b" else "only in A" if only == "a"
                       else f"{ratio:.2f}×" if ratio is not None else MISSING)
        cells = (_text(row.get("name")),
                 *((_text(row.get("shapes"), ""), _text(row.get("types"), "")) if detail
                   else ()),
                 format_value(_number(row.get("a_s_per_step")), "s"),
                 format_value(_number(row.get("b_s_per_step")), "s"),
                 _signed(delta), shown_ratio, "✓" if row.get("consistent") is True else "")
        rows.append(cells)
        styles.append(None if delta is None or row.get("consistent") is not True
                      else BAD if delta > 0 else GOOD)
    first = 1 + (2 if detail else 0)
    return Table(title, header, rows, notes, frozenset(range(first, first + 4)), styles)


def _gemm(found: Any) -> Table | None:
    gemm = _mapping(found)
    rows = []
    for side in ("a", "b"):
        data = _mapping(gemm.get(side))
        if isinstance(data.get("backend"), str):
            rows.append((side.upper(), "back end", _text(data["backend"]), ""))
        for row in _rows(data.get("operators")):
            rows.append((side.upper(), _text(row.get("name")),
                         f"{_text(row.get('shapes'), '')} {_text(row.get('types'), '')}".strip(),
                         format_value(_number(row.get("s_per_step")), "s")))
        for row in _rows(data.get("kernels")):
            rows.append((side.upper(), "kernel", _text(row.get("name")),
                         format_value(_number(row.get("s_per_step")), "s")))
    if not rows:
        return None
    return Table("GEMMs on each side", ("Side", "Operator", "Shapes and types / kernel",
                                        "Time / step"), rows, [], frozenset({3}))


def _signed(seconds: float | None) -> str:
    if seconds is None:
        return MISSING
    return ("+" if seconds >= 0 else "−") + format_value(abs(seconds), "s")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _rows(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return []
    return [row for row in value if isinstance(row, Mapping)]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _text(value: Any, missing: str = MISSING) -> str:
    if value is None:
        return missing
    return printable(str(value)[:500])


def _texts(value: Any) -> list[str]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return []
    return [_text(v) for v in value[:50]]


def explain_hint(run_a: str, run_b: str, label: str, *, side_of_ab: bool = False) -> str:
    """The line that says how to find out why `label` moved between two runs."""
    import shlex

    runs = run_b if side_of_ab else f"{run_a} {run_b}"
    return f"Why it moved: accelbench explain {runs} --case {shlex.quote(label)}"
