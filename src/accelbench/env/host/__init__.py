"""Is the host busy with other work? Sensing it beside a benchmark, and saying so plainly.

A figure measured while another process keeps the CPUs busy, or while the hypervisor
steals time, can be several times slower and still look converged, because the noise is
steady. `HostSampler` runs beside a measurement and returns a `HostReport`: what the host
did in that window (load, run queue, how busy the CPUs were with work that is not the
measurement's own, steal time, clock speed, the busiest other processes, GPU users) and a
verdict, `contended`, with its `reasons` in plain words.

Footprint. The sampler shares the machine with the benchmark, so each tick (every 0.2 s
by default) reads two small files, <procfs>/stat and <procfs>/loadavg, and every fifth
tick the cores' clock speeds: about 0.15 ms of CPU time a tick on a small VM, held under
the GIL in the measuring process, so under 0.1% of one core. The process list is
scanned with psutil only at start and at stop: one scan reads /proc/<pid>/stat of every
process on the host, thousands of files on a busy machine, and CPU time is cumulative
anyway, so two scans give each process's use over the whole window exactly. What the
two scans miss, a process that started and ended inside the window, still shows in the
host's CPU total, so it is counted as other work without a name. GPU readings are
taken at stop only.

The measurement's own CPU time (psutil's cpu_times of `pid`, with its children when
asked) is taken off the host's busy time, so a benchmark that keeps every core busy is
not called contended by itself. The same goes for `ignore_pids`, which a supervisor uses
for itself; they are exact pids, not trees, so a sibling worker started by the same
supervisor is still seen.

Host sensing lives in this package: `readings` (what procfs, sysfs and psutil say),
`gpu` (who uses the GPUs, through the vendor libraries), and here the sampler and the
verdict built on them. CPU energy, clocks and steal as telemetry channels read the same
`readings` (env.telemetry.host).

The reference loop (`reference`), when the probe asks for it, is timed just before the
opening readings and just after the closing ones: how fast the host ran the same fixed
work around the measurement, which no counter shows (`reference_s`).

Format history of HostReport.to_dict() (FORMAT_VERSION):
  1: first version.
  2: adds "reference_s" (seconds of the reference work before and after the window,
     empty when not taken) and "reference" (what that work is).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from accelbench.env.host.gpu import (
    GpuReading,
    GpuSource,
    engine_shares,
    read_gpu,
    read_gpu_counters,
)
from accelbench.env.host.readings import (
    BusyProcess,
    CoreFrequency,
    CpuWindow,
    LoadAvg,
    PathLike,
    ProcessScan,
    ProcessSource,
    StatSnapshot,
    busy_processes,
    cpu_s_of,
    cpu_window,
    descendants,
    own_cpu_s,
    read_frequencies,
    read_loadavg,
    read_stat,
    run_queue,
    scan_processes,
)

__all__ = [
    "FORMAT_VERSION",
    "BusyProcess",
    "ContentionThresholds",
    "GpuUser",
    "HostProbe",
    "HostReport",
    "HostSampler",
    "assess",
    "contention_reasons",
    "snapshot_quiet",
    "wait_quiet",
]

FORMAT_VERSION = 2
# How many of the busiest other processes a report keeps by name.
TOP_PROCESSES = 5


@dataclass(frozen=True)
class ContentionThresholds:
    """When a window counts as contended; every value can be overridden.

    steal_fraction 0.05: steal is time the hypervisor gave this VM's CPUs to other guests.
      Shared clouds show 0-2% in quiet periods; past 5% of all CPU time every CPU-bound
      figure is slowed by about that much, well beyond a ±1% convergence tolerance.
    cpu_steal_fraction 0.15: one CPU losing a sixth of its time slows whatever runs on it
      even when the average is low. Set higher than the overall bound because a single
      CPU's share over a one-second window rests on only ~100 clock ticks.
    process_cpu_percent 10: an idle daemon (sshd, journald, a kworker) uses well under 1%
      of a core; one at a tenth of a core is doing real work, and is named.
    others_busy_cores 0.25: all CPU time not the measurement's own, in cores. It sums
      every background daemon and kernel thread, and absorbs the few clock ticks by which
      /proc/stat and per-process accounting differ over a window, so it sits above the
      per-process bound; a quarter core of other work is 12% of a 2-core VM.
    run_queue_excess 2: the mean number of runnable tasks may exceed the core count by
      this much. The reader itself is always counted once, and a benchmark running one
      thread per core reads cores + 1; two more waiting on average means threads queue.
      A benchmark that runs more threads than cores trips this too, which is worth saying.
    frequency_ratio 0.6: the busy cores' clock below 60% of the most they can reach. All
      cores busy at once run a good way under single-core turbo (70-80% is normal on
      servers), so only deeper drops (power capping, thermal throttling, a powersave
      governor) are flagged.
    busy_core_share 0.5: a core counts as busy, for the frequency rule, when it was busy
      half the time between two ticks; idle cores clock down and say nothing.
    gpu_process_percent 10: another process holding a tenth of a GPU's compute.
    """

    steal_fraction: float = 0.05
    cpu_steal_fraction: float = 0.15
    process_cpu_percent: float = 10.0
    others_busy_cores: float = 0.25
    run_queue_excess: float = 2.0
    frequency_ratio: float = 0.6
    busy_core_share: float = 0.5
    gpu_process_percent: float = 10.0


@dataclass(frozen=True)
class GpuUser:
    """A process, not the measurement's own, holding a GPU; utilisation when known."""

    pid: int
    name: str
    device: int
    utilization_percent: float | None = None


