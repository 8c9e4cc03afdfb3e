"""What `accelbench explain` found for one case of two runs, as plain versioned JSON.

The findings join four things: the stored figures of the case on each side (what moved),
the operators, shapes and kernels that moved in the two sides' profiles (`profile.diff`),
what differs between the two runs' fingerprints (library versions, environment switches,
the device) and their GEMM tuning (`analysis.tuning`), and a command that reproduces
each side. They are stored with the case (`Store.add_explanation`) and shown by the
terminal, the run's report and the published site's Regressions page.

Format history (FORMAT_VERSION):
  1: first version.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from accelbench.core.units import format_value
from accelbench.env.metadata import KEYS, LIBRARY, MetadataKey
from accelbench.profile.diff import Diff

if TYPE_CHECKING:
    from accelbench.core.measurement import Measurement

FORMAT_VERSION = 1
# Fingerprint keys that differ between any two runs and explain nothing.
_IGNORED = frozenset({"device.index"})


def findings(*, case_key: str, label: str, benchmark: str, runs: Mapping[str, str],
             measurements: Mapping[str, Measurement], fingerprints: Mapping[str, Mapping[str, Any]],
             diff: Diff, repro: Mapping[str, Mapping[str, str]],
             profile_runs: Mapping[str, Sequence[str]], ab: str | None = None,
             tuning: Sequence[str] = ()) -> dict[str, Any]:
    """The findings for a case; `runs`, `measurements`, `fingerprints`, `repro` and
    `profile_runs` are keyed by side ("a", "b")."""
    out: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "case": {"key": case_key, "label": label, "benchmark": benchmark},
        "runs": dict(runs),
        "ab": ab,
        "stored": stored_figures(measurements["a"], measurements["b"]),
        "profiles": {side: list(ids) for side, ids in profile_runs.items()},
        **diff.to_dict(),
        "stack": stack_differences(fingerprints["a"], fingerprints["b"]),
        "tuning": list(tuning),
        "repro": {side: dict(value) for side, value in repro.items()},
    }
    largest = diff.largest()
    out["largest"] = largest.to_dict(diff.step.delta_s) if largest is not None else None
    out["summary"] = summary(out)
    return out


def stored_figures(a: Measurement, b: Measurement) -> dict[str, Any] | None:
    """The case's headline figure on each side, as the runs stored it; None without one."""
    fa, fb = a.primary, b.primary
    if fa is None or fb is None or fa.name != fb.name:
        return None
    ratio = fb.value / fa.value if fa.value else None
    worse = None
    if ratio is not None and math.isfinite(ratio) and ratio != 1:
        worse = (ratio < 1) if fa.higher_is_better else (ratio > 1)
    return {"figure": fa.name, "unit": fa.unit, "higher_is_better": fa.higher_is_better,
            "a": fa.value, "b": fb.value, "ratio": ratio, "b_worse": worse}


def stack_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each fingerprint key whose value differs between the runs, in the order `accelbench
    env` shows them; a mapping shown as entries (packages, environment) entry by entry."""
    out = []
    for key in KEYS:
        if key.key in _IGNORED:
            continue
        va, vb = key.get(a), key.get(b)
        if key.expand and (isinstance(va, Mapping) or isinstance(vb, Mapping)):
            ma = va if isinstance(va, Mapping) else {}
            mb = vb if isinstance(vb, Mapping) else {}
            for name in sorted(set(ma) | set(mb), key=str):
                if ma.get(name) != mb.get(name):
                    out.append({"key": f"{key.key}.{name}", "label": f"{key.label}: {name}",
                                "a": _shown(ma.get(name)), "b": _shown(mb.get(name))})
        elif va != vb:
            out.append({"key": key.key, "label": key.label, "a": _value(key, va),
                        "b": _value(key, vb)})
    return out


def _value(key: MetadataKey, value: Any) -> str | None:
    if key.kind == LIBRARY and isinstance(value, Mapping):
        return " ".join(str(value[k]) for k in ("name", "version") if value.get(k))
    return _shown(value)


def _shown(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def summary(found: Mapping[str, Any]) -> str:
    """One sentence: how the step moved, and the operator that moved most."""
    step = found.get("step") or {}
    a, b = step.get("a_s"), step.get("b_s")
    if not isinstance(a, int | float) or not isinstance(b, int | float) or a <= 0:
        return "the profiles hold no profiled steps to compare"
    parts = [f"under the profiler, B's step took {_ratio(b / a)} A's "
             f"({format_value(a, 's')} → {format_value(b, 's')})"]
    if not step.get("consistent"):
        parts[0] += ", within the profiles' spread"
    largest = found.get("largest")
    if isinstance(largest, Mapping):
        delta = largest.get("delta_s_per_step", 0.0)
        text = (f"the largest mover is {largest.get('name')}: "
                f"{'+' if delta >= 0 else '−'}{format_value(abs(delta), 's')} per step")
        share = largest.get("share_of_change")
        if (step.get("consistent") and isinstance(share, int | float)
                and math.isfinite(share) and share > 0):
            text += f" ({min(share, 9.99):.0%} of the change)"
        ratio = largest.get("ratio")
        if largest.get("only_in") == "b":
            text += ", run only in B"
        elif isinstance(ratio, int | float):
            text += f", {_ratio(ratio)} its time in A"
        if not largest.get("consistent"):
            text += "; not beyond the profiles' spread"
        parts.append(text)
    parts += _beyond_spread(found, bool(step.get("consistent")))
    differs = [d["label"] for d in found.get("stack", ())
               if isinstance(d, Mapping) and d.get("label")]
    if differs:
        shown = ", ".join(differs[:3]) + (f" and {len(differs) - 3} more" if len(differs) > 3
                                          else "")
        parts.append(f"the stacks differ in {shown}")
    tuning = found.get("tuning")
    if tuning:
        parts.append("tuning differs: " + "; ".join(str(t) for t in tuning[:2]))
    return "; ".join(parts)


def _beyond_spread(found: Mapping[str, Any], step_moved: bool) -> list[str]:
    """How many operators moved beyond the profiles' spread, against how many would by
    chance where nothing changed; and, where the step moved but none did, what that
    means."""
    total, moved = found.get("operators_total"), found.get("operators_consistent")
    chance = found.get("separation_chance")
    if (not isinstance(total, int) or not isinstance(moved, int) or total <= 0
            or not isinstance(chance, int | float)):
        return []
    out = [f"{moved} of {total} operators moved beyond the profiles' spread (at most "
           f"{total * chance:.1f} would by chance where nothing changed)"]
    if step_moved and moved == 0:
        out.append("none moved more than the step as a whole: the host or a setting of "
                   "the whole process changed (clock, threads, other work), not an operator")
    return out


def _ratio(ratio: float) -> str:
    return f"{ratio:.2f}×"
