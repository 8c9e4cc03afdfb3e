"""Each GPU's own history: its figures over the runs it took part in, whichever node it was
in, and where they changed.

A GPU is known by its key (store.gpus: the board serial, else the UUID), recorded per run
and PyTorch device index. A measurement belongs to the GPUs it ran on: a one-device case
(`cuda:N`) to the run's device N; a case on several ranks (a `world_size` parameter) to
every recorded device from N on that one of its ranks used (rank r on device N + r of its
node, as the runner places them; the ranks on other nodes used GPUs whose identities are
in their own node's runs), so a slow GPU in a collective shows in that case of every GPU
of the job, and the one-device cases tell them apart. A CPU case belongs to no GPU.

A case that measures every GPU of its node at once (the qualify family's `gate`, run on
cuda:0) names each GPU's own figure `gpu<N>`, N the device index: such a measurement
belongs instead to each recorded device N it has a `gpuN` figure for, with that figure as
its headline (named `gpu` in the series, whichever index the GPU had in each run), and to
no other device: the device it ran on gets its own figure, not the case's headline, and
alone keeps the case's telemetry (only its point can be marked throttled). Its other
figures (a pair of GPUs, `gpu0-gpu1`; the node, `node`; the counts of findings) belong to
no GPU. As in `accelbench history`, only measurements that ended ok count, with one
exception: a check that failed by judging what it measured (a gate case with a GPU below
its gate: its findings are stored) measured every GPU all the same, so each GPU's figure
is a point, the one below its gate too. A check that failed for any other reason (timed
out, crashed) adds none.

For each GPU, each case is a series as `accelbench history` makes it (one case, benchmark
version and stack; `analysis.history` with its change points, minimum effect and noise
rules), over the runs of that GPU alone, whichever node each ran on. Each change point is
a finding: "GPU 1654923001001 (now in node-b, before in node-a): gemm ... fell 18.0% from
2026-11-02 (change point, p=0.003)", p being Welch's test on the runs either side of the
step that history keeps it by.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from accelbench.analysis import changepoints
from accelbench.analysis import evidence as ev
from accelbench.analysis.history import DEFAULT_MIN_EFFECT, REGRESSED, ChangePoint, Series, history
from accelbench.analysis.values import case_sort_key
from accelbench.core.device import parse_device_spec
from accelbench.core.measurement import Measurement
from accelbench.core.names import STATUS_FAILED, STATUS_OK
from accelbench.errors import UserError
from accelbench.store import Store, StoredRun
from accelbench.store.gpus import RunGpu, StoredGpu

# A figure of one GPU of a case that measured every GPU of its node: `gpu3`.
_PER_GPU_FIGURE = re.compile(r"gpu(0|[1-9][0-9]*)")
# The name a per-GPU figure takes in its GPU's series.
PER_GPU = "gpu"


@dataclass(frozen=True)
class GpuFinding:
    """A change point of one of a GPU's series."""

    gpu: StoredGpu
    series: Series
    change: ChangePoint
    p_value: float | None

    @property
    def name(self) -> str:
        return gpu_name(self.gpu)

    def describe(self) -> str:
        verb = "fell" if self.change.kind == REGRESSED else "rose"
        when = dt.datetime.fromtimestamp(self.change.started_at, dt.timezone.utc)
        p = f", p={self.p_value:.2g}" if self.p_value is not None else ""
        return (f"GPU {self.name} ({where(self.gpu)}): {self.series.case.label} {verb} "
                f"{abs(self.change.change) * 100:.1f}% from {when:%Y-%m-%d} "
                f"(change point{p})")

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu.key, "serial": self.gpu.serial, "uuid": self.gpu.uuid,
                "case_key": self.series.case.key, "case": self.series.case.label,
                "generation_key": self.series.generation_key, "figure": self.series.figure,
                "kind": self.change.kind, "run": self.change.run_id,
                "started_at": self.change.started_at,
                "change_pct": 100.0 * self.change.change, "p_value": self.p_value,
                "description": self.describe()}


