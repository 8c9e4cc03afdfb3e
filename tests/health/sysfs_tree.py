"""Fake sysfs and procfs trees of a two-socket GPU node, laid out as the kernel lays them
out: PCI devices under /sys/devices/pciDDDD:BB, linked from /sys/bus/pci/devices, NUMA
nodes, EDAC memory controllers, IOMMU groups and hugepages.

The node: socket 0 has a PCIe switch (upstream port 01:00.0, downstream ports 02:00.0,
02:01.0, 02:02.0) with GPU0, GPU1 and a ConnectX NIC below it; socket 1 has GPU2 on its
own root port. Every link runs x16 at 32 GT/s (Gen5), ACS redirect is off, memory is
balanced, no memory or PCIe error is counted. Tests break one thing at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

GEN5, GEN4 = "32.0 GT/s PCIe", "16.0 GT/s PCIe"
GPU0, GPU1, NIC0, GPU2 = "0000:03:00.0", "0000:04:00.0", "0000:05:00.0", "0000:81:00.0"
SWITCH_DOWN = ("0000:02:00.0", "0000:02:01.0", "0000:02:02.0")
AER_CORRECTABLE = ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr",
                   "CorrIntErr", "HeaderOF")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def acs_config(control: int) -> bytes:
    """4 KiB of configuration space with an AER capability at 0x100 and ACS at 0x148."""
    data = bytearray(4096)
    data[0x100:0x104] = (0x0001 | (1 << 16) | (0x148 << 20)).to_bytes(4, "little")
    data[0x148:0x14C] = (0x000D | (1 << 16)).to_bytes(4, "little")
    data[0x14C:0x14E] = (0x005F).to_bytes(2, "little")  # capabilities
    data[0x14E:0x150] = control.to_bytes(2, "little")
    return bytes(data)


@dataclass
class Node:
    sys: Path
    proc: Path

    def device(self, address: str) -> Path:
        return (self.sys / "bus" / "pci" / "devices" / address).resolve()

    def set(self, address: str, name: str, value: str) -> None:
        _write(self.device(address) / name, value + "\n")

    def count_aer(self, address: str, kind: str, name: str, count: int) -> None:
        """Set one AER counter of a device (kind: correctable, nonfatal, fatal)."""
        path = self.device(address) / f"aer_dev_{kind}"
        lines = dict(line.rsplit(" ", 1) for line in path.read_text().splitlines())
        lines[name] = str(count)
        suffix = {"correctable": "COR", "nonfatal": "NONFATAL", "fatal": "FATAL"}[kind]
        total = f"TOTAL_ERR_{suffix}"
        lines[total] = str(sum(int(v) for k, v in lines.items() if not k.startswith("TOTAL")))
        path.write_text("".join(f"{k} {v}\n" for k, v in lines.items()))


def _pci(sys: Path, path: str, class_code: str, vendor: str, numa: int,
         link: tuple[str, int, str, int] | None = (GEN5, 16, GEN5, 16),
         config: bytes | None = None) -> None:
    folder = sys / "devices" / path
    address = folder.name
    _write(folder / "class", class_code + "\n")
    _write(folder / "vendor", vendor + "\n")
    _write(folder / "device", "0x1234\n")
    _write(folder / "numa_node", f"{numa}\n")
    if link:
        speed, width, max_speed, max_width = link
        _write(folder / "current_link_speed", speed + "\n")
        _write(folder / "current_link_width", f"{width}\n")
        _write(folder / "max_link_speed", max_speed + "\n")
        _write(folder / "max_link_width", f"{max_width}\n")
    for kind, names, total in (("correctable", AER_CORRECTABLE, "TOTAL_ERR_COR"),
                               ("nonfatal", ("Undefined", "DLP", "TLP"), "TOTAL_ERR_NONFATAL"),
                               ("fatal", ("Undefined", "DLP", "TLP"), "TOTAL_ERR_FATAL")):
        _write(folder / f"aer_dev_{kind}", "".join(f"{n} 0\n" for n in (*names, total)))
    (folder / "config").write_bytes(config if config is not None else bytes(256))
    link_dir = sys / "bus" / "pci" / "devices"
    link_dir.mkdir(parents=True, exist_ok=True)
    (link_dir / address).symlink_to(folder)


def gpu_node(root: Path) -> Node:
    sys, proc = root / "sys", root / "proc"
    bridge, gpu, nic = "0x060400", "0x030200", "0x020700"
    switch = "pci0000:00/0000:00:01.1/0000:01:00.0"
    _pci(sys, "pci0000:00/0000:00:01.1", bridge, "0x1022", 0)
    _pci(sys, switch, bridge, "0x1000", 0)
    for down in SWITCH_DOWN:
        _pci(sys, f"{switch}/{down}", bridge, "0x1000", 0, config=acs_config(0x0011))
    _pci(sys, f"{switch}/{SWITCH_DOWN[0]}/{GPU0}", gpu, "0x10de", 0)
    _pci(sys, f"{switch}/{SWITCH_DOWN[1]}/{GPU1}", gpu, "0x10de", 0)
    _pci(sys, f"{switch}/{SWITCH_DOWN[2]}/{NIC0}", nic, "0x15b3", 0)
    _pci(sys, "pci0000:80/0000:80:01.1", bridge, "0x1022", 1)
    _pci(sys, f"pci0000:80/0000:80:01.1/{GPU2}", gpu, "0x10de", 1)
    _pci(sys, "pci0000:00/0000:00:14.0", "0x0c0330", "0x1022", 0, link=None)  # USB, no link
    for node, cpus in ((0, "0-31,64-95"), (1, "32-63,96-127")):
        folder = sys / "devices" / "system" / "node" / f"node{node}"
        _write(folder / "cpulist", cpus + "\n")
        _write(folder / "distance", ("10 32" if node == 0 else "32 10") + "\n")
        _write(folder / "meminfo", f"Node {node} MemTotal:       1056714068 kB\n"
                                   f"Node {node} MemFree:        1000000000 kB\n")
    for mc in (0, 1):
        folder = sys / "devices" / "system" / "edac" / "mc" / f"mc{mc}"
        for name in ("ce_count", "ue_count", "ce_noinfo_count", "ue_noinfo_count"):
            _write(folder / name, "0\n")
        _write(folder / "mc_name", "F19h_M10h\n")
        for dimm in (0, 1):
            _write(folder / f"dimm{dimm}" / "dimm_label", f"P{mc}_DIMM_{'AB'[dimm]}1\n")
            _write(folder / f"dimm{dimm}" / "dimm_ce_count", "0\n")
            _write(folder / f"dimm{dimm}" / "dimm_ue_count", "0\n")
    (sys / "class" / "iommu" / "ivhd0").mkdir(parents=True)
    for group, address in enumerate((GPU0, GPU1, NIC0, GPU2)):
        folder = sys / "kernel" / "iommu_groups" / str(group)
        _write(folder / "type", "identity\n")
        (folder / "devices").mkdir()
        (folder / "devices" / address).symlink_to(sys / "bus" / "pci" / "devices" / address)
    for size, total in (("2048kB", 0), ("1048576kB", 16)):
        folder = sys / "kernel" / "mm" / "hugepages" / f"hugepages-{size}"
        _write(folder / "nr_hugepages", f"{total}\n")
        _write(folder / "free_hugepages", f"{total}\n")
    _write(sys / "kernel" / "mm" / "transparent_hugepage" / "enabled",
           "always [madvise] never\n")
    _write(proc / "cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 iommu=pt amd_iommu=on\n")
    _write(proc / "sys" / "kernel" / "numa_balancing", "0\n")
    return Node(sys, proc)
