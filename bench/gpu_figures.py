"""The GPU check's figures table: every figure in its store beside its published peak or
the range expected for the device, with what is out of range marked.

Reads only the store, so the table says exactly what was stored: the measured cases
(GEMM, copies, launch, training with its MFU, inference), the plain-PyTorch reference of
the headline figures and the energy counter's check (gpu_reference.py stores both). A
case measured more than once (a store used twice) is shown as last measured.

A figure is out of range when it passes its published peak (no figure can honestly:
an MFU over 100% is fp32 work run as TF32, or a peak taken for the wrong math), when it
lies outside the range gpu_expectations.py expects of the device for that headline, or
when its case failed. A skipped case is shown with its reason and is not a failure.

    python bench/gpu_figures.py STORE
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import Figure, Measurement
from accelbench.core.units import format_pct, format_value
from accelbench.report.text import markdown_table
from gpu_expectations import EXPECTED, HEADLINES, Range, product_for

# The benchmarks the table shows, in its order; gpu_reference.py stores the last two.
SHOWN = ("gemm", "memory", "launch", "train", "infer", "serve-llm", "gpu-reference",
         "gpu-energy")
REFERENCE, ENERGY = "gpu-reference", "gpu-energy"
HEADER = ("case", "figure", "value", "published peak", "% of peak", "expected", "verdict")


@dataclass(frozen=True)
class Line:
    case: str
    figure: str
    value: str
    peak: str
    pct: str
    expected: str
    verdict: str
    ok: bool


def figures_table(store_path: Path) -> tuple[list[str], bool]:
    """The table's lines and whether every figure in it is in range."""
    from accelbench.store import Store

    if not store_path.exists():
        return [f"figures: nothing was stored ({store_path.name} was not made)"], False
    with Store.open(str(store_path), create=False) as store:
        runs = [store.load_run(r.id) for r in store.list_runs()]
    latest: dict[str, tuple[Measurement, DeviceInfo]] = {}
    for run in sorted(runs, key=lambda r: r.record.started_at):
        device = DeviceInfo.from_dict(run.fingerprint["device"])
        for m in run.measurements:
            if m.case.benchmark in SHOWN:
                latest[m.case.key] = (m, device)
    order = {name: i for i, name in enumerate(SHOWN)}
    chosen = sorted(latest.values(), key=lambda md: order[md[0].case.benchmark])
    lines = [line for m, device in chosen for line in lines_of(m, device)]
    if not lines:
        return ["figures: the store holds no figure of the check"], False
    body = [(ln.case, ln.figure, ln.value, ln.peak, ln.pct, ln.expected, ln.verdict)
            for ln in lines]
    out = sum(not ln.ok for ln in lines)
    devices = sorted({d.name for _, d in chosen})
    title = f"GPU check figures: {', '.join(devices)}"
    tail = f"figures: {len(lines) - out} of {len(lines)} in range" + (
        f", {out} OUT OF RANGE or failed" if out else "")
    return [title, "", *markdown_table(HEADER, body, numeric=(2, 3, 4)), "", tail], out == 0


def case_label(m: Measurement) -> str:
    """The case by its benchmark and the parameters that say something: those set to
    nothing, "no" or zero are left out, as is the CPU's thread count."""
    said = [f"{k}={v}" for k, v in m.case.shown_params
            if v not in ("", "no", 0, False, None) and k != "threads"]
    return " ".join([m.case.benchmark, *said])


def lines_of(m: Measurement, device: DeviceInfo) -> list[Line]:
    label = case_label(m)
    if not m.ok:
        verdict = f"{m.status}: {m.reason or 'no reason given'}"
        failed = m.status != "skipped"
        return [Line(label, "-", "-", "-", "-", "-",
                     ("FAILED " if failed else "") + verdict, not failed)]
    if m.case.benchmark in (REFERENCE, ENERGY):
        return [_stored_verdict(m)]
    wanted = [m.primary] + ([m.figure("mfu")] if m.case.benchmark == "train" else [])
    return [_judged(m, f, device) for f in wanted if f is not None]


def _judged(m: Measurement, figure: Figure, device: DeviceInfo) -> Line:
    problems = []
    if figure.name == "mfu" and figure.value > 100.0:
        problems.append("MFU above 100%: the work ran faster than the peak it is taken "
                        "against")
    elif figure.peak and figure.higher_is_better and figure.value > figure.peak:
        problems.append("above the published peak")
    expected = _expected(m, figure, device)
    if expected is not None and not expected.holds(figure.value):
        problems.append(f"outside {expected.describe(figure.unit)}")
    shown = expected.describe(figure.unit) if expected is not None else "-"
    verdict = "ok" if not problems else "OUT: " + "; ".join(problems)
    if m.contended or m.throttled:
        verdict += " (measured " + " and ".join(
            w for w, on in (("contended", m.contended), ("throttled", m.throttled)) if on) + ")"
    return Line(case_label(m), figure.name, format_value(figure.value, figure.unit),
                format_value(figure.peak, figure.unit) if figure.peak else "-",
                format_pct(figure.pct_of_peak), shown, verdict, not problems)


def _expected(m: Measurement, figure: Figure, device: DeviceInfo) -> Range | None:
    """The device's range for this figure where it is one of the headline figures."""
    product = product_for(device)
    if product is None:
        return None
    for headline in HEADLINES:
        if (m.case.benchmark == headline.benchmark and figure.name == headline.figure
                and all(m.case.param_dict.get(k) == v for k, v in headline.params.items())):
            return EXPECTED[product].ranges.get(headline.key)
    return None


def _stored_verdict(m: Measurement) -> Line:
    """The reference's figure beside accelbench's, or the energy counter against the
    power integral, with the verdict gpu_reference.py stored it with."""
    shown = " / ".join(format_value(f.value, f.unit) if f.unit else f"{f.value:.3f}"
                       for f in m.measured)
    names = " / ".join(f.name for f in m.measured)
    verdict = str(m.details.get("verdict", "-"))
    return Line(m.details.get("label", m.case.label), names or "-", shown or "-", "-", "-",
                str(m.details.get("expected", "-")), verdict, not verdict.startswith("FAIL"))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python bench/gpu_figures.py STORE", file=sys.stderr)
        return 2
    lines, ok = figures_table(Path(args[0]))
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