@dataclass(frozen=True)
class GpuHistory:
    """One GPU: where it has been, its series (each point names the node it ran on) and
    their change points."""

    gpu: StoredGpu
    series: tuple[Series, ...]
    findings: tuple[GpuFinding, ...] = field(default=())

    @property
    def regressed(self) -> bool:
        """A series of this GPU ends on a regression: it is still slower."""
        return any(s.latest_regression is not None for s in self.series)

    def to_dict(self) -> dict[str, Any]:
        return {**self.gpu.to_dict(), "name": gpu_name(self.gpu),
                "regressed": self.regressed,
                "findings": [f.to_dict() for f in self.findings],
                "series": [s.to_dict() for s in self.series]}


def gpu_name(gpu: StoredGpu) -> str:
    """How a finding names a GPU: its serial, else its key."""
    return gpu.serial or gpu.key


def where(gpu: StoredGpu) -> str:
    """"now in node-b, before in node-a", or "in node-a" for a GPU that never moved."""
    now = gpu.host
    before = list(dict.fromkeys(s.host for s in gpu.stays if s.host != now))
    if not before:
        return f"in {now}"
    return f"now in {now}, before in {', '.join(before)}"


def devices_of(m: Measurement, recorded: Collection[int]) -> tuple[int, ...]:
    """The recorded device indices of its run that measurement `m` ran on (see the
    module's docstring)."""
    try:
        kind, index = parse_device_spec(m.case.device)
    except (UserError, ValueError):
        return ()
    if kind == "cpu":
        return ()
    first = 0 if index is None else index
    world = m.case.param_dict.get("world_size")
    ranks = world if isinstance(world, int) and not isinstance(world, bool) and world > 1 else 1
    return tuple(i for i in sorted(recorded) if first <= i < first + ranks)


def per_gpu_figures(m: Measurement, recorded: Collection[int]
                    ) -> tuple[bool, dict[int, Measurement]]:
    """Whether `m` carries per-GPU figures (named `gpuN`), and for each recorded device
    index N it has one for, `m` with that figure alone as its headline (see the module's
    docstring)."""
    found: dict[int, Measurement] = {}
    per_gpu = False
    ran_on = set(devices_of(m, recorded))
    for figure in m.figures:
        match = _PER_GPU_FIGURE.fullmatch(figure.name)
        if match is None:
            continue
        per_gpu = True
        index = int(match.group(1))
        if index in recorded and index not in found:
            # The case's timings and rates are of all its GPUs; its telemetry of the device
            # it ran on alone.
            found[index] = replace(m, measured=(replace(figure, name=PER_GPU),), rates=(),
                                   timings=(), time_name="",
                                   telemetry=m.telemetry if index in ran_on else (),
                                   **_measured_all_the_same(m))
    return per_gpu, found


def _measured_all_the_same(m: Measurement) -> dict[str, Any]:
    """A check that failed by its verdict on what it measured counts as measured."""
    judged = isinstance(m.details, dict) and isinstance(m.details.get("findings"), list)
    return {"status": STATUS_OK, "reason": None} if m.status == STATUS_FAILED and judged else {}


