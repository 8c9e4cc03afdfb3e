"""Readings of what the host is doing: CPU time, load, run queue, clock speed, processes.

Every reading comes from a source the caller names: a procfs root (default "/proc"), a
sysfs root (default "/sys") or a process-scan callable, so tests hand in faked trees and
nothing else outside is read. A reading that cannot be taken (file missing, malformed,
permission denied, psutil failing) comes back as None or empty. Sensing the host is
advisory: it must never break the benchmark it runs beside.

The package (`accelbench.env.host`) builds the sampler and the contention verdict on these readings.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

PathLike = str | os.PathLike[str]

# The columns of a cpu line in /proc/stat that make up its time, in order. guest and
# guest_nice follow them but are already counted in user and nice.
_STAT_COLUMNS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
_CPU_LINE = re.compile(r"^cpu(\d*)$")
_CPU_DIR = re.compile(r"^cpu(\d+)$")


def _read_text(path: Path) -> str | None:
    """The file's text, or None when it is absent, unreadable or not text."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, ValueError):
        return None


# ---------------------------------------------------------------------------- CPU time


@dataclass(frozen=True)
class CpuTimes:
    """Cumulative time of one CPU, or of all CPUs together, in clock ticks."""

    user: int = 0
    nice: int = 0
    system: int = 0
    idle: int = 0
    iowait: int = 0
    irq: int = 0
    softirq: int = 0
    steal: int = 0

    @property
    def busy(self) -> int:
        """Ticks spent running something (iowait is idle time; steal is counted apart)."""
        return self.user + self.nice + self.system + self.irq + self.softirq

    @property
    def total(self) -> int:
        return self.busy + self.idle + self.iowait + self.steal


@dataclass(frozen=True)
class StatSnapshot:
    """One reading of /proc/stat: CPU times, and the number of runnable tasks."""

    all: CpuTimes
    per_cpu: tuple[tuple[int, CpuTimes], ...] = ()
    procs_running: int | None = None
    procs_blocked: int | None = None

    @property
    def cpus(self) -> int:
        """CPUs online when it was read (0 when the per-CPU lines were missing)."""
        return len(self.per_cpu)


def _parse_cpu_times(fields: list[str]) -> CpuTimes | None:
    """A cpu line's numbers; old kernels print fewer columns, fewer than four is malformed."""
    if len(fields) < 4:
        return None
    try:
        values = [int(value) for value in fields[: len(_STAT_COLUMNS)]]
    except ValueError:
        return None
    if any(value < 0 for value in values):
        return None
    return CpuTimes(**dict(zip(_STAT_COLUMNS, values, strict=False)))


def _parse_count(fields: list[str]) -> int | None:
    try:
        return int(fields[0]) if fields else None
    except ValueError:
        return None


def parse_stat(text: str) -> StatSnapshot | None:
    """The text of /proc/stat as a snapshot; None without a readable summary cpu line."""
    overall: CpuTimes | None = None
    per_cpu: list[tuple[int, CpuTimes]] = []
    counts: dict[str, int | None] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        fields = rest.split()
        match = _CPU_LINE.match(name)
        if match:
            times = _parse_cpu_times(fields)
            if times is None:
                continue
            if match.group(1):
                per_cpu.append((int(match.group(1)), times))
            else:
                overall = times
        elif name in ("procs_running", "procs_blocked"):
            counts[name] = _parse_count(fields)
    if overall is None:
        return None
    return StatSnapshot(
        all=overall,
        per_cpu=tuple(per_cpu),
        procs_running=counts.get("procs_running"),
        procs_blocked=counts.get("procs_blocked"),
    )


def read_stat(procfs: PathLike = "/proc") -> StatSnapshot | None:
    """<procfs>/stat as a snapshot, or None when it cannot be read."""
    text = _read_text(Path(procfs, "stat"))
    return parse_stat(text) if text is not None else None


