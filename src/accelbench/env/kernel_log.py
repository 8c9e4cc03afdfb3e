"""GPU faults the kernel logged: NVIDIA's Xid events ("NVRM: Xid (PCI:...): N") and AMD's
GPU resets and RAS errors (amdgpu messages), read from the kernel's log (/dev/kmsg,
readable by root or with CAP_SYSLOG). NVML keeps no history of past Xids; the kernel log
does, until it wraps.

Two readers: `kmsg_records` reads the whole log (the health family's faults since boot),
and `KernelWatch` reads only what is logged after it opened (the faults during one case).

The level of an event follows NVIDIA's Xid catalog: those that mean the hardware failed
(a double-bit ECC error, a failed row remapping, a GPU off the bus, an uncontained ECC
error, the GSP not answering, a microcontroller halt) fail; other GPU faults (a row
remapping recorded, an NVLink error, a contained ECC error, a high single-bit rate)
warn; faults an application causes (an illegal address, an MMU fault, a stopped
channel) are recorded. amdgpu's RAS errors are judged by their kind, as the health
family's ECC counters are (benchmarks.health.gpu): an uncorrectable or a deferred error
(data the hardware could not correct, marked poisoned) fails, a corrected one warns; a
GPU reset warns. What amdgpu says about RAS itself (set up at boot, its firmware absent,
a count of 0) is no fault.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

KMSG = "/dev/kmsg"
PASS, WARN, FAIL = "pass", "warn", "fail"
XID_FAIL = {48: "double-bit ECC error", 61: "microcontroller breakpoint",
            62: "microcontroller halt", 64: "ECC page retirement or row remapping failed",
            79: "GPU has fallen off the bus", 95: "uncontained ECC error",
            119: "GSP RPC timeout", 120: "GSP error", 140: "unrecovered ECC error"}
XID_APPLICATION = {13: "graphics engine exception", 31: "GPU memory page fault",
                   43: "GPU stopped processing", 45: "preemptive cleanup"}
XID_RULE = ("Xids that mean a hardware fault fail (48, 61, 62, 64, 79, 95, 119, 120, 140); "
            "other GPU Xids warn; application faults (13, 31, 43, 45) are recorded")
AMD_RULE = ("an amdgpu uncorrectable or deferred RAS error, a poison consumption or retired "
            "pages past the threshold fail; a corrected RAS error or a GPU reset warns")
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+)(?:, (.*))?")
# "amdgpu 0000:9d:00.0: " is dev_printk's device prefix. dev_info adds amdgpu's own
# "amdgpu: " (its dev_fmt in amdgpu.h, which the newest kernels drop); newer kernels
# print the RAS error lines through RAS_EVENT_LOG (amdgpu_ras_event_log_print), a bare
# dev_printk that leaves it out and puts the RAS event's id first:
# "amdgpu 0000:9d:00.0: {1}socket: 6, die: 1, 1533 new correctable hardware errors ...".
_AMDGPU = re.compile(r"amdgpu ([0-9a-fA-F]+:[0-9a-fA-F:.]+): (?:amdgpu: )?(?:\{\d+\} ?)?(.*)")
# amdgpu's RAS error counts, as drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c prints them
# (amdgpu_ras_error_print_error_data, amdgpu_ras_error_generate_report), with the same
# words in amdgpu_umc.c and drivers/gpu/drm/amd/ras/rascore/ras_aca.c:
#   "socket: %d, die: %d, %lld new correctable hardware errors detected in %s block"
#   "socket: %d, die: %d, %lld correctable hardware errors detected in total in %s block"
#   "socket: %d, die: %d, %lld new deferred hardware errors detected in %s block"
#   "socket: %d, die: %d, %lld deferred hardware errors detected in total in %s block"
#   "socket: %d, die: %d, %lld new uncorrectable hardware errors detected in %s block"
#   "socket: %d, die: %d, %lld uncorrectable hardware errors detected in total in %s block"
#   "socket: %d, die: %d %ld correctable hardware errors detected in %s block"
#   "%ld uncorrectable hardware errors detected in %s block"  (and correctable, deferred)
#   "%ld new deferred hardware errors detected"  (amdgpu_umc.c)
#   "{%llu} socket: %d, die: %d, %u new poison consumption detected in %s block"
# (older kernels end a corrected count with ", no user action is needed"). The "in total"
# lines are printed for every socket and die that ever logged an error, so a count of 0
# is common.
_AMD_COUNT = re.compile(r"\b(\d+) (?:new )?(correctable hardware|uncorrectable hardware|"
                        r"deferred hardware|poison consumption)\b", re.IGNORECASE)
# The bad-page table past its threshold (amdgpu_ras_eeprom.c): the GPU is to be replaced
# ("RAS records:%d exceed threshold:%d"), or nearly ("RAS records:%u exceeds 90%% of
# threshold:%d").
_AMD_THRESHOLD = re.compile(r"RAS records:\s*\d+ exceeds? (90% of )?threshold", re.IGNORECASE)
# A fatal error with no count ("uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT)
# detected!", amdgpu_ras_global_ras_isr), and poison created or consumed ("Poison is
# created, no user action is needed.", "GPU reset for %s RAS poison consumption is
# issued!"): the error a deferred count reports.
_AMD_FATAL = re.compile(r"uncorrectable|poison", re.IGNORECASE)
_AMD_RESET = re.compile(r"GPU reset", re.IGNORECASE)
_RECORD = re.compile(r"^\d+,\d+,(\d+),[^;]*;(.*)$")
_CHUNK = 8192  # /dev/kmsg returns one record per read, at most this long


@dataclass(frozen=True)
class Event:
    bus_id: str  # as the driver wrote it: "0000:3b:00" (NVIDIA), "0000:c1:00.0" (amdgpu)
    kind: str  # "xid" or "amdgpu"
    code: int | None  # the Xid
    text: str
    seconds: float  # since boot

    @property
    def level(self) -> str:
        """FAIL (a hardware fault), WARN (another GPU fault) or PASS (an application's)."""
        if self.kind == "xid":
            if self.code in XID_FAIL:
                return FAIL
            return PASS if self.code in XID_APPLICATION else WARN
        return amdgpu_level(self.text) or PASS

    def describe(self) -> str:
        if self.kind == "xid":
            name = XID_FAIL.get(self.code or 0) or XID_APPLICATION.get(self.code or 0) or ""
            return f"Xid {self.code}" + (f" ({name})" if name else "") + \
                f" at {self.seconds:.0f} s"
        # 100: the longest RAS count line of amdgpu (about 90) reads whole
        return f"{self.text[:100]} at {self.seconds:.0f} s"

    def on(self, address: str) -> bool:
        """Whether the event is about the device at PCI `address` ("0000:3b:00.0"); the
        driver's bus id may leave out the function, or the domain's leading zeros."""
        mine = _pci_parts(address)
        theirs = _pci_parts(self.bus_id)
        return mine is not None and theirs is not None and mine[:3] == theirs[:3]

    def to_dict(self) -> dict[str, Any]:
        return {"bus_id": self.bus_id, "kind": self.kind, "code": self.code,
                "text": self.text[:200], "seconds": self.seconds, "level": self.level}


def amdgpu_level(text: str) -> str | None:
    """FAIL or WARN for an amdgpu message (after its device prefix) that tells of a GPU
    fault, None for one that does not. A message with counts is judged by its counts
    alone, so that "0 uncorrectable hardware errors detected in total" is no fault."""
    counts = [(int(n), kind.lower()) for n, kind in _AMD_COUNT.findall(text)]
    if counts:
        levels = [WARN if kind.startswith("correctable") else FAIL for n, kind in counts if n]
        return FAIL if FAIL in levels else WARN if levels else None
    threshold = _AMD_THRESHOLD.search(text)
    if threshold:
        return WARN if threshold[1] else FAIL
    if _AMD_FATAL.search(text):
        return FAIL
    return WARN if _AMD_RESET.search(text) else None


def _pci_parts(text: str) -> tuple[int, ...] | None:
    parts = re.split(r"[:.]", text.strip())
    if len(parts) == 2:  # bus:device, no domain
        parts = ["0", *parts]
    try:
        return tuple(int(p, 16) for p in parts[:4])
    except ValueError:
        return None


def kmsg_records(path: str = KMSG) -> list[str] | None:
    """The kernel log's records, oldest first; None where it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return _read_records(fd)
    finally:
        os.close(fd)


def _read_records(fd: int) -> list[str]:
    """Every record left to read from `fd`, one line each: /dev/kmsg gives one record per
    read, a record's dictionary (" SUBSYSTEM=pci", " DEVICE=+pci:...") on indented lines
    after it, which are left out; a plain file (a saved log) gives many lines at once."""
    out: list[str] = []
    while True:
        try:
            record = os.read(fd, _CHUNK)
        except BlockingIOError:
            break
        except OSError as exc:
            if exc.errno == errno.EPIPE:  # overwritten while read: skip to the next
                continue
            break
        if not record:
            break
        out.extend(line for line in record.decode("utf-8", "replace").split("\n")
                   if line and not line.startswith(" "))
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
        if amd and amdgpu_level(amd[2]) is not None:
            yield Event(amd[1].lower(), "amdgpu", None, amd[2].strip(), seconds)


class KernelWatch:
    """The GPU faults logged from the moment it opens: the log is opened at its end (as
    `dmesg --follow` does), so `read()` gives only what was written since, without
    reading the log's past each time."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    @classmethod
    def open(cls, path: str = KMSG) -> KernelWatch | None:
        """None where the log cannot be read (not root, no CAP_SYSLOG, no such file)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            os.lseek(fd, 0, os.SEEK_END)
        except OSError:
            os.close(fd)
            return None
        return cls(fd)

    def records(self) -> list[str]:
        """The records logged since the last read (or the opening)."""
        return [] if self._fd is None else _read_records(self._fd)

    def read(self) -> list[Event]:
        """The GPU faults logged since the last read (or the opening)."""
        return list(events(self.records()))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> KernelWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
