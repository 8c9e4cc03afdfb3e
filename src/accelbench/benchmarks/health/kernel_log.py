"""GPU faults the kernel logged since boot: NVIDIA's Xid events ("NVRM: Xid (PCI:...): N")
and AMD's GPU resets and RAS errors (amdgpu messages), read from the kernel's log
(/dev/kmsg, readable by root or with CAP_SYSLOG). NVML keeps no history of past Xids;
the kernel log does, until it wraps.

The rule for Xids follows NVIDIA's Xid catalog: those that mean the hardware failed
(a double-bit ECC error, a failed row remapping, a GPU off the bus, an uncontained ECC
error, the GSP not answering, a microcontroller halt) fail; other GPU faults (a row
remapping recorded, an NVLink error, a contained ECC error, a high single-bit rate)
warn; faults an application causes (an illegal address, an MMU fault, a stopped
channel) are recorded.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from accelbench.benchmarks.health.findings import FAIL, PASS, WARN, Finding

XID_FAIL = {48: "double-bit ECC error", 61: "microcontroller breakpoint",
            62: "microcontroller halt", 64: "ECC page retirement or row remapping failed",
            79: "GPU has fallen off the bus", 95: "uncontained ECC error",
            119: "GSP RPC timeout", 120: "GSP error", 140: "unrecovered ECC error"}
XID_APPLICATION = {13: "graphics engine exception", 31: "GPU memory page fault",
                   43: "GPU stopped processing", 45: "preemptive cleanup"}
XID_RULE = ("Xids that mean a hardware fault fail (48, 61, 62, 64, 79, 95, 119, 120, 140); "
            "other GPU Xids warn; application faults (13, 31, 43, 45) are recorded")
AMD_RULE = ("an amdgpu uncorrectable RAS error fails; a GPU reset or a corrected RAS error "
            "warns")
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+)(?:, (.*))?")
_AMDGPU = re.compile(r"amdgpu ([0-9a-fA-F:.]+): amdgpu: (.*)")
_RECORD = re.compile(r"^\d+,\d+,(\d+),[^;]*;(.*)$")


@dataclass(frozen=True)
class Event:
    bus_id: str
    kind: str  # "xid" or "amdgpu"
    code: int | None  # the Xid
    text: str
    seconds: float  # since boot


def kmsg_records(path: str = "/dev/kmsg") -> list[str] | None:
    """The kernel log's records, oldest first; None where it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    out = []
    try:
        while True:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # overwritten while read: skip to the next
                    continue
                break
            if not record:
                break
            out.append(record.decode("utf-8", "replace").rstrip("\n"))
    finally:
        os.close(fd)
    return out


def events(records: Iterable[str]) -> Iterator[Event]:
    for record in records:
        match = _RECORD.match(record)
        if not match:
            continue
        seconds, text = int(match[1]) / 1e6, match[2]
        xid = _XID.search(text)
        if xid:
            yield Event(xid[1].lower(), "xid", int(xid[2]), (xid[3] or "").strip(), seconds)
            continue
        amd = _AMDGPU.search(text)
        if amd and re.search(r"GPU reset|RAS|uncorrectable|poison", amd[2], re.IGNORECASE):
            yield Event(amd[1].lower(), "amdgpu", None, amd[2].strip(), seconds)


def findings(found: Iterable[Event]) -> list[Finding]:
    """One finding per GPU that logged an event, with each event it logged."""
    by_gpu: dict[str, list[Event]] = {}
    for e in found:
        by_gpu.setdefault(e.bus_id, []).append(e)
    out = []
    for bus_id, logged in sorted(by_gpu.items()):
        levels = [_level(e) for e in logged]
        level = FAIL if FAIL in levels else WARN if WARN in levels else PASS
        shown = "; ".join(_describe(e) for e in logged[:5])
        more = f"; {len(logged) - 5} more" if len(logged) > 5 else ""
        rule = XID_RULE if logged[0].kind == "xid" else AMD_RULE
        out.append(Finding(bus_id, level, rule, f"{len(logged)} GPU events since boot: "
                           f"{shown}{more}",
                           {"events": [{"kind": e.kind, "code": e.code, "text": e.text[:200],
                                        "seconds": e.seconds} for e in logged[:50]]}))
    return out


def _level(e: Event) -> str:
    if e.kind == "xid":
        if e.code in XID_FAIL:
            return FAIL
        return PASS if e.code in XID_APPLICATION else WARN
    return FAIL if re.search(r"uncorrectable|poison", e.text, re.IGNORECASE) else WARN


def _describe(e: Event) -> str:
    if e.kind == "xid":
        name = XID_FAIL.get(e.code or 0) or XID_APPLICATION.get(e.code or 0) or ""
        return f"Xid {e.code}" + (f" ({name})" if name else "") + f" at {e.seconds:.0f} s"
    return f"{e.text[:80]} at {e.seconds:.0f} s"