def gpu_histories(
    gpus: Sequence[StoredGpu],
    run_gpus: Sequence[RunGpu],
    runs: Sequence[StoredRun],
    *,
    keys: Collection[str] | None = None,
    min_effect: float = DEFAULT_MIN_EFFECT,
    penalty_factor: float = changepoints.DEFAULT_PENALTY_FACTOR,
) -> list[GpuHistory]:
    """The history of each GPU of `gpus` (those of `keys` only, where given) over `runs`,
    the runs' devices being `run_gpus`; the GPUs with a regression first."""
    devices: dict[str, dict[int, str]] = {}
    for g in run_gpus:
        devices.setdefault(g.run_id, {})[g.device_index] = g.key
    per_gpu: dict[str, list[StoredRun]] = {}
    for run in sorted(runs, key=lambda r: (r.record.started_at, r.record.id)):
        recorded = devices.get(run.record.id)
        if not recorded:
            continue
        used: dict[str, list[Measurement]] = {}
        for m in run.measurements:
            has_per_gpu, each = per_gpu_figures(m, recorded)
            if has_per_gpu:
                for index, mine in each.items():
                    if mine.ok:
                        used.setdefault(recorded[index], []).append(mine)
                continue
            if not m.ok or m.primary is None:
                continue
            for index in devices_of(m, recorded):
                used.setdefault(recorded[index], []).append(m)
        for key, ms in used.items():
            per_gpu.setdefault(key, []).append(StoredRun(run.record, {}, tuple(ms)))
    out = []
    for gpu in gpus:
        if keys is not None and gpu.key not in keys:
            continue
        series = _series(per_gpu.get(gpu.key, []), min_effect, penalty_factor)
        findings = tuple(GpuFinding(gpu, s, c, _p_value(s, c))
                         for s in series for c in s.change_points)
        out.append(GpuHistory(gpu, tuple(series), findings))
    out.sort(key=lambda h: (not h.regressed, not h.findings, -h.gpu.last_seen, h.gpu.key))
    return out


def _series(runs: Sequence[StoredRun], min_effect: float, penalty_factor: float
            ) -> list[Series]:
    keys = {m.case.key: m.case for run in runs for m in run.measurements}
    out: list[Series] = []
    for key in sorted(keys, key=lambda k: (case_sort_key(keys[k]), k)):
        out += history(runs, key, min_effect=min_effect, penalty_factor=penalty_factor)
    return out


def _p_value(series: Series, change: ChangePoint) -> float | None:
    """Welch's test on the runs between the change points either side of `change` (each
    run's figure one value, the series' noise floor under their spread)."""
    starts = [c.index for c in series.change_points]
    at = starts.index(change.index)
    start = starts[at - 1] if at else 0
    end = starts[at + 1] if at + 1 < len(starts) else len(series.points)
    before = [[p.value] for p in series.points[start:change.index]]
    after = [[p.value] for p in series.points[change.index:end]]
    if not before or not after:
        return None
    try:
        weighed = ev.weigh(ev.side(before, series.noise_floor),
                           ev.side(after, series.noise_floor))
    except ValueError:  # no positive figure on a side: nothing to weigh
        return None
    return weighed.p_value


def find_gpus(gpus: Sequence[StoredGpu], wanted: str) -> list[StoredGpu]:
    """The GPUs `wanted` names: its key, serial or UUID (any case, "GPU-" optional); a
    UserError naming what is there when none is."""
    text = wanted.strip().lower().removeprefix("gpu-")
    found = [g for g in gpus
             if text in {(v or "").lower().removeprefix("gpu-") for v in (g.key, g.serial,
                                                                          g.uuid)}]
    if not found:
        known = ", ".join(gpu_name(g) for g in gpus[:5]) + (", ..." if len(gpus) > 5 else "")
        raise UserError(f"no GPU {wanted!r} in the result store"
                        + (f" (it knows {known})" if gpus else
                           " (it holds no GPU identities: runs record them from this "
                           "version on)"))
    return found


def load_histories(store: Store, *, gpu: str | None = None,
                   run_ids: Collection[str] | None = None,
                   min_effect: float = DEFAULT_MIN_EFFECT) -> list[GpuHistory]:
    """The histories of every GPU of `store` (or of the one `gpu` names), over its runs
    (those of `run_ids` only, where given)."""
    gpus: list[StoredGpu] = store.gpus()
    chosen = find_gpus(gpus, gpu) if gpu is not None else gpus
    keys = [g.key for g in chosen]
    by_run: dict[str, list[Measurement]] = {}
    records = {}
    for record, m in store.gpu_measurements(keys):
        if run_ids is not None and record.id not in run_ids:
            continue
        records[record.id] = record
        by_run.setdefault(record.id, []).append(m)
    runs = [StoredRun(records[i], {}, tuple(ms)) for i, ms in by_run.items()]
    return gpu_histories(chosen, store.run_gpus(list(records)), runs, keys=set(keys),
                         min_effect=min_effect)
