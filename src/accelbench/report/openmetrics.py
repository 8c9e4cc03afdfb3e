"""Each node's newest figures and validation verdicts as OpenMetrics, or as the Prometheus
text format (what node_exporter's textfile collector reads), through prometheus-client:
for the dashboards a fleet already runs.

The metrics (the README's `accelbench export` lists them): per node and device, its
newest run (`accelbench_run_*`); per case, its newest measurement (`accelbench_case_*`),
each figure of it in a metric named for its unit (`accelbench_figure_*`), and for a
validation or health check its verdict (`accelbench_validation_check_*`; a health
check's findings by level in `accelbench_figure_findings`) and the reason codes of a
check that failed or warned (`accelbench_check_reason`, one sample per code). Label
values are stored text, written by prometheus-client's escaping; label and metric names
are ours only. No sample carries a timestamp (node_exporter refuses files that do): the
times are gauges of their own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from accelbench.analysis.checks import PASS, SKIP, codes_of, is_check, stored_findings, verdict_of
from accelbench.analysis.latest import Latest, LatestCase
from accelbench.core.names import RUN_STATUSES, STATUSES
from accelbench.env.metadata import MetadataKey
from accelbench.errors import UserError
from accelbench.store import StoredRun

if TYPE_CHECKING:
    from prometheus_client.metrics_core import GaugeMetricFamily, Metric

OPENMETRICS = "openmetrics"
PROMETHEUS = "prometheus"
FORMATS = (OPENMETRICS, PROMETHEUS)
INSTALL_HINT = "pip install 'accelbench[metrics]'"

RUN_LABELS = ("node", "device")
CASE_LABELS = ("node", "device", "benchmark", "case")
FIGURE_LABELS = (*CASE_LABELS, "figure")
CHECK_LABELS = ("node", "device", "check", "case")

# The words of the units accelbench writes, as Prometheus metric names end in them
# (base units, plural), and what a rate is per; "%" is written as a ratio.
_UNIT_WORDS = {"s": "seconds", "B": "bytes", "W": "watts", "J": "joules", "FLOP": "flop",
               "OP": "ops", "sample": "samples", "token": "tokens", "tokens": "tokens",
               "query": "queries", "ranks": "ranks", "elements": "elements",
               "findings": "findings"}
_PER = {"s": "second", "J": "joule"}
PERCENT = ("ratio", 0.01)

# The stack of a run, as labels of accelbench_run_info: label -> the fingerprint keys
# that may hold it, the current one first (older records: "torch": "2.4.1+cu124").
_STACK_LABELS = (
    ("device_name", ("device.name",)), ("platform", ("platform", "device.platform")),
    ("runtime", ("runtime.name",)), ("runtime_version", ("runtime.version",)),
    ("driver_version", ("driver.driver_version", "driver")),
    ("torch_version", ("torch.version", "torch")),
)


def metric_unit(unit: str) -> tuple[str, float] | None:
    """The unit word a metric's name ends in, and the factor to it: ("flop_per_second",
    1.0) for "FLOP/s", ("ratio", 0.01) for "%"; None for a unit outside the table."""
    if unit == "%":
        return PERCENT
    top, sep, per = unit.partition("/")
    word = _UNIT_WORDS.get(top)
    if word is None or (sep and per not in _PER):
        return None
    return (f"{word}_per_{_PER[per]}" if sep else word), 1.0


def render(latest: Latest, fmt: str) -> str:
    """The metrics of `latest` as text in `fmt` (OPENMETRICS, ending in "# EOF", or
    PROMETHEUS, the text format 0.0.4)."""
    try:
        from prometheus_client import CollectorRegistry, exposition
        from prometheus_client.openmetrics import exposition as om_exposition
    except ImportError:
        raise UserError(f"--format {fmt} needs prometheus-client: {INSTALL_HINT}") from None

    class _Collector:
        def collect(self) -> Iterator[Metric]:
            return iter(families(latest))

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    generate = om_exposition.generate_latest if fmt == OPENMETRICS else exposition.generate_latest
    return generate(registry).decode("utf-8")


def families(latest: Latest) -> list[Metric]:
    """Every metric family of `latest` that has a sample, in a fixed order."""
    chosen = [*_run_families(latest.runs), *_case_families(latest.cases)]
    return [family for family in chosen if family.samples]


def _gauge(name: str, doc: str, labels: Sequence[str], unit: str = "") -> GaugeMetricFamily:
    from prometheus_client.core import GaugeMetricFamily

    return GaugeMetricFamily(name, doc, labels=labels, unit=unit)


def _run_families(runs: Sequence[StoredRun]) -> list[Metric]:
    from prometheus_client.core import InfoMetricFamily, StateSetMetricFamily

    run_info = InfoMetricFamily("accelbench_run", "The newest run of a node and device: its "
                                "id, suite and stack", labels=RUN_LABELS)
    started = _gauge("accelbench_run_started_timestamp_seconds", "When the run started",
                     RUN_LABELS, "seconds")
    finished = _gauge("accelbench_run_finished_timestamp_seconds", "When the run finished "
                      "(none while it runs)", RUN_LABELS, "seconds")
    run_status = StateSetMetricFamily("accelbench_run_status", "The run's status",
                                      labels=RUN_LABELS)
    run_cases = _gauge("accelbench_run_cases", "The run's cases by status",
                       (*RUN_LABELS, "status"))
    for run in runs:
        record = run.record
        labels = [_text(record.host), _text(record.device)]
        run_info.add_metric(labels, _run_info(run))
        started.add_metric(labels, record.started_at)
        if record.finished_at is not None:
            finished.add_metric(labels, record.finished_at)
        run_status.add_metric(labels, {s: record.status == s for s in RUN_STATUSES})
        counts = (record.n_ok, record.n_failed, record.n_skipped)
        for status, count in zip(STATUSES, counts, strict=True):
            run_cases.add_metric([*labels, status], count)
    return [run_info, started, finished, run_status, run_cases]


def _case_families(cases: Sequence[LatestCase]) -> list[Metric]:
    from prometheus_client.core import InfoMetricFamily, StateSetMetricFamily

    case_run = InfoMetricFamily("accelbench_case_run", "The run the case's newest "
                                "measurement came from", labels=CASE_LABELS)
    measured = _gauge("accelbench_case_timestamp_seconds", "When the case's newest "
                      "measurement was taken", CASE_LABELS, "seconds")
    case_status = StateSetMetricFamily("accelbench_case_status", "The case's status",
                                       labels=CASE_LABELS)
    interval = _gauge("accelbench_case_interval_halfwidth_ratio", "Half the width of the "
                      "stated interval of the time per call, over its median (0.01: +-1%)",
                      CASE_LABELS, "ratio")
    peak = _gauge("accelbench_figure_peak_ratio", "The figure's share of the device's "
                  "published peak", FIGURE_LABELS, "ratio")
    passed = _gauge("accelbench_validation_check_passed", "1: the check passed, 0: it "
                    "failed (a skipped check has no sample here)", CHECK_LABELS)
    skipped = _gauge("accelbench_validation_check_skipped", "1: the check was skipped",
                     CHECK_LABELS)
    reasons = _gauge("accelbench_check_reason", "1 for each reason code (docs/reasons.md) "
                     "of a check that failed or passed with warnings", (*CHECK_LABELS, "code"))
    by_unit: dict[str, GaugeMetricFamily] = {}
    for found in cases:
        m = found.measurement
        labels = [_text(v) for v in (found.node, found.device, m.case.benchmark, m.case.label)]
        case_run.add_metric(labels, {"run_id": _text(found.run.id)})
        measured.add_metric(labels, found.measured_at)
        case_status.add_metric(labels, {s: m.status == s for s in STATUSES})
        halfwidth = _halfwidth(found)
        if halfwidth is not None:
            interval.add_metric(labels, halfwidth)
        if is_check(m):  # labelled alike: the check is the benchmark
            verdict = verdict_of(m)
            skipped.add_metric(labels, 1 if verdict == SKIP else 0)
            if verdict != SKIP:
                passed.add_metric(labels, 1 if verdict == PASS else 0)
            for code in codes_of(m, verdict, stored_findings(m)):
                reasons.add_metric([*labels, code], 1)
        _add_figures(found, labels, by_unit, peak)
    return [case_run, measured, case_status, interval,
            *(by_unit[word] for word in sorted(by_unit)), peak, passed, skipped, reasons]


def _add_figures(found: LatestCase, labels: list[str],
                 by_unit: dict[str, GaugeMetricFamily], peak: GaugeMetricFamily) -> None:
    """Each figure of the case (the first of each name) in the metric of its unit."""
    seen: set[str] = set()
    for figure in found.measurement.figures:
        if figure.name in seen:
            continue
        seen.add(figure.name)
        figure_labels = [*labels, _text(figure.name)]
        known = metric_unit(figure.unit)
        if known is None:  # the unit, stored text, goes in a label of the one metric
            word, factor, values = "", 1.0, [*figure_labels, _text(figure.unit)]
        else:
            (word, factor), values = known, figure_labels
        if word not in by_unit:
            by_unit[word] = _figure_family(word)
        by_unit[word].add_metric(values, float(figure.value) * factor)
        share = figure.pct_of_peak
        if share is not None:
            peak.add_metric(figure_labels, share / 100)


def _figure_family(word: str) -> GaugeMetricFamily:
    """The metric of the figures in the unit `word`; "": of those in units outside the
    table, named by a `unit` label."""
    if not word:
        return _gauge("accelbench_figure", "A figure in a unit of its own, named by the "
                      "unit label", (*FIGURE_LABELS, "unit"))
    return _gauge(f"accelbench_figure_{word}", "A figure of the case, in "
                  f"{word.replace('_', ' ')}", FIGURE_LABELS, word)


def _halfwidth(found: LatestCase) -> float | None:
    spread = found.measurement.spread
    if spread is None or not spread.center > 0:
        return None
    return float((spread.high - spread.low) / 2 / spread.center)


def _run_info(run: StoredRun) -> dict[str, str]:
    record = run.record
    info: dict[str, object] = {"run_id": record.id, "suite": record.suite or "",
                               "accelbench_version": record.accelbench_version,
                               "generation_key": record.generation_key,
                               "fingerprint_id": record.fingerprint_id}
    for label, keys in _STACK_LABELS:
        values = (MetadataKey(key, label).get(run.fingerprint) for key in keys)
        info[label] = next((v for v in values if isinstance(v, (str, int, float))), "")
    return {k: _text(v) for k, v in info.items()}


def _text(value: object) -> str:
    """A label value: stored text as it is (prometheus-client escapes it), but never a
    lone surrogate, which no UTF-8 output can hold."""
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")