@dataclass(frozen=True)
class CpuShare:
    """How one CPU's (or all CPUs') time between two snapshots was spent, each 0..1."""

    busy: float
    steal: float
    iowait: float
    ticks: int


@dataclass(frozen=True)
class CpuWindow:
    """CPU time spent between two /proc/stat snapshots, overall and per CPU."""

    overall: CpuShare
    per_cpu: tuple[tuple[int, CpuShare], ...] = ()

    @property
    def cpus(self) -> int:
        return len(self.per_cpu)

    @property
    def busy_cores(self) -> float | None:
        """Busy time in cores' worth (1.5 = one and a half cores busy on average)."""
        return self.overall.busy * self.cpus if self.cpus else None

    @property
    def max_cpu_steal(self) -> tuple[int, float] | None:
        """(cpu, steal share) of the CPU that lost most time to the hypervisor."""
        if not self.per_cpu:
            return None
        cpu, share = max(self.per_cpu, key=lambda item: item[1].steal)
        return cpu, share.steal


def _share(before: CpuTimes, after: CpuTimes) -> CpuShare | None:
    """Shares of the time between two readings; counters that went backwards count 0.

    iowait is known to step backwards on tickless kernels, and a CPU that went offline and
    back restarts its counters, so a negative delta is noise rather than an error.
    """
    deltas = {
        name: max(0, getattr(after, name) - getattr(before, name)) for name in _STAT_COLUMNS
    }
    delta = CpuTimes(**deltas)
    if delta.total <= 0:
        return None
    return CpuShare(
        busy=delta.busy / delta.total,
        steal=delta.steal / delta.total,
        iowait=delta.iowait / delta.total,
        ticks=delta.total,
    )


def cpu_window(before: StatSnapshot, after: StatSnapshot) -> CpuWindow | None:
    """Busy, steal and iowait shares between two snapshots; None when no time passed."""
    overall = _share(before.all, after.all)
    if overall is None:
        return None
    earlier = dict(before.per_cpu)
    per_cpu: list[tuple[int, CpuShare]] = []
    for cpu, times in after.per_cpu:
        share = _share(earlier[cpu], times) if cpu in earlier else None
        if share is not None:
            per_cpu.append((cpu, share))
    return CpuWindow(overall=overall, per_cpu=tuple(per_cpu))


# ------------------------------------------------------------------- load and run queue


@dataclass(frozen=True)
class LoadAvg:
    """/proc/loadavg: load averages, and runnable / total scheduling entities now."""

    load1: float
    load5: float
    load15: float
    running: int | None = None
    tasks: int | None = None


def parse_loadavg(text: str) -> LoadAvg | None:
    """"0.52 0.58 0.59 3/1193 12345" as a LoadAvg; None when the averages are unreadable."""
    fields = text.split()
    try:
        load1, load5, load15 = (float(value) for value in fields[:3])
    except ValueError:
        return None
    running: int | None = None
    tasks: int | None = None
    if len(fields) > 3:
        left, _, right = fields[3].partition("/")
        running = int(left) if left.isdigit() else None
        tasks = int(right) if right.isdigit() else None
    return LoadAvg(load1=load1, load5=load5, load15=load15, running=running, tasks=tasks)


def read_loadavg(procfs: PathLike = "/proc") -> LoadAvg | None:
    text = _read_text(Path(procfs, "loadavg"))
    return parse_loadavg(text) if text is not None else None


def run_queue(stat: StatSnapshot | None, load: LoadAvg | None) -> int | None:
    """Runnable tasks now: procs_running from /proc/stat, else the running field of loadavg.

    Both count the task reading the file, so an idle host reads 1, not 0.
    """
    if stat is not None and stat.procs_running is not None:
        return stat.procs_running
    return load.running if load is not None else None


# ------------------------------------------------------------------------- frequency


