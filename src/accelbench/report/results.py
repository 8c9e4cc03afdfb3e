"""The results table, as plain rows that each output format renders its own way."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from accelbench.analysis.checks import is_check
from accelbench.core.case import Case
from accelbench.core.measurement import STATUS_OK, Measurement
from accelbench.core.units import format_params, format_pct, format_rel, format_value

COLUMNS = ("Benchmark", "Parameters", "Result", "% of peak", "CI 95%", "n", "Status")
# How the CI column reads, in every report that shows it.
CI_NOTE = ("The CI column is the half-width of the stated 95% interval, relative to the "
           "result: between processes, where a repeat run's figure is expected to fall; "
           "within one process, the order-statistic CI of its median. Beyond ±50% it is "
           "shown as a factor, ×/÷ F: the interval runs from the result divided by F to "
           "the result times F.")


@dataclass(frozen=True)
class Row:
    benchmark: str
    params: str
    result: str
    pct_of_peak: str
    ci: str
    samples: str
    status: str
    note: str  # failure reason or noise warning, "" when none
    ok: bool
    noisy: bool
    contended: bool = False
    throttled: bool = False

    @property
    def doubtful(self) -> bool:
        """Measured, but not to be trusted to its last digit: noisy, contended or
        throttled."""
        return self.ok and (self.noisy or self.contended or self.throttled)

    def cells(self) -> tuple[str, ...]:
        return (self.benchmark, self.params, self.result, self.pct_of_peak, self.ci,
                self.samples, self.status)


def rows(measurements: Iterable[Measurement]) -> list[Row]:
    return [row(m) for m in measurements]


def shown_params(case: Case) -> str:
    """The parameters the case was planned to show (`Case.shown`): the switches left at an
    "off" default (cast=False, warmup=0, config=) say nothing, and the identity keeps them
    anyway. Decided at planning time, so an old run reads as it was recorded."""
    return format_params(case.shown_params)


def row(m: Measurement) -> Row:
    params = shown_params(m.case)
    if is_check(m):
        return _check_row(m, params)
    if m.status != STATUS_OK:
        return Row(m.case.benchmark, params, "-", "-", "-", "-", m.status, m.reason or "",
                   ok=False, noisy=False)
    fig = m.primary
    spread = m.spread
    result = format_value(fig.value, fig.unit) if fig else "-"
    throttled = m.throttled
    notes = list(m.warnings)
    if throttled and not any(w.startswith("throttled") for w in notes):
        reasons = m.throttle_reasons
        notes.append(f"throttled: {'; '.join(reasons)}" if reasons else "throttled")
    note = "; ".join(notes)
    flags = [flag for flag, on in (("noisy", m.noisy), ("contended", m.contended),
                                   ("throttled", throttled)) if on]
    status = f"ok ({', '.join(flags)})" if flags else "ok"
    return Row(
        m.case.benchmark,
        params,
        result,
        format_pct(fig.pct_of_peak if fig else None),
        format_rel(spread.rel_half_width) if spread else "-",
        _samples(m),
        status,
        note,
        ok=True,
        noisy=m.noisy,
        contended=m.contended,
        throttled=throttled,
    )


def _check_row(m: Measurement, params: str) -> Row:
    """A validation check: its verdict and margin as the result, and why it failed, was
    skipped or was noted."""
    from accelbench.analysis.checks import check_result, result_text

    note = check_result(m).reason
    return Row(m.case.benchmark, params, result_text(m), "-", "-", "-", m.status, note,
               ok=m.status == STATUS_OK, noisy=False)


def _samples(m: Measurement) -> str:
    """Samples, and over how many processes when more than one."""
    stats = m.stats
    if stats is None:
        return "-"
    processes = sum(1 for t in m.timings if t.samples)
    return f"{stats.n} in {processes}" if processes > 1 else str(stats.n)


def counts(measurements: Iterable[Measurement]) -> dict[str, int]:
    out = {"ok": 0, "failed": 0, "skipped": 0}
    for m in measurements:
        out[m.status] = out.get(m.status, 0) + 1
    return out
