"""The `validation` family: is this stack correct and complete? Its cases are checks,
which `accelbench validate` runs (every one but the burn-in by default; every one at
`--level 2`, with a burn-in as the level's load; every one but the burn-in at `--level 3`,
whose load is the health family's stress; every one at `--level 4`, whose soak is the
stress and then the burn-in)."""

from accelbench.benchmarks.validation import (
    amp,
    audio,
    burn,
    determinism,
    distributed,
    export,
    memtest,
    numerics,
    recsys,
    text,
    torch_compile,
    vision,
)
from accelbench.core.family import Family

BENCHMARKS = (numerics.BENCHMARK, amp.BENCHMARK, determinism.BENCHMARK,
              torch_compile.BENCHMARK, export.EXPORT, export.ONNX, vision.BENCHMARK,
              audio.BENCHMARK, text.BENCHMARK, recsys.BENCHMARK, memtest.BENCHMARK,
              burn.BENCHMARK, distributed.BENCHMARK)
_EVERY = tuple(b.name for b in BENCHMARKS)
_BUT_BURN_IN = tuple(name for name in _EVERY if name != burn.BENCHMARK.name)

FAMILY = Family(__package__, BENCHMARKS,
                summary="numerics, mixed precision, determinism, compile and export, the "
                "ecosystem libraries, collectives, device memory, burn-in",
                checks=True, levels={2: _EVERY, 3: _BUT_BURN_IN, 4: _EVERY})