@dataclass(frozen=True)
class CoreFrequency:
    """One core's clock now, and the most it can reach when the kernel says."""

    cpu: int
    cur_mhz: float
    max_mhz: float | None = None

    @property
    def ratio(self) -> float | None:
        if self.max_mhz is None or self.max_mhz <= 0:
            return None
        return self.cur_mhz / self.max_mhz


def _read_khz(path: Path) -> float | None:
    text = _read_text(path)
    try:
        value = float(text.strip()) if text is not None else None
    except ValueError:
        return None
    return value / 1000.0 if value is not None and value > 0 else None


def _sysfs_frequencies(sysfs: PathLike) -> tuple[CoreFrequency, ...]:
    """cpufreq's view: scaling_cur_freq, with cpuinfo_max_freq (else scaling_max_freq)."""
    base = Path(sysfs, "devices", "system", "cpu")
    try:
        names = os.listdir(base)
    except OSError:
        return ()
    cores: list[CoreFrequency] = []
    for name in names:
        match = _CPU_DIR.match(name)
        if not match:
            continue
        cpufreq = base / name / "cpufreq"
        cur = _read_khz(cpufreq / "scaling_cur_freq")
        if cur is None:
            continue
        top = _read_khz(cpufreq / "cpuinfo_max_freq") or _read_khz(cpufreq / "scaling_max_freq")
        cores.append(CoreFrequency(cpu=int(match.group(1)), cur_mhz=cur, max_mhz=top))
    return tuple(sorted(cores, key=lambda core: core.cpu))


def parse_cpuinfo_frequencies(text: str) -> tuple[CoreFrequency, ...]:
    """The "cpu MHz" of each processor in /proc/cpuinfo (no maximum is given there)."""
    cores: list[CoreFrequency] = []
    processor: int | None = None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "processor":
            processor = int(value) if value.isdigit() else None
        elif key == "cpu MHz" and processor is not None:
            try:
                mhz = float(value)
            except ValueError:
                continue
            if mhz > 0:
                cores.append(CoreFrequency(cpu=processor, cur_mhz=mhz))
    return tuple(cores)


def read_frequencies(
    sysfs: PathLike = "/sys", procfs: PathLike = "/proc"
) -> tuple[CoreFrequency, ...]:
    """Each core's clock from cpufreq, else from /proc/cpuinfo; empty when neither says."""
    cores = _sysfs_frequencies(sysfs)
    if cores:
        return cores
    text = _read_text(Path(procfs, "cpuinfo"))
    return parse_cpuinfo_frequencies(text) if text is not None else ()


# ------------------------------------------------------------------------- processes


@dataclass(frozen=True)
class ProcessTimes:
    """One process's CPU time so far, as psutil reads it from /proc/<pid>/stat."""

    pid: int
    name: str
    cpu_s: float
    children_s: float = 0.0
    ppid: int | None = None
    create_time: float | None = None


@dataclass(frozen=True)
class ProcessScan:
    """Every process visible at one moment; `taken_at` is wall time, like create_time."""

    taken_at: float
    processes: Mapping[int, ProcessTimes]


ProcessSource = Callable[[], ProcessScan | None]

# How much earlier than a scan a process may claim to have started and still count as
# new in the window: psutil derives create_time from the boot time, which /proc/stat gives
# to the whole second only.
_CREATE_TIME_SLACK_S = 1.0


def scan_processes() -> ProcessScan | None:
    """One pass over the process list with psutil; None when psutil cannot list them.

    Processes that vanish or deny access part-way are left out rather than failing the scan.
    """
    try:
        import psutil
    except ImportError:
        return None
    taken_at = time.time()
    found: dict[int, ProcessTimes] = {}
    attrs = ["pid", "ppid", "name", "cpu_times", "create_time"]
    try:
        for proc in psutil.process_iter(attrs, ad_value=None):
            entry = _process_times(proc.info)
            if entry is not None:
                found[entry.pid] = entry
    except (psutil.Error, OSError):
        return None
    return ProcessScan(taken_at=taken_at, processes=found)