@dataclass(frozen=True)
class HostReport:
    """What the host did during one window, and whether that makes the window contended.

    Fractions are 0..1 of all CPU time; `*_cores` are in cores' worth (1.5 = one and a
    half cores busy on average); None means the reading was not available, and `unknown`
    lists those in words.
    """

    window_s: float = 0.0
    samples: int = 0
    cpus: int | None = None
    load_max: float | None = None
    load_mean: float | None = None
    run_queue_max: int | None = None
    run_queue_mean: float | None = None
    busy_fraction: float | None = None
    iowait_fraction: float | None = None
    steal_fraction: float | None = None
    max_cpu_steal: float | None = None
    max_steal_cpu: int | None = None
    own_cores: float | None = None
    ignored_cores: float | None = None
    others_busy_cores: float | None = None
    others_busy_fraction: float | None = None
    frequency_ratio_min: float | None = None
    frequency_ratio_max: float | None = None
    busy_frequency_ratio: float | None = None
    busy_processes: tuple[BusyProcess, ...] = ()
    busy_process_count: int = 0
    gpu: GpuReading | None = None
    gpu_users: tuple[GpuUser, ...] = ()
    contended: bool = False
    reasons: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    reference_s: tuple[float, ...] = ()  # the reference work before and after the window
    reference: str | None = None  # what that work is (env.host.reference.REFERENCE)
    format_version: int = field(default=FORMAT_VERSION)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict for a measurement's details."""
        data: dict[str, Any] = {name: getattr(self, name) for name in _SCALARS}
        data["format_version"] = FORMAT_VERSION
        data["busy_processes"] = [
            {"pid": p.pid, "name": p.name, "cpu_percent": p.cpu_percent}
            for p in self.busy_processes
        ]
        data["gpu"] = self.gpu.to_dict() if self.gpu is not None else None
        data["gpu_users"] = [
            {"pid": u.pid, "name": u.name, "device": u.device,
             "utilization_percent": u.utilization_percent}
            for u in self.gpu_users
        ]
        data["reasons"] = list(self.reasons)
        data["unknown"] = list(self.unknown)
        data["reference_s"] = list(self.reference_s)
        data["reference"] = self.reference
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostReport:
        """The report `to_dict` wrote; keys it lacks take their defaults."""
        version = data.get("format_version", FORMAT_VERSION)
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise ValueError(
                f"host report format {version!r} is newer than this accelbench reads "
                f"({FORMAT_VERSION})"
            )
        values: dict[str, Any] = {name: data[name] for name in _SCALARS if name in data}
        gpu = data.get("gpu")
        return cls(
            **values,
            busy_processes=tuple(
                BusyProcess(pid=int(p["pid"]), name=str(p["name"]),
                            cpu_percent=float(p["cpu_percent"]))
                for p in data.get("busy_processes") or ()
            ),
            gpu=GpuReading.from_dict(gpu) if isinstance(gpu, Mapping) else None,
            gpu_users=tuple(
                GpuUser(pid=int(u["pid"]), name=str(u["name"]), device=int(u["device"]),
                        utilization_percent=_opt_float(u.get("utilization_percent")))
                for u in data.get("gpu_users") or ()
            ),
            reasons=tuple(str(r) for r in data.get("reasons") or ()),
            unknown=tuple(str(u) for u in data.get("unknown") or ()),
            reference_s=tuple(float(v) for v in data.get("reference_s") or ()),
            reference=None if data.get("reference") is None else str(data["reference"]),
            format_version=FORMAT_VERSION,
        )


