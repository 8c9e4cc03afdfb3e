"""Host telemetry: CPU package energy (RAPL powercap), clock speed, load and steal.

RAPL's energy_uj has been readable by root only since Linux 5.10 (a power side channel,
CVE-2020-8694), and VMs rarely expose powercap at all, so its absence is the common case
and is reported as a reason, not an error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from accelbench.core.telemetry import CPU_ENERGY_J, CPU_FREQ_MHZ, LOAD1, STEAL_PCT
from accelbench.env.host.readings import (
    PathLike,
    StatSnapshot,
    cpu_window,
    read_frequencies,
    read_loadavg,
    read_stat,
)

_PACKAGE = re.compile(r"^intel-rapl:(\d+)$")  # packages; intel-rapl:N:M are sub-domains


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def find_rapl(sysfs: PathLike = "/sys") -> tuple[list[tuple[Path, int | None]], str | None]:
    """RAPL package domains as (energy_uj path, max_energy_range_uj), or why there are none."""
    base = Path(sysfs, "class", "powercap")
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return [], f"no {base} (no RAPL powercap: usual in a VM)"
    packages = [base / n for n in names if _PACKAGE.match(n)]
    if not packages:
        return [], f"no RAPL package domains under {base} (usual in a VM)"
    found: list[tuple[Path, int | None]] = []
    for package in packages:
        energy = package / "energy_uj"
        try:
            int(energy.read_text(encoding="utf-8").strip())
        except PermissionError:
            return [], f"{energy} is not readable (root only since Linux 5.10)"
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            return [], f"{energy} could not be read: {type(exc).__name__}"
        found.append((energy, _read_int(package / "max_energy_range_uj")))
    return found, None


class HostSource:
    """The host's readings; `missing` holds why RAPL is not among them, when it is not.

    With one package, CPU_ENERGY_J is its counter as read and `wrap_j` its
    max_energy_range_uj. With several, the packages wrap at different moments, so no
    single wrap value fits their sum: each is unwrapped here and the sum carries no wrap.
    Clock speeds are one file per core, so they are read every `frequency_every` reads.
    """

    name = "host"
    throttle_names: Mapping[int, str] = {}

    def __init__(self, *, sysfs: PathLike = "/sys", procfs: PathLike = "/proc",
                 frequency_every: int = 5) -> None:
        self._sysfs, self._procfs = sysfs, procfs
        self._frequency_every = max(1, frequency_every)
        self._reads = 0
        self._stat: StatSnapshot | None = None
        self._rapl, reason = find_rapl(sysfs)
        self.missing: dict[str, str] = {"rapl": reason} if reason else {}
        self.channel_sources: Mapping[str, str] = {CPU_ENERGY_J: "rapl"}
        self.wrap_j: dict[str, float] = {}
        if len(self._rapl) == 1 and self._rapl[0][1]:
            self.wrap_j[CPU_ENERGY_J] = self._rapl[0][1] * 1e-6
        self._last_uj: list[int | None] = [None] * len(self._rapl)
        self._unwrapped_uj: list[int] = [0] * len(self._rapl)

    def read(self) -> dict[str, float | None]:
        reading: dict[str, float | None] = {CPU_ENERGY_J: self._cpu_energy()}
        if self._reads % self._frequency_every == 0:
            cores = read_frequencies(self._sysfs, self._procfs)
            reading[CPU_FREQ_MHZ] = sum(c.cur_mhz for c in cores) / len(cores) if cores else None
        else:
            reading[CPU_FREQ_MHZ] = None
        self._reads += 1
        load = read_loadavg(self._procfs)
        reading[LOAD1] = load.load1 if load is not None else None
        stat = read_stat(self._procfs)
        window = cpu_window(self._stat, stat) if self._stat and stat else None
        reading[STEAL_PCT] = 100.0 * window.overall.steal if window is not None else None
        self._stat = stat or self._stat
        return reading

    def close(self) -> None:
        """Nothing is held open between reads."""

    def _cpu_energy(self) -> float | None:
        if not self._rapl:
            return None
        values = [_read_int(path) for path, _ in self._rapl]
        if len(values) == 1:
            return values[0] * 1e-6 if values[0] is not None else None
        if any(v is None for v in values):
            return None
        for i, ((_, wrap), value) in enumerate(zip(self._rapl, values, strict=True)):
            assert value is not None
            last = self._last_uj[i]
            if last is not None:
                delta = value - last
                self._unwrapped_uj[i] += delta + (wrap or 0) if delta < 0 else delta
            self._last_uj[i] = value
        return sum(self._unwrapped_uj) * 1e-6
