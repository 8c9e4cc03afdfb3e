"""Shared by the bench scripts: alternate two measurements and print their ratio; keep
the cores busy beside them."""

from __future__ import annotations

import contextlib
import multiprocessing
import statistics
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbench.core.context import DistInfo
    from accelbench.core.device import DeviceInfo
    from accelbench.core.measurement import Measurement
    from accelbench.core.timing import Coordinator, TimingPolicy
    from accelbench.runner.plan import PlannedCase


def alternate(
    rounds: int, ours: Callable[[], float], plain: Callable[[], float], scale: float = 1.0
) -> tuple[list[float], list[float]]:
    """Measure both `rounds` times, alternating which goes first so that warm-up and the
    machine's drift favour neither; print each round's figures and ratio."""
    a_values: list[float] = []
    p_values: list[float] = []
    for i in range(rounds):
        if i % 2 == 0:
            a, p = ours(), plain()
        else:
            p = plain()
            a = ours()
        a_values.append(a)
        p_values.append(p)
        print(f"{i + 1:>5} {a / scale:>20.2f} {p / scale:>20.2f} {a / p:>7.3f}")
    return a_values, p_values


def verdict(ours: list[float], plain: list[float], target: float,
            names: tuple[str, str] = ("accelbench", "plain")) -> int:
    """Print the median ratio and each method's spread; 0 when the target is met."""

    def spread(xs: list[float]) -> float:
        return statistics.stdev(xs) / statistics.mean(xs) if len(xs) > 1 else 0.0

    ratio = statistics.median(a / p for a, p in zip(ours, plain, strict=True))
    mine, theirs = names
    print(f"median ratio {mine}/{theirs}: {ratio:.3f} (target >= {target})")
    print(f"spread across rounds (CV): {mine} {spread(ours):.1%}, {theirs} {spread(plain):.1%}")
    return 0 if ratio >= target else 1


def measured(planned: PlannedCase, device: DeviceInfo, policy: TimingPolicy, figure: str,
             info: DistInfo | None = None, coordinator: Coordinator | None = None,
             ) -> tuple[float, Measurement]:
    """accelbench's own measurement of the case, as a run's worker takes it, and the value
    of its `figure`; the script ends, saying why, when the case failed."""
    from accelbench.core.timing import SOLO
    from accelbench.runner.worker import execute_case

    measurement = execute_case(planned, device, policy, info, coordinator or SOLO)
    value = measurement.figure(figure)
    if not measurement.ok or value is None:
        raise SystemExit(f"accelbench's {planned.case.benchmark} case failed: "
                         f"{measurement.reason or f'no {figure} figure'}")
    return value.value, measurement


def _spin(stop: Any) -> None:
    while not stop.is_set():
        pass


@contextlib.contextmanager
def spinning(processes: int) -> Iterator[None]:
    """`processes` processes each spinning a core for as long as the block runs."""
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
                for _ in range(processes)]
    for p in spinners:
        p.start()
    try:
        yield
    finally:
        stop.set()
        for p in spinners:
            p.join()
