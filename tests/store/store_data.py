"""A run and its measurements for the store's tests."""

from __future__ import annotations

from typing import Any

from accelbench.core.case import Case
from accelbench.core.measurement import Figure, Measurement
from accelbench.core.request import RunRequest
from fakes import stored_measurement

RUN_ARGS: dict[str, Any] = {
    "fingerprint": {"device": {"name": "AMD Instinct MI250X", "arch": "gfx90a"}, "rocm": "6.2"},
    "fingerprint_id": "fp-mi250x-01",
    "generation_key": "rocm/gfx90a/torch-2.5",
    "device": "cuda:0",
    "suite": "quick",
    "argv": ["run", "--suite", "quick"],
    "host": "node-3",
    "accelbench_version": "0.1.0",
    "request": RunRequest(suite="quick").to_dict(),
}


def sample_measurements() -> list[Measurement]:
    gemm = Case.make("gemm", "v1", "micro", {"shape": 4096, "dtype": "fp16"}, "cuda:0")
    fp8 = Case.make("gemm", "v1", "micro", {"shape": 4096, "dtype": "fp8"}, "cuda:0")
    conv = Case.make("conv2d", "v2", "micro", {"channels": 64}, "cuda:0")
    return [
        stored_measurement(
            case=gemm, status="ok", samples=(1.0e-3, 1.1e-3, 0.1 + 0.2, 9.87654321e-4),
            number=10,
            figures=(Figure("throughput", 1.2345678901234e14, "FLOP/s", True, 3.83e14),
                     Figure("time", 1.05e-3, "s", higher_is_better=False)),
            warnings=("noisy: IQR is 12% of the median",),
            details={"stop_reason": "budget", "warmup_calls": 5},
            started_at=1_750_000_001.25, duration_s=3.5, confidence=0.99,
        ),
        stored_measurement(case=fp8, status="failed", reason="RuntimeError: no fp8 on gfx90a",
                           started_at=1_750_000_005.0, duration_s=0.25),
        stored_measurement(case=conv, status="skipped", reason="MIOpen disabled",
                           started_at=1_750_000_006.0),
    ]
