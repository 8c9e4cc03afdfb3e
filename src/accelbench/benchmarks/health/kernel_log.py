"""GPU faults the kernel logged since boot, judged (env.kernel_log reads and parses them,
and gives each event its level): one finding per GPU that logged an event, as bad as the
worst of its events. Messages that are no fault (amdgpu setting RAS up at boot, a RAS
count of 0) are no event, so a GPU that logged only those has no finding."""

from __future__ import annotations

from collections.abc import Iterable

from accelbench.benchmarks.health.findings import FAIL, PASS, WARN, Finding
from accelbench.env.kernel_log import AMD_RULE, XID_RULE, Event, events, kmsg_records

__all__ = ["AMD_RULE", "XID_RULE", "events", "findings", "kmsg_records"]


def findings(found: Iterable[Event]) -> list[Finding]:
    """One finding per GPU that logged an event, with each event it logged."""
    by_gpu: dict[str, list[Event]] = {}
    for e in found:
        by_gpu.setdefault(e.bus_id, []).append(e)
    out = []
    for bus_id, logged in sorted(by_gpu.items()):
        levels = [e.level for e in logged]
        level = FAIL if FAIL in levels else WARN if WARN in levels else PASS
        shown = "; ".join(e.describe() for e in logged[:5])
        more = f"; {len(logged) - 5} more" if len(logged) > 5 else ""
        rule = XID_RULE if logged[0].kind == "xid" else AMD_RULE
        out.append(Finding(bus_id, level, rule, f"{len(logged)} GPU events since boot: "
                           f"{shown}{more}",
                           {"events": [{"kind": e.kind, "code": e.code, "text": e.text[:200],
                                        "seconds": e.seconds} for e in logged[:50]]},
                           "ACCEL_GPU_FAULT"))
    return out