_SCALARS = (
    "window_s", "samples", "cpus", "load_max", "load_mean", "run_queue_max", "run_queue_mean",
    "busy_fraction", "iowait_fraction", "steal_fraction", "max_cpu_steal", "max_steal_cpu",
    "own_cores", "ignored_cores", "others_busy_cores", "others_busy_fraction",
    "frequency_ratio_min", "frequency_ratio_max", "busy_frequency_ratio",
    "busy_process_count", "contended",
)  # fmt: skip


# ------------------------------------------------------------------------------ verdict


def _plural(count: int, word: str, suffix: str = "s") -> str:
    return f"{count} {word}{'' if count == 1 else suffix}"


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.0f}%"


def _steal_reasons(report: HostReport, limits: ContentionThresholds) -> list[str]:
    if report.steal_fraction is not None and report.steal_fraction > limits.steal_fraction:
        return [f"steal time {_percent(report.steal_fraction)} of CPU time"]
    if (
        report.max_cpu_steal is not None
        and report.max_cpu_steal > limits.cpu_steal_fraction
    ):
        return [f"steal time {_percent(report.max_cpu_steal)} on cpu{report.max_steal_cpu}"]
    return []


def _process_reasons(report: HostReport, limits: ContentionThresholds) -> list[str]:
    named = [p for p in report.busy_processes if p.cpu_percent >= limits.process_cpu_percent]
    if not named:
        return []
    count = max(report.busy_process_count, len(named))
    listed = ", ".join(f"{p.name} (pid {p.pid}, {p.cpu_percent:.0f}% CPU)" for p in named)
    more = f", and {count - len(named)} more" if count > len(named) else ""
    return [f"{_plural(count, 'other process', 'es')} busy: {listed}{more}"]


def _other_work_reasons(report: HostReport, limits: ContentionThresholds) -> list[str]:
    others = report.others_busy_cores
    if others is None or others <= limits.others_busy_cores:
        return []
    of_cores = f" of {_plural(report.cpus, 'core')}" if report.cpus else " cores"
    return [f"other work used {others:.2f}{of_cores}"]


def _run_queue_reasons(report: HostReport, limits: ContentionThresholds) -> list[str]:
    mean, cpus = report.run_queue_mean, report.cpus
    if mean is None or not cpus or mean <= cpus + limits.run_queue_excess:
        return []
    peak = report.run_queue_max if report.run_queue_max is not None else round(mean)
    return [f"run queue {peak} on {_plural(cpus, 'core')} (mean {mean:.1f})"]


def _frequency_reasons(report: HostReport, limits: ContentionThresholds) -> list[str]:
    ratio = report.busy_frequency_ratio
    if ratio is None or ratio >= limits.frequency_ratio:
        return []
    return [f"CPU at {_percent(ratio)} of its max frequency"]


