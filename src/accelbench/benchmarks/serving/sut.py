"""The system under test LoadGen drives: a queue and one worker thread running the engine.

LoadGen calls `issue` from its own thread with the samples of a query; the SUT puts the
query on a queue and returns at once, so LoadGen keeps its schedule (Server's Poisson
arrivals) whatever the engine does. One worker thread takes queries in order, runs the
engine on up to `batch` samples per call (a partial batch is padded to the engine's
fixed shape), waits for the device, and tells LoadGen each sample is complete. It also
keeps, for goodput, each query's latency from its issue to its last sample's completion,
and each engine call's service time.

An error in the engine completes the query's samples anyway (LoadGen would wait for them
forever) and is raised after the test.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

_STOP = None


class QueueSUT:
    def __init__(self, lg: Any, run_batch: Callable[[Sequence[int]], None], batch: int,
                 context: Callable[[], AbstractContextManager[Any]] = nullcontext,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self._lg = lg
        self._run_batch = run_batch
        self._batch = batch
        self._context = context  # entered by the worker thread (inference mode is per thread)
        self._clock = clock
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.query_latencies: list[float] = []
        self.service_times: list[float] = []
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="accelbench-sut", daemon=True)

    def __enter__(self) -> QueueSUT:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._queue.put(_STOP)
        self._thread.join()

    def issue(self, query_samples: Any) -> None:
        self._queue.put((self._clock(), [(s.id, s.index) for s in query_samples]))

    def flush(self) -> None:
        """LoadGen's flush: nothing is held back, so nothing to do."""

    def _work(self) -> None:
        with self._context():
            while True:
                item = self._queue.get()
                if item is _STOP:
                    return
                issued, samples = item
                for start in range(0, len(samples), self._batch):
                    chunk = samples[start:start + self._batch]
                    if self.error is None:
                        began = self._clock()
                        try:
                            self._run_batch([index for _, index in chunk])
                        except BaseException as exc:  # told after the test
                            self.error = exc
                        self.service_times.append(self._clock() - began)
                    self._lg.QuerySamplesComplete(
                        [self._lg.QuerySampleResponse(sid, 0, 0) for sid, _ in chunk])
                self.query_latencies.append(self._clock() - issued)
