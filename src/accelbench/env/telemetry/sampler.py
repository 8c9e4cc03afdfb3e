"""Sampling the sources in a thread beside a benchmark case, into a Series.

Telemetry is advisory: a source that raises is closed and its channels end there, with
the reason in `Series.stopped`, and the other sources go on. `stop()` always returns a
Series with everything read until then.

The thread holds the GIL for as long as a reading's Python-side work lasts (the vendor
calls themselves go through ctypes, which lets the GIL go): time a timed loop in the same
process cannot run. The runner's workers therefore run it in a process of their own
(env.telemetry.remote: bench/telemetry_gil_overhead.py measured the thread at 1.4-3.6% of
the eager launch case's mean time per call with the host source alone, the child at none
that could be told from noise); the stress and power figures, whose timed work is long
GEMMs on the device, sample in-process.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from accelbench.core.telemetry import Series
from accelbench.env.telemetry.sources import Source

# How long stop() waits for the thread, beyond one interval: a vendor call that hangs
# must not hold the benchmark up.
JOIN_GRACE_S = 2.0


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else ""
    return text[:200]


class TelemetrySampler:
    """`start()`, run the case, `mark_window()` with the timed part, `stop()` for the Series.

    Readings are taken every `interval_s` by a daemon thread; `start(background=False)`
    leaves the ticking to the caller (`tick()`), as tests do with a fake `clock`. `sleep`
    replaces the thread's wait between ticks (default: an Event wait that stop() cuts short).
    """

    def __init__(
        self,
        sources: Sequence[Source],
        missing: Mapping[str, str],
        interval_s: float,
        *,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        if (
            isinstance(interval_s, bool)
            or not isinstance(interval_s, (int, float))
            or not math.isfinite(interval_s)
            or interval_s <= 0
        ):
            raise ValueError(f"interval_s must be a positive finite number, got {interval_s!r}")
        self.interval_s = float(interval_s)
        self._sources = list(sources)
        self._live = list(self._sources)
        self._missing = dict(missing)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0: float | None = None
        self._times: list[float] = []
        self._values: dict[str, list[float | None]] = {}
        self._credited: list[str] = []
        self._stopped: list[str] = []
        self._window: tuple[float, float] | None = None
        self._series: Series | None = None

    # -- lifecycle

    def start(self, background: bool = True) -> TelemetrySampler:
        """Take the first reading and, in the background, start ticking."""
        if self._t0 is not None:
            raise RuntimeError("TelemetrySampler.start() called twice")
        self._t0 = self._clock()
        self.tick()
        if background:
            self._thread = threading.Thread(
                target=self._run, name="accelbench-telemetry", daemon=True
            )
            self._thread.start()
        return self

    def tick(self) -> None:
        """One reading of every live source."""
        with self._lock:
            if self._t0 is None:
                raise RuntimeError("TelemetrySampler.tick() called before start()")
            at = self._clock() - self._t0
            row: dict[str, float | None] = {}
            for source in list(self._live):
                try:
                    reading = source.read()
                except Exception as exc:  # any failure ends this source, never the case
                    self._end(source, f"{source.name} raised {type(exc).__name__} at "
                                      f"{at:.2f} s: {_one_line(exc)}")
                    continue
                credit = getattr(source, "channel_sources", None)
                for channel, value in reading.items():
                    if value is not None and not math.isfinite(value):
                        value = None
                    row[channel] = value
                    if value is not None:
                        label = source.name
                        if isinstance(credit, Mapping) and isinstance(credit.get(channel), str):
                            label = credit[channel]
                        if label not in self._credited:
                            self._credited.append(label)
            count = len(self._times)
            for channel in row.keys() - self._values.keys():
                self._values[channel] = [None] * count
            for channel, values in self._values.items():
                values.append(row.get(channel))
            self._times.append(at)

    def mark_window(self, start: float, end: float) -> None:
        """The timed part of the case, as two readings of this sampler's clock; marked
        again (a case that times twice), the window spans both."""
        if self._t0 is None:
            raise RuntimeError("TelemetrySampler.mark_window() called before start()")
        if not end >= start:
            raise ValueError(f"window end {end} is before its start {start}")
        window = (start - self._t0, end - self._t0)
        if self._window is not None:
            window = (min(self._window[0], window[0]), max(self._window[1], window[1]))
        self._window = window

    def stop(self) -> Series:
        """Stop ticking, take a last reading, close the sources and return the Series."""
        if self._series is not None:
            return self._series
        if self._t0 is None:
            raise RuntimeError("TelemetrySampler.stop() called before start()")
        self._stopping.set()
        if self._thread is not None:
            wait = self.interval_s + JOIN_GRACE_S
            self._thread.join(wait)
            if self._thread.is_alive():
                self._stopped.append(f"the sampling thread did not stop within {wait:.1f} s")
        if not self._lock.acquire(timeout=JOIN_GRACE_S):
            self._stopped.append("the last reading was skipped: a source call hung")
        else:
            self._lock.release()
            self.tick()
        for source in list(self._live):
            self._close(source)
        self._series = self._build()
        return self._series

    def __enter__(self) -> TelemetrySampler:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- internals

    def _run(self) -> None:
        assert self._t0 is not None
        next_at = self._clock() + self.interval_s
        try:
            while not self._stopping.is_set():
                delay = max(0.0, next_at - self._clock())
                if self._sleep is not None:
                    self._sleep(delay)
                    if self._stopping.is_set():
                        return
                elif self._stopping.wait(delay):
                    return
                self.tick()
                now = self._clock()
                next_at += self.interval_s
                if next_at < now:  # fell behind (a slow source): do not burst to catch up
                    next_at = now + self.interval_s
        except Exception as exc:
            self._stopped.append(f"sampling ended: {type(exc).__name__}: {_one_line(exc)}")

    def _end(self, source: Source, why: str) -> None:
        self._stopped.append(why)
        self._close(source)

    def _close(self, source: Source) -> None:
        if source in self._live:
            self._live.remove(source)
        with contextlib.suppress(Exception):
            source.close()

    def _build(self) -> Series:
        wrap: dict[str, float] = {}
        names: dict[int, str] = {}
        shared: dict[str, tuple[str, ...]] = {}
        for source in self._sources:
            source_shared = getattr(source, "shared_by", None)
            if isinstance(source_shared, Mapping):
                shared.update({c: tuple(d) for c, d in source_shared.items() if d})
            source_wrap = getattr(source, "wrap_j", None)
            if isinstance(source_wrap, Mapping):
                wrap.update(source_wrap)
            source_names = getattr(source, "throttle_names", None)
            if isinstance(source_names, Mapping):
                names.update(source_names)
        return Series(
            interval_s=self.interval_s,
            t=tuple(self._times),
            channels={name: tuple(values) for name, values in self._values.items()},
            sources=tuple(self._credited),
            missing=dict(self._missing),
            stopped="; ".join(self._stopped) or None,
            wrap_j=wrap,
            throttle_names=names,
            window=self._window,
            shared_by=shared,
        )
