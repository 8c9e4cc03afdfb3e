"""An A/B's answer (analysis.ab) as plain tables, which the terminal, Markdown and HTML
outputs each render their own way."""

from __future__ import annotations

from accelbench.analysis.ab import FASTER, SLOWER, AbResult
from accelbench.core.sequential import IN_JOBS, IN_SEQUENCE, case_alpha
from accelbench.core.units import format_change, format_ratio, format_value
from accelbench.core.view import BAD, GOOD, Table


def ab_tables(result: AbResult) -> list[Table]:
    """Per case: each side's figure, B over A as a speed with its interval, the change,
    the pairs it took and the verdict; and the cases not compared, with why."""
    ab = result.ab
    level = case_alpha(ab.alpha, len(result.cases))
    rows, styles, unpaired = [], [], []
    for case in result.cases:
        v = case.verdict
        if v is None:
            unpaired.append((case.label, case.reason))
            continue
        verdict = v.verdict
        if v.reason:
            verdict += f": {v.reason}"
        if case.tuning_differs:
            verdict += f"; tuning differs: {', '.join(case.tuning_differs)}"
        rows.append((case.label, format_value(case.a_value, case.unit),
                     format_value(case.b_value, case.unit),
                     format_ratio(v.speed, v.speed_low, v.speed_high),
                     format_change(v.change), str(v.pairs), verdict))
        styles.append(GOOD if v.verdict == FASTER else BAD if v.verdict == SLOWER else None)
    counts = ", ".join(f"{n} {name}" for name, n in result.counts().items())
    notes = [
        f"A: {result.label('a')}, run {result.a.record.id}. "
        f"B: {result.label('b')}, run {result.b.record.id}.",
        "Each case was measured in pairs of fresh processes, one per stack, back to back "
        "in alternating order; B/A is the speed of B over A (above 1: B is faster) from "
        "the geometric mean of the pairs' ratios, with its repeated confidence interval "
        "(a t-test after every round, its boundary calibrated for looking that often), "
        "valid however many rounds were looked at.",
        f"A case stopped as soon as it was called faster or slower (a change of at least "
        f"{100 * ab.min_effect:g}%, its interval at α / k excluding 1, k the cases not "
        f"called yet: α = {level:.2g} while none is, each call freeing its share for "
        f"the rest, so that the chance of any false call among the {len(result.cases)} "
        f"cases is at most {ab.alpha:g}), or the same (the interval shown, each bound at "
        f"α = {ab.alpha:g}, "
        f"within ±{100 * ab.min_effect:g}%). At most {ab.max_rounds} pairs a case"
        + (f", {ab.budget:g} s in all" if ab.budget is not None else "") + ".",
        counts + ".",
    ]
    apart = [case.label for case in result.cases
             if case.verdict is not None and case.pairing in (IN_SEQUENCE, IN_JOBS)]
    if apart:
        notes.insert(-1, "Measured one after the other rather than taking turns on the "
                         "same CPUs (a protocol or processes of their own, or ranks of a "
                         "torchrun job), so what the host did between the two processes of "
                         "a pair is in their pairs' noise: " + "; ".join(apart) + ".")
    if any(case.tuning_differs for case in result.cases):
        notes.insert(-1, "tuning differs: the sides chose GEMM or convolution kernels under "
                         "different tuning (TunableOp, BLAS back end, hipBLASLt/rocBLAS "
                         "files, MIOpen find mode), part of what the A/B measured.")
    tables = [Table(
        f"A/B {result.id}: B against A",
        ("Case", "A", "B", f"B/A speed [{100 * (1 - ab.alpha):g}% CS]", "Change", "Pairs",
         "Verdict"),
        rows, notes, frozenset({1, 2, 3, 4, 5}), styles)]
    if unpaired:
        tables.append(Table("Not compared", ("Case", "Why"), unpaired))
    return tables


def gate_lines(gate: float, result: AbResult) -> list[str]:
    """What a --fail-on-regression gate at `gate` (a fraction) concluded."""
    from accelbench.analysis.ab import gate as judge_gate

    pct = f"{100 * gate:g}%"
    regressed, undecided = judge_gate(result.cases, gate)
    if regressed:
        return [f"{len(regressed)} case(s) regressed by {pct} or more: "
                + ", ".join(c.label for c in regressed)]
    if undecided:
        return [f"inconclusive: {len(undecided)} case(s) may have regressed by {pct} or "
                "more, and the evidence cannot tell (raise --max-rounds or --budget):",
                *(f"  {c.label}: {c.verdict.reason if c.verdict is not None else c.reason}"
                  for c in undecided)]
    return [f"no case regressed by {pct} or more"]