def _process_times(info: Mapping[str, object]) -> ProcessTimes | None:
    """A psutil info dict as ProcessTimes; None without CPU times (zombie, access denied)."""
    pid, times = info.get("pid"), info.get("cpu_times")
    if not isinstance(pid, int) or times is None:
        return None
    user, system = getattr(times, "user", None), getattr(times, "system", None)
    if not isinstance(user, float) or not isinstance(system, float):
        return None
    children = float(getattr(times, "children_user", 0.0)) + float(
        getattr(times, "children_system", 0.0)
    )
    ppid, created = info.get("ppid"), info.get("create_time")
    return ProcessTimes(
        pid=pid,
        name=str(info.get("name") or "?"),
        cpu_s=user + system,
        children_s=children,
        ppid=ppid if isinstance(ppid, int) else None,
        create_time=created if isinstance(created, float) else None,
    )


def descendants(scan: ProcessScan, root: int) -> set[int]:
    """Pids of every process below `root` in the scan's parent links."""
    children: dict[int, list[int]] = {}
    for entry in scan.processes.values():
        if entry.ppid is not None:
            children.setdefault(entry.ppid, []).append(entry.pid)
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found and child != root:
                found.add(child)
                stack.append(child)
    return found


def own_cpu_s(scan: ProcessScan, pid: int, include_children: bool = False) -> float | None:
    """CPU seconds of `pid` so far, with its children's when asked; None when not seen.

    With children, both the live descendants' own time and the time of children already
    waited for (psutil's children_user/children_system) count, so a child that ends inside
    a window is neither lost nor counted twice: its time moves from one sum to the other.
    """
    entry = scan.processes.get(pid)
    if entry is None:
        return None
    if not include_children:
        return entry.cpu_s
    pids = {pid} | descendants(scan, pid)
    return sum(
        scan.processes[p].cpu_s + scan.processes[p].children_s
        for p in pids
        if p in scan.processes
    )


def process_cpu_s(before: ProcessScan, after: ProcessScan, pid: int) -> float | None:
    """CPU seconds `pid` used between two scans; None when that cannot be told.

    A pid seen in both scans with different start times was reused, and one missing from
    the first scan counts from zero only if it started after it; otherwise its time before
    the window is unknown.
    """
    now = after.processes.get(pid)
    if now is None:
        return None
    then = before.processes.get(pid)
    if then is not None and then.create_time == now.create_time:
        return max(0.0, now.cpu_s - then.cpu_s)
    started = now.create_time
    if started is not None and started >= before.taken_at - _CREATE_TIME_SLACK_S:
        return now.cpu_s
    return None


@dataclass(frozen=True)
class BusyProcess:
    """A process that used CPU in a window; `cpu_percent` is of one core (200 = two)."""

    pid: int
    name: str
    cpu_percent: float


def busy_processes(
    before: ProcessScan,
    after: ProcessScan,
    window_s: float,
    exclude: Collection[int] = (),
    min_percent: float = 10.0,
) -> tuple[BusyProcess, ...]:
    """Processes other than `exclude` that used at least `min_percent` of a core, busiest
    first. Processes that ended inside the window are not seen: their time shows only in
    the host's CPU total."""
    if window_s <= 0:
        return ()
    found: list[BusyProcess] = []
    for pid, entry in after.processes.items():
        if pid in exclude:
            continue
        used = process_cpu_s(before, after, pid)
        if used is None:
            continue
        percent = 100.0 * used / window_s
        if percent >= min_percent:
            found.append(BusyProcess(pid=pid, name=entry.name, cpu_percent=percent))
    return tuple(sorted(found, key=lambda proc: (-proc.cpu_percent, proc.pid)))


def cpu_s_of(before: ProcessScan, after: ProcessScan, pids: Iterable[int]) -> float:
    """CPU seconds the given processes used between two scans, those that can be told."""
    return sum(used for pid in pids if (used := process_cpu_s(before, after, pid)) is not None)