def _gpu_reasons(report: HostReport, limits: ContentionThresholds) -> list[str]:
    busy = [
        u for u in report.gpu_users
        if u.utilization_percent is not None
        and u.utilization_percent >= limits.gpu_process_percent
    ]
    if not busy:
        return []
    listed = ", ".join(
        f"{u.name} (pid {u.pid}, {u.utilization_percent:.0f}% of GPU {u.device})" for u in busy
    )
    return [f"{_plural(len(busy), 'other process', 'es')} busy on the GPU: {listed}"]


_RULES = (
    _steal_reasons,
    _process_reasons,
    _other_work_reasons,
    _run_queue_reasons,
    _frequency_reasons,
    _gpu_reasons,
)


def contention_reasons(
    report: HostReport, thresholds: ContentionThresholds | None = None
) -> tuple[str, ...]:
    """Why the window counts as contended, in plain words; empty when it does not.

    Load average is reported but not judged: it is a one-minute average that lags the
    window, and it counts the benchmark's own threads and tasks waiting on disk.
    """
    limits = thresholds or ContentionThresholds()
    return tuple(reason for rule in _RULES for reason in rule(report, limits))


def assess(report: HostReport, thresholds: ContentionThresholds | None = None) -> HostReport:
    """The report with `contended` and `reasons` set from its readings."""
    reasons = contention_reasons(report, thresholds)
    return replace(report, contended=bool(reasons), reasons=reasons)


# ------------------------------------------------------------------------------ sampler


@dataclass(frozen=True)
class HostProbe:
    """Where the readings come from and whose work is the measurement's own.

    `pid` is the measuring process (default: this one); `include_children` counts its
    descendants as its own; `ignore_pids` are further processes whose work is not
    contention (a supervisor). The sources are seams for tests: a procfs and a sysfs root,
    a process scan (None: no per-process readings), a GPU reading (None: none taken) with
    its opening reading (for amdsmi's running counters; None: none), and the reference
    work, timed in this process around the window (None: not timed; the
    measuring process passes `reference.reference_seconds`).
    """

    pid: int | None = None
    include_children: bool = False
    ignore_pids: frozenset[int] = frozenset()
    procfs: PathLike = "/proc"
    sysfs: PathLike = "/sys"
    processes: ProcessSource | None = scan_processes
    gpu: GpuSource | None = read_gpu
    gpu_opening: Callable[[], GpuReading | None] | None = read_gpu_counters
    reference: Callable[[], float] | None = None


@dataclass
class _Tally:
    """Running aggregates of the ticks, so a long window keeps no list of samples."""

    samples: int = 0
    load_sum: float = 0.0
    load_n: int = 0
    load_max: float | None = None
    queue_sum: int = 0
    queue_n: int = 0
    queue_max: int | None = None
    freq_min: float | None = None
    freq_max: float | None = None
    freq_seen: bool = False
    busy_freq_sum: float = 0.0
    busy_freq_n: int = 0

    def add_load(self, load: LoadAvg | None, queue: int | None) -> None:
        if load is not None:
            self.load_sum += load.load1
            self.load_n += 1
            self.load_max = load.load1 if self.load_max is None else max(self.load_max, load.load1)
        if queue is not None:
            self.queue_sum += queue
            self.queue_n += 1
            self.queue_max = max(queue, self.queue_max if self.queue_max is not None else queue)

    def add_frequencies(
        self, cores: tuple[CoreFrequency, ...], step: CpuWindow | None, busy_share: float
    ) -> None:
        """Clock ratios of all cores, and the mean ratio of the cores busy since last tick."""
        self.freq_seen = self.freq_seen or bool(cores)
        ratios = {core.cpu: core.ratio for core in cores if core.ratio is not None}
        for ratio in ratios.values():
            self.freq_min = ratio if self.freq_min is None else min(self.freq_min, ratio)
            self.freq_max = ratio if self.freq_max is None else max(self.freq_max, ratio)
        if step is None:
            return
        busy = [ratios[cpu] for cpu, share in step.per_cpu
                if share.busy >= busy_share and cpu in ratios]
        if busy:
            self.busy_freq_sum += sum(busy) / len(busy)
            self.busy_freq_n += 1


@dataclass(frozen=True)
class _Mark:
    """The readings taken at one end of the window."""

    at: float
    stat: StatSnapshot | None
    scan: ProcessScan | None
    scan_at: float


class HostSampler:
    """Samples the host beside a measurement: `start()`, run it, `stop()` for the report.

    Ticks run in a daemon thread every `interval_s`; `start(background=False)` leaves the
    ticking to the caller (`tick()`), which `snapshot_quiet` and tests use. The clocks are
    read every `frequency_every` ticks and at stop, since on a large host that is one file
    per core. The report names the `top_processes` busiest other processes and counts the
    rest. It is also a context manager; the report is then at `.report` after the block.
    """

    def __init__(
        self,
        probe: HostProbe | None = None,
        *,
        interval_s: float = 0.2,
        thresholds: ContentionThresholds | None = None,
        frequency_every: int = 5,
        top_processes: int = TOP_PROCESSES,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self.probe = probe or HostProbe()
        self.pid = self.probe.pid if self.probe.pid is not None else os.getpid()
        self.interval_s = interval_s
        self.thresholds = thresholds or ContentionThresholds()
        self.frequency_every = max(1, frequency_every)
        self.top_processes = max(0, top_processes)
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._tally = _Tally()
        self._start: _Mark | None = None
        self._since_wall: float | None = None
        self._previous: StatSnapshot | None = None
        self._last: StatSnapshot | None = None
        self._last_at = 0.0
        self._ticks = 0
        self._error: str | None = None
        self._reference_s: list[float] = []
        self._gpu_opening: GpuReading | None = None
        self._gpu_opened_at = 0.0
        self.report: HostReport | None = None

    # -- lifecycle

    def start(self, background: bool = True) -> HostSampler:
        """Take the opening readings and, in the background, start ticking."""
        if self._start is not None:
            raise RuntimeError("HostSampler.start() called twice")
        self._time_reference()
        if self.probe.gpu is not None and self.probe.gpu_opening is not None:
            self._gpu_opening = self.probe.gpu_opening()
            self._gpu_opened_at = self._clock()
        self._since_wall = self._wall_clock()
        self._start = self._mark()
        self._previous = self._last = self._start.stat
        self._last_at = self._start.at
        self._tally.samples = 1 if self._start.stat is not None else 0
        load = read_loadavg(self.probe.procfs)
        self._tally.add_load(load, run_queue(self._start.stat, load))
        self._read_frequencies(None)
        if background:
            self._thread = threading.Thread(
                target=self._run, name="accelbench-host-sampler", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> HostReport:
        """Stop ticking, take the closing readings and return the report."""
        if self._start is None:
            raise RuntimeError("HostSampler.stop() called before start()")
        if self.report is not None:
            return self.report
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        self._tick(final=True)
        end = _Mark(at=self._last_at, stat=self._last, scan=self._scan(), scan_at=self._clock())
        gpu = self.probe.gpu(self._since_wall) if self.probe.gpu is not None else None
        if gpu is not None:
            gpu = engine_shares(self._gpu_opening, gpu, self._clock() - self._gpu_opened_at)
        self._time_reference()
        report = self._build(self._start, end, gpu)
        if self._reference_s:
            from accelbench.env.host.reference import REFERENCE

            report = replace(report, reference_s=tuple(self._reference_s), reference=REFERENCE)
        self.report = assess(report, self.thresholds)
        return self.report

    def __enter__(self) -> HostSampler:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def tick(self) -> None:
        """One sample: /proc/stat and /proc/loadavg, and the clocks every few ticks."""
        self._tick(final=False)

    # -- readings

    def _run(self) -> None:
        while not self._stopping.wait(self.interval_s):
            try:
                self._tick(final=False)
            except Exception as exc:  # never take the benchmark down with the sampler
                self._error = f"{type(exc).__name__}: {exc}"
                return

    def _tick(self, final: bool) -> None:
        with self._lock:
            stat = read_stat(self.probe.procfs)
            at = self._clock()
            load = read_loadavg(self.probe.procfs)
            self._tally.add_load(load, run_queue(stat, load))
            self._ticks += 1
            if stat is None:
                return
            self._tally.samples += 1
            step = cpu_window(self._previous, stat) if self._previous is not None else None
            if final or self._ticks % self.frequency_every == 0:
                self._read_frequencies(step)
            self._previous = stat
            self._last, self._last_at = stat, at

    def _time_reference(self) -> None:
        if self.probe.reference is not None:
            self._reference_s.append(self.probe.reference())

    def _read_frequencies(self, step: CpuWindow | None) -> None:
        cores = read_frequencies(self.probe.sysfs, self.probe.procfs)
        self._tally.add_frequencies(cores, step, self.thresholds.busy_core_share)

    def _scan(self) -> ProcessScan | None:
        source = self.probe.processes
        return source() if source is not None else None

    def _mark(self) -> _Mark:
        stat = read_stat(self.probe.procfs)
        at = self._clock()
        return _Mark(at=at, stat=stat, scan=self._scan(), scan_at=self._clock())

    # -- the report

    def _own_pids(self, *scans: ProcessScan | None) -> set[int]:
        """The measurement's processes and the ignored ones: never other work."""
        pids = {self.pid} | set(self.probe.ignore_pids)
        if self.probe.include_children:
            for scan in scans:
                if scan is not None:
                    pids |= descendants(scan, self.pid)
        return pids

    def _build(self, start: _Mark, end: _Mark, gpu: GpuReading | None) -> HostReport:
        tally, unknown = self._tally, []
        window = (
            cpu_window(start.stat, end.stat)
            if start.stat is not None and end.stat is not None
            else None
        )
        cpu_s = end.at - start.at
        own, ignored = self._own_and_ignored(start, end)
        busy_cores = window.busy_cores if window is not None else None
        others: float | None = None
        if busy_cores is not None and own is not None:
            others = max(0.0, busy_cores - own - (ignored or 0.0))
        cpus = window.cpus if window is not None and window.cpus else None
        steal = window.max_cpu_steal if window is not None else None
        exclude = self._own_pids(start.scan, end.scan)
        busy = self._busy(start, end, exclude)
        if window is None:
            unknown.append("CPU time")
        if tally.load_n == 0:
            unknown.append("load average")
        if tally.queue_n == 0:
            unknown.append("run queue")
        if start.scan is None or end.scan is None:
            unknown.append("processes")
        elif own is None:
            unknown.append(f"CPU time of the measuring process (pid {self.pid})")
        if not tally.freq_seen:
            unknown.append("CPU frequency")
        elif tally.freq_min is None:
            unknown.append("maximum CPU frequency")
        if self._error is not None:
            unknown.append(f"sampling stopped early ({self._error})")
        return HostReport(
            window_s=round(max(cpu_s, end.scan_at - start.scan_at), 3),
            samples=tally.samples,
            cpus=cpus,
            load_max=tally.load_max,
            load_mean=_r(tally.load_sum / tally.load_n, 2) if tally.load_n else None,
            run_queue_max=tally.queue_max,
            run_queue_mean=_r(tally.queue_sum / tally.queue_n, 2) if tally.queue_n else None,
            busy_fraction=_r(window.overall.busy, 4) if window is not None else None,
            iowait_fraction=_r(window.overall.iowait, 4) if window is not None else None,
            steal_fraction=_r(window.overall.steal, 4) if window is not None else None,
            max_cpu_steal=_r(steal[1], 4) if steal is not None else None,
            max_steal_cpu=steal[0] if steal is not None else None,
            own_cores=_r(own, 3),
            ignored_cores=_r(ignored, 3),
            others_busy_cores=_r(others, 3),
            others_busy_fraction=_r(others / cpus, 4) if others is not None and cpus else None,
            frequency_ratio_min=_r(tally.freq_min, 3),
            frequency_ratio_max=_r(tally.freq_max, 3),
            busy_frequency_ratio=(
                _r(tally.busy_freq_sum / tally.busy_freq_n, 3) if tally.busy_freq_n else None
            ),
            busy_processes=busy[: self.top_processes],
            busy_process_count=len(busy),
            gpu=gpu,
            gpu_users=self._gpu_users(gpu, end.scan, exclude),
            unknown=tuple(unknown),
        )

    def _own_and_ignored(self, start: _Mark, end: _Mark) -> tuple[float | None, float | None]:
        """Cores' worth of the measurement's own CPU use, and of the ignored processes'."""
        if start.scan is None or end.scan is None:
            return None, None
        span = end.scan_at - start.scan_at
        if span <= 0:
            return None, None
        include = self.probe.include_children
        before = own_cpu_s(start.scan, self.pid, include)
        after = own_cpu_s(end.scan, self.pid, include)
        own = max(0.0, after - before) / span if before is not None and after is not None else None
        # An ignored pid that is also the measurement's own is counted once, as its own.
        ignored_pids = set(self.probe.ignore_pids) - {self.pid}
        if include:
            ignored_pids -= descendants(start.scan, self.pid) | descendants(end.scan, self.pid)
        return own, cpu_s_of(start.scan, end.scan, ignored_pids) / span

    def _busy(self, start: _Mark, end: _Mark, exclude: set[int]) -> tuple[BusyProcess, ...]:
        if start.scan is None or end.scan is None:
            return ()
        found = busy_processes(
            start.scan, end.scan, end.scan_at - start.scan_at, exclude,
            self.thresholds.process_cpu_percent,
        )
        return tuple(replace(p, cpu_percent=round(p.cpu_percent, 1)) for p in found)

    @staticmethod
    def _gpu_users(
        gpu: GpuReading | None, scan: ProcessScan | None, exclude: set[int]
    ) -> tuple[GpuUser, ...]:
        """Other processes on the GPUs. Only pids this process can see are kept: NVML and
        amdsmi report pids of the host's namespace, which inside a container may be the
        measurement itself under another number."""
        if gpu is None or scan is None:
            return ()
        return tuple(
            GpuUser(pid=proc.pid, name=scan.processes[proc.pid].name, device=device.index,
                    utilization_percent=proc.utilization_percent)
            for device in gpu.devices
            for proc in device.processes
            if proc.pid not in exclude and proc.pid in scan.processes
        )


def _opt_float(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _r(value: float | None, digits: int) -> float | None:
    """Rounded for storage: the readings are not more precise than this anyway."""
    return round(value, digits) if value is not None else None


# ----------------------------------------------------------------------- waiting for quiet


Measure = Callable[[float], HostReport]


def snapshot_quiet(
    window_s: float = 1.0,
    *,
    probe: HostProbe | None = None,
    thresholds: ContentionThresholds | None = None,
    interval_s: float = 0.2,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[bool, HostReport]:
    """Sample one window in this thread; (quiet, report)."""
    sampler = HostSampler(probe, interval_s=interval_s, thresholds=thresholds, clock=clock)
    sampler.start(background=False)
    deadline = clock() + window_s
    while (left := deadline - clock()) > 0:
        sleep(min(interval_s, left))
        if clock() < deadline:
            sampler.tick()
    report = sampler.stop()
    return not report.contended, report


def wait_quiet(
    max_wait_s: float,
    window_s: float = 1.0,
    *,
    thresholds: ContentionThresholds | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    probe: HostProbe | None = None,
    interval_s: float = 0.2,
    measure: Measure | None = None,
) -> tuple[bool, float, HostReport]:
    """Sample windows back to back until one is not contended; (quiet, waited_s, last report).

    At least one window is always taken, and no window is started that would end past
    `max_wait_s`, so the wait is bounded by max(max_wait_s, window_s). `measure` replaces
    the sampling and the judging (it is given the window length and its report's
    `contended` is taken as it is), for tests and for callers that sample differently.
    """
    def sample(length: float) -> HostReport:
        return snapshot_quiet(length, probe=probe, thresholds=thresholds,
                              interval_s=interval_s, clock=clock, sleep=sleep)[1]

    take = measure or sample
    began = clock()
    while True:
        report = take(window_s)
        waited = clock() - began
        if not report.contended:
            return True, waited, report
        if waited + window_s > max_wait_s:
            return False, waited, report
